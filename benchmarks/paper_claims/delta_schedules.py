"""Does an adaptive delta with default parameters match a tuned fixed delta? (issue 24, item 3)

Per dataset, AS-Softmax trains in four ways on the same tokenized data, one process:

- ``fixed_paper``: the paper's delta and warm-up r for the dataset (its registry entry);
- ``fixed_tuned``: the fixed delta that won a small search: one run per delta of ``--tune-deltas``
  on a tuning seed kept apart from the evaluation seeds, chosen by its best validation metric;
- ``target_mask`` and ``ema``: the adaptive schedules (astune/losses/delta.py) with their default
  parameters, starting from the paper's delta after the same warm-up.

Each evaluation seed trains the four in a rotated order. Reported per variant: the test metric
(mean +- 95% t interval over seeds), the difference to ``fixed_tuned`` paired by seed with its
interval and p-value (``astune.confirmation.stats``, the statistics of ``astune confirm``), and the
``delta_now`` and ``masked_ratio`` curves over training (PNG). An adaptive schedule **matches**
the tuned delta when the paired interval lies inside +-``--equal-within`` points, **is worse**
when it lies below 0, else the seeds **cannot tell**.

Usage (CPU, the scale of benchmarks/RESULTS.md):
  HF_HUB_OFFLINE=1 nice -n 5 python -m benchmarks.paper_claims.delta_schedules --data-dir
  ../shared/data \\
      --datasets sst5 --num-layers 2 --max-train-samples 1000 --epochs 8 --threads 1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from astune.config import TrainConfig
from astune.confirmation.stats import paired_difference, t_interval
from astune.data.encoded import load_encoded
from astune.data.registry import get_spec
from astune.losses.catalogue import family_loss
from astune.training import fit
from benchmarks.common import provenance
from benchmarks.common.harness import add_scale_args, config_from_args, machine_line
from benchmarks.paper_claims import RESULTS

VARIANTS = ("fixed_paper", "fixed_tuned", "target_mask", "ema")
ADAPTIVE = {"target_mask": "target-mask", "ema": "ema"}
REFERENCE = "fixed_tuned"
CURVE_KEYS = ("epoch", "delta_now", "masked_ratio", "objective")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default="sst5", help="comma-separated registry names")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--seeds", type=int, default=3, help="evaluation seeds 1..N")
    p.add_argument("--tune-seed", type=int, default=0, help="the seed of the tuning runs")
    p.add_argument("--tune-deltas", default="0.1,0.2,0.3,0.5")
    p.add_argument("--equal-within", type=float, default=0.02, help="metric points, as 0-1")
    add_scale_args(
        p, max_train_samples=1000, max_eval_samples=400, max_length=48, epochs=8, lr=3e-4,
        eval_every=32,
    )  # fmt: skip
    p.add_argument("--json", default=str(RESULTS / "delta_schedules_cpu.json"))
    p.add_argument("--plot", default=str(RESULTS / "delta_schedules.png"))
    p.add_argument("--from-json", default=None, help="report earlier --json files (comma list)")
    args = p.parse_args(argv)
    if args.seeds < 2:
        p.error(f"--seeds must be at least 2 (an interval needs two runs), but got {args.seeds}")
    if args.tune_seed in range(1, args.seeds + 1):
        p.error(f"--tune-seed {args.tune_seed} is an evaluation seed (1..{args.seeds})")
    return args


def base_config(name: str, args: argparse.Namespace) -> TrainConfig:
    """AS-Softmax on ``name`` at the paper's delta and r, at this benchmark's scale."""
    spec = get_spec(name)
    return config_from_args(
        TrainConfig,
        args,
        dataset=name,
        loss=family_loss("as_softmax", spec.task),
        delta=spec.delta if spec.delta is not None else 0.3,
        warmup_ratio=spec.warmup_ratio or 0.0,
    )


def variant_config(base: TrainConfig, variant: str, tuned_delta: float, seed: int) -> TrainConfig:
    """``base`` (the paper's delta) as one of :data:`VARIANTS`, at ``seed``."""
    config = dataclasses.replace(base, seed=seed)
    if variant == "fixed_tuned":
        config = dataclasses.replace(config, delta=tuned_delta)
    elif variant in ADAPTIVE:
        config = dataclasses.replace(config, delta_schedule=ADAPTIVE[variant])
    return config.validate()


def one_run(config: TrainConfig, data: Any, metric: str) -> dict[str, Any]:
    """Train once: the test and best validation metric, the training seconds and the curves."""
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        final = fit(
            dataclasses.replace(config, output_dir=folder),
            data=data,
            callback=lambda record, _: records.append(dict(record)),
        )
    return {
        "delta": config.delta,
        "test": float(final[f"test_{metric}"]),
        "val": float(final[f"val_{metric}"]),
        "seconds": float(final["train_seconds"]),
        "curve": {key: [float(r[key]) for r in records] for key in CURVE_KEYS},
    }


def tune(base: TrainConfig, data: Any, metric: str, args: argparse.Namespace) -> dict[str, Any]:
    """One run per delta of ``--tune-deltas`` at the tuning seed; the best by validation."""
    runs = []
    for delta in (float(d) for d in args.tune_deltas.split(",")):
        config = dataclasses.replace(base, delta=delta, seed=args.tune_seed).validate()
        runs.append(one_run(config, data, metric))
        print(f"  tune delta {delta:.2f}: val {metric} {runs[-1]['val']:.4f}", flush=True)
    best = max(runs, key=lambda r: r["val"])
    return {"runs": runs, "delta": best["delta"]}


def run_dataset(name: str, args: argparse.Namespace) -> dict[str, Any]:
    spec = get_spec(name)
    base = base_config(name, args)
    data = load_encoded(base)
    print(f"{name}: paper delta {base.delta}, r {base.warmup_ratio}", flush=True)
    tuning = tune(base, data, spec.metric, args)
    print(f"  tuned delta: {tuning['delta']:.2f}", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    done: dict[str, dict[str, Any]] = {}  # a tuned delta equal to the paper's trains once
    for seed in range(1, args.seeds + 1):
        turn = seed % len(VARIANTS)
        for variant in VARIANTS[turn:] + VARIANTS[:turn]:
            started = time.perf_counter()
            config = variant_config(base, variant, tuning["delta"], seed)
            key = json.dumps(config.to_dict(), sort_keys=True, default=str)
            got = done.get(key) or one_run(config, data, spec.metric)
            done[key] = got
            runs[variant].append(got)
            print(
                f"  seed {seed} {variant:<12} test {spec.metric} {got['test']:.4f}  "
                f"final delta {got['curve']['delta_now'][-1]:.3f}  "
                f"({time.perf_counter() - started:.0f} s wall)",
                flush=True,
            )
    return {
        "dataset": name,
        "metric": spec.metric,
        "paper_delta": base.delta,
        "warmup_ratio": base.warmup_ratio,
        "tuning": tuning,
        "runs": runs,
    }


def summarize(result: dict[str, Any], equal_within: float) -> dict[str, dict[str, Any]]:
    """Per variant: the test interval, the paired difference to the tuned delta, a verdict."""
    reference = [r["test"] for r in result["runs"][REFERENCE]]
    rows = {}
    for variant in VARIANTS:
        values = [r["test"] for r in result["runs"][variant]]
        interval = t_interval(values)
        row: dict[str, Any] = {"mean": interval.mean, "low": interval.low, "high": interval.high}
        if variant != REFERENCE:
            diff = paired_difference(values, reference)
            low, high = diff.interval.low, diff.interval.high
            row.update(diff_mean=diff.interval.mean, diff_low=low, diff_high=high, p=diff.p_value)
            row["verdict"] = verdict(low, high, equal_within)
        rows[variant] = row
    return rows


def verdict(low: float, high: float, equal_within: float) -> str:
    """matches / is worse / is better / cannot tell, from the paired 95% interval."""
    if math.isnan(low):
        return "cannot tell"
    if -equal_within <= low and high <= equal_within:
        return "matches"
    if high < 0:
        return "is worse"
    if low > 0:
        return "is better"
    return "cannot tell"


def markdown(result: dict[str, Any], summary: dict[str, Any], equal_within: float) -> str:
    name, metric = result["dataset"], result["metric"]
    n = len(result["runs"][REFERENCE])
    tuned = ", ".join(f"{r['delta']:.2f}: {r['val']:.4f}" for r in result["tuning"]["runs"])
    lines = [
        f"### {name} ({n} seeds; test {metric})",
        "",
        f"Paper delta {result['paper_delta']:.2f}, r {result['warmup_ratio']:.2f}. Tuning "
        f"(validation {metric} at the tuning seed, by delta): {tuned}; tuned delta "
        f"**{result['tuning']['delta']:.2f}**.",
        "",
        f"| variant | test {metric} (mean +- 95% CI) | - fixed_tuned, paired [95% CI] | p "
        f"| final delta_now (mean) | verdict (within +-{equal_within:.2f}) |",
        "|---|---|---|---|---|---|",
    ]
    for variant in VARIANTS:
        row, runs = summary[variant], result["runs"][variant]
        half = (row["high"] - row["low"]) / 2
        final = sum(r["curve"]["delta_now"][-1] for r in runs) / len(runs)
        if variant == REFERENCE:
            diff, p, said = "-", "-", "(reference)"
        else:
            diff = f"{row['diff_mean']:+.4f} [{row['diff_low']:+.4f}, {row['diff_high']:+.4f}]"
            p, said = f"{row['p']:.3g}", f"**{row['verdict']}**"
        lines.append(
            f"| {variant} | {row['mean']:.4f} +- {half:.4f} | {diff} | {p} | {final:.3f} | {said} |"
        )
    return "\n".join(lines) + "\n"


def plot(results: list[dict[str, Any]], path: str) -> None:
    """Per dataset: delta_now and masked_ratio against epochs, a line per run."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 3.4 * len(results)), dpi=100)
    FigureCanvasAgg(figure)
    for i, result in enumerate(results):
        for j, key in enumerate(("delta_now", "masked_ratio")):
            ax = figure.add_subplot(len(results), 2, 2 * i + j + 1)
            for k, variant in enumerate(VARIANTS):
                for s, run in enumerate(result["runs"][variant]):
                    curve = run["curve"]
                    ax.plot(
                        curve["epoch"],
                        curve[key],
                        color=f"C{k}",
                        lw=1.2,
                        alpha=0.8,
                        ls="--" if variant == "fixed_paper" else "-",  # may equal fixed_tuned
                        label=variant if s == 0 else None,
                    )
            ax.set_xlabel("epoch")
            ax.set_title(f"{result['dataset']}: {key}", fontsize=9)
            ax.grid(alpha=0.3)
            if j == 0:
                ax.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    if args.from_json:
        files = [json.loads(Path(f).read_text()) for f in args.from_json.split(",") if f]
        results = [result for earlier in files for result in earlier["results"]]
        machine = files[0]["machine"]
    else:
        results = [run_dataset(n.strip(), args) for n in args.datasets.split(",") if n.strip()]
        machine = machine_line("auto", threads=torch.get_num_threads())
    print(f"\nmachine: {machine}; wall {time.perf_counter() - started:.0f} s\n")
    for result in results:
        summary = summarize(result, args.equal_within)
        print(markdown(result, summary, args.equal_within))
    if not args.from_json:
        Path(args.json).write_text(
            json.dumps({"args": vars(args), "machine": machine, "results": results}, indent=1)
        )
    plot(results, args.plot)
    inputs = provenance.data_inputs(args.data_dir, sorted({r["dataset"] for r in results}))
    written = [args.plot] if args.from_json else [args.plot, args.json]
    provenance.record_each(written, inputs=inputs, machine=machine)
    print(f"wrote {args.plot}" + ("" if args.from_json else f" and {args.json}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
