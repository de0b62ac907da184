"""The paper's claims over seeds: softmax vs AS-Softmax (the paper's delta) vs AS-Speed vs AS-Skip.

For each dataset and seed the three variants train on the same tokenized data, one after another
in one process (rotated order per seed, so that a slow patch of a shared machine does not land
on one variant only). AS-Skip (astune's, not the paper's) is AS-Softmax with AS-Skip at its
defaults. Per variant: mean +- 95% t interval of the test metric, of the training
time (``train_seconds``: evaluations excluded) and of the Pearson correlation between the
validation loss and the validation metric over the evaluations of a run; and the difference to
softmax paired by seed, with its interval and the paired t-test's p-value
(``astune.confirmation.stats``, the statistics of ``astune confirm``).

Claims (paper, Lv et al.): AS-Softmax scores at least as well as softmax; AS-Speed trains
faster than softmax; the validation loss of AS-Softmax tracks its metric (SST-5: r = -0.952)
where softmax's does not (r = 0.038). Each is marked supported (the paired 95% interval lies on
the claimed side of 0), not supported (on the other side) or inconclusive (it contains 0).

Usage (CPU, the scale of benchmarks/RESULTS.md):
  HF_HUB_OFFLINE=1 nice -n 10 python -m benchmarks.paper_claims.paper_claims --data-dir
  ../shared/data \\
      --datasets sst5 --seeds 3 --num-layers 2 --max-train-samples 400 --epochs 3
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
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

VARIANTS = ("softmax", "as_softmax", "as_speed", "as_skip")
DEFAULT_JSON = RESULTS / "paper_claims_cpu.json"
DEFAULT_PLOT = RESULTS / "paper_claims.png"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default="sst5", help="comma-separated registry names")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--seeds", type=int, default=3)
    add_scale_args(p)
    p.add_argument(
        "--json",
        default=None,
        help=f"every run's numbers ('' to skip; default: {DEFAULT_JSON.name} in "
        "benchmarks/<study>/results after training, nothing with --from-json)",
    )
    p.add_argument(
        "--plot",
        default=None,
        help=f"the figure ('' to skip; default: {DEFAULT_PLOT.name} in benchmarks/<study>/results "
        "after training, nothing with --from-json)",
    )
    p.add_argument(
        "--from-json",
        default=None,
        help="summarize the runs of earlier --json files (comma-separated) in one report and plot",
    )
    args = p.parse_args(argv)
    if args.seeds < 2:
        p.error(f"--seeds must be at least 2 (an interval needs two runs), but got {args.seeds}")
    if not args.from_json:  # a training run keeps its numbers unless told not to
        args.json = str(DEFAULT_JSON) if args.json is None else args.json
        args.plot = str(DEFAULT_PLOT) if args.plot is None else args.plot
    return args


def variant_config(base: TrainConfig, variant: str, task: str, spec: Any) -> TrainConfig:
    """``base`` as softmax, AS-Softmax (the paper's delta and r), AS-Softmax + AS-Speed (the
    paper's lambda and s) or AS-Softmax + AS-Skip (its defaults)."""
    import dataclasses

    if variant == "softmax":
        return dataclasses.replace(base, loss=family_loss("softmax", task))
    as_loss = dataclasses.replace(
        base,
        loss=family_loss("as_softmax", task),
        delta=spec.delta if spec.delta is not None else 0.3,
        warmup_ratio=spec.warmup_ratio or 0.0,
    )
    if variant == "as_softmax":
        return as_loss
    if variant == "as_skip":
        return dataclasses.replace(as_loss, as_skip=True)
    return dataclasses.replace(
        as_loss,
        as_speed=True,
        lam=spec.lam or as_loss.lam,
        max_accum_steps=spec.max_accum_steps or as_loss.max_accum_steps,
    )


def one_run(config: TrainConfig, data: Any, metric: str) -> dict[str, float]:
    """Train once; the test metric, the training seconds and r(val_loss, val_metric)."""
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        final = fit(
            TrainConfig(**{**config.to_dict(), "output_dir": folder}),
            data=data,
            callback=lambda record, _: records.append(dict(record)),
        )
    losses = [r["val_loss"] for r in records]
    scores = [r[f"val_{metric}"] for r in records]
    r = float(np.corrcoef(losses, scores)[0, 1]) if len(records) > 2 else math.nan
    return {
        "test": float(final[f"test_{metric}"]),
        "val": float(final[f"val_{metric}"]),
        "seconds": float(final["train_seconds"]),
        "r": r,
        "evaluations": len(records),
        "computed": final["samples_computed"] / max(1, final["samples_seen"]),
    }


def run_dataset(name: str, args: argparse.Namespace) -> dict[str, Any]:
    spec = get_spec(name)
    base = config_from_args(TrainConfig, args, dataset=name)
    data = load_encoded(base)
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    for seed in range(1, args.seeds + 1):
        turn = seed % len(VARIANTS)
        order = VARIANTS[turn:] + VARIANTS[:turn]
        for variant in order:
            config = variant_config(base, variant, spec.task, spec)
            config = TrainConfig(**{**config.to_dict(), "seed": seed}).validate()
            started = time.perf_counter()
            runs[variant].append(one_run(config, data, spec.metric))
            got = runs[variant][-1]
            print(
                f"  {name} seed {seed} {variant:<10} test {spec.metric} {got['test']:.4f}  "
                f"train {got['seconds']:.1f} s  r {got['r']:+.3f}  "
                f"computed {got['computed']:.0%}  "
                f"({time.perf_counter() - started:.0f} s wall)",
                flush=True,
            )
    return {
        "dataset": name,
        "metric": spec.metric,
        "runs": runs,
        "paper": _paper(spec),
        "args": dict(vars(args)),
    }


def _paper(spec: Any) -> dict[str, float]:
    return {m: v.get(spec.metric) for m, v in spec.paper_results.items()}


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Intervals per variant and paired differences to softmax, per quantity."""
    runs = result["runs"]
    out: dict[str, Any] = {}
    for quantity in ("test", "seconds", "r"):
        rows = {}
        for variant in VARIANTS:
            values = [run[quantity] for run in runs[variant]]
            interval = _interval_of([v for v in values if math.isfinite(v)])
            row = {"mean": interval.mean, "low": interval.low, "high": interval.high}
            row["n"] = interval.n
            if variant != "softmax":
                base = [run[quantity] for run in runs["softmax"]]
                # r is undefined for a run whose metric never moved: pair the seeds that have it
                pairs = [(a, b) for a, b in zip(values, base) if math.isfinite(a + b)]
                diff = (
                    paired_difference([a for a, _ in pairs], [b for _, b in pairs])
                    if pairs
                    else None
                )
                if diff is None:
                    row.update(
                        diff_mean=math.nan, diff_low=math.nan, diff_high=math.nan, p=math.nan
                    )
                    rows[variant] = row
                    continue
                row.update(
                    diff_mean=diff.interval.mean,
                    diff_low=diff.interval.low,
                    diff_high=diff.interval.high,
                    p=diff.p_value,
                )
            rows[variant] = row
        out[quantity] = rows
    return out


def _interval_of(values: list[float]) -> Any:
    from astune.confirmation.stats import Interval

    return t_interval(values) if values else Interval(math.nan, math.nan, math.nan, 0)


def verdict(low: float, high: float, claimed_sign: int) -> str:
    """supported / not supported / inconclusive from a paired 95% interval."""
    if math.isnan(low):
        return "inconclusive"
    if claimed_sign > 0:
        return "supported" if low > 0 else "not supported" if high < 0 else "inconclusive"
    return "supported" if high < 0 else "not supported" if low > 0 else "inconclusive"


def claims(summary: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(claim, evidence, verdict) rows."""
    rows = []
    for variant, what in (
        ("as_softmax", "AS-Softmax"),
        ("as_speed", "AS-Speed"),
        ("as_skip", "AS-Skip"),
    ):
        d = summary["test"][variant]
        rows.append(
            (
                f"{what} scores at least as well as softmax (test metric)",
                _diff(d),
                "not supported"
                if d["diff_high"] < 0
                else verdict(d["diff_low"], d["diff_high"], 1),
            )
        )
    for variant, what in (("as_speed", "AS-Speed"), ("as_skip", "AS-Skip")):
        d = summary["seconds"][variant]
        rows.append(
            (
                f"{what} trains faster than softmax",
                _diff(d, 1),
                verdict(d["diff_low"], d["diff_high"], -1),
            )
        )
    d = summary["r"]["as_softmax"]
    rows.append(
        (
            "AS-Softmax's val loss tracks its metric better (r lower than softmax's)",
            _diff(d, 3),
            verdict(d["diff_low"], d["diff_high"], -1),
        )
    )
    return rows


def _diff(row: dict[str, float], digits: int = 4) -> str:
    return (
        f"{row['diff_mean']:+.{digits}f} [{row['diff_low']:+.{digits}f}, "
        f"{row['diff_high']:+.{digits}f}], p={row['p']:.3g}"
    )


def markdown(result: dict[str, Any], summary: dict[str, Any]) -> str:
    name, metric = result["dataset"], result["metric"]
    n = len(result["runs"]["softmax"])
    lines = [
        f"#### {name} ({n} seeds; test {metric})",
        "",
        f"| variant | test {metric} (mean +- 95% CI) | paper (%, full data) | train seconds "
        f"| r(val loss, val {metric}) | samples computed |",
        "|---|---|---|---|---|---|",
    ]
    for variant in VARIANTS:
        paper = result["paper"].get(variant)
        cells = [
            _interval(summary[q][variant], d) for q, d in (("test", 4), ("seconds", 1), ("r", 3))
        ]
        lines.append(
            f"| {variant} | {cells[0]} | {paper if paper is not None else '-'} | {cells[1]} "
            f"| {cells[2]} | {_computed(result['runs'][variant])} |"
        )
    lines += ["", "| claim | paired difference to softmax [95% CI] | verdict at this scale |"]
    lines.append("|---|---|---|")
    lines += [f"| {c} | {e} | **{v}** |" for c, e, v in claims(summary)]
    return "\n".join(lines) + "\n"


def _computed(runs: list[dict[str, float]]) -> str:
    """The mean share of visited samples that went through the model (AS-Skip's saving)."""
    shares = [run.get("computed", 1.0) for run in runs]
    return f"{sum(shares) / len(shares):.0%}"


def _interval(row: dict[str, float], digits: int) -> str:
    half = (row["high"] - row["low"]) / 2
    return f"{row['mean']:.{digits}f} +- {half:.{digits}f} (n={row['n']})"


def plot(results: list[dict[str, Any]], path: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    quantities = (
        ("test", "test metric"),
        ("seconds", "train seconds"),
        ("r", "r(val loss, metric)"),
    )
    figure = Figure(figsize=(12, 3.2 * len(results)), dpi=100)
    FigureCanvasAgg(figure)
    for i, result in enumerate(results):
        for j, (key, label) in enumerate(quantities):
            ax = figure.add_subplot(len(results), 3, 3 * i + j + 1)
            for y, variant in enumerate(VARIANTS):
                values = [run[key] for run in result["runs"][variant]]
                interval = t_interval(values)
                ax.scatter(values, [y] * len(values), s=18, color="C0", zorder=3)
                ax.plot([interval.low, interval.high], [y, y], color="black", lw=2)
                ax.plot([interval.mean], [y], marker="|", color="black", markersize=12)
            ax.set_yticks(range(len(VARIANTS)), VARIANTS)
            ax.set_title(f"{result['dataset']}: {label}", fontsize=9)
            ax.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    if args.from_json:  # one or more files (comma-separated), e.g. one per dataset
        files = [json.loads(Path(f).read_text()) for f in args.from_json.split(",") if f]
        # each dataset keeps the settings it ran with
        results = [
            {"args": earlier["args"], **result}
            for earlier in files
            for result in earlier["results"]
        ]
        machine = files[0]["machine"]
        args.__dict__.update(
            files[0]["args"], from_json=args.from_json, json=args.json, plot=args.plot
        )
    else:
        results = [run_dataset(n.strip(), args) for n in args.datasets.split(",") if n.strip()]
        machine = machine_line("auto", threads=torch.get_num_threads())
    print(f"\nmachine: {machine}; wall {time.perf_counter() - started:.0f} s")
    report = []
    for result in results:
        summary = summarize(result)
        result["summary"] = summary
        report.append(markdown(result, summary))
    print("\n".join(report))
    if args.json:
        saved = {"args": vars(args), "machine": machine, "results": results}
        Path(args.json).write_text(json.dumps(saved, indent=1))
        print(f"wrote {args.json}")
    if args.plot:
        plot(results, args.plot)
        print(f"wrote {args.plot}")
    if not args.from_json:  # a report printed again writes nothing new
        inputs = provenance.data_inputs(args.data_dir, sorted({r["dataset"] for r in results}))
        provenance.record_each([args.json, args.plot], inputs=inputs, machine=machine)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
