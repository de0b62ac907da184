"""Faster at equal accuracy: a multi-objective search of SST-5, then a confirm of its front.

Two real astune commands, run exactly as the CLI runs them (nothing patched), in one process:

1. ``astune search`` with the space ``benchmarks/multi_objective/pareto_space.yaml``: softmax,
AS-Softmax,
   AS-Speed and AS-Skip (one seed point each, then Optuna's multi-objective TPE), objectives
   the validation accuracy (maximised) and ``train_seconds`` (minimised); Ray Tune runs the
   trials, MLflow (sqlite) records them, the search writes ``pareto.csv`` and ``pareto.png``.
2. ``astune confirm --front --seeds N``: the front's trials (at most ``--top``, cheapest
   first) and the softmax baseline re-run over N seeds; a config is "faster at equal accuracy"
   when the 95% interval of its paired time difference to the baseline lies below 0 and that
   of its accuracy difference above ``-within`` points.

Every time compared here is ``train_seconds`` (training steps only, evaluation excluded) of
trials that ran side by side in this one search: ``--max-concurrent`` trials at once, each with
``--cpus-per-trial`` threads, so a slow patch of the machine slows neighbours alike.

Usage (this machine, 2 cores: about 30 minutes):
  HF_HUB_OFFLINE=1 ASTUNE_DATA_DIR=../shared/data python -m benchmarks.multi_objective.pareto \\
      --num-samples 16 --seeds 3 --json benchmarks/multi_objective/results/pareto_cpu.json
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common import provenance
from benchmarks.common.harness import SEARCH_LIBRARIES, config_from_args, machine_line
from benchmarks.multi_objective import RESULTS

if TYPE_CHECKING:
    from astune.confirmation.stats import PairedDifference
    from astune.tuning.confirmation.confirm import ConfirmResult, ConfirmSettings
    from astune.tuning.settings import SearchResult, SearchSettings

HERE = Path(__file__).resolve().parent


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = p.add_argument
    add("--dataset", default="sst5")
    add("--space", default=str(HERE / "pareto_space.yaml"))
    add("--num-samples", type=int, default=16, help="trials of the search (>= 16 for the issue)")
    add("--max-concurrent", type=int, default=2)
    add("--cpus-per-trial", type=float, default=1.0)
    add("--backbone", default="minilm")
    add("--num-layers", type=int, default=1)
    add("--max-length", type=int, default=48)
    add("--max-train-samples", "--train-samples", type=int, default=800, help="training subset")
    add("--max-eval-samples", "--eval-samples", type=int, default=1000, help="validation, test")
    add("--epochs", type=float, default=None, help="per trial (default: the space's, 6)")
    add("--seed", type=int, default=0, help="the search's seed (confirm adds seeds 1..N-1)")
    add("--seeds", type=int, default=3, help="confirm: seeds per config")
    add("--top", type=int, default=3, help="confirm: front trials re-run, cheapest first")
    add("--within", type=float, default=0.5, help="confirm: accuracy points allowed")
    add("--output-dir", default=None, help="the MLflow store and Ray storage (default: temp)")
    add("--png-dir", default=str(RESULTS), help="where pareto.png and pareto_confirm.png go")
    add("--json", default=None, help="write every number to this file")
    add("--from-json", default=None, help="run nothing: print the report of an earlier --json")
    return p.parse_args(argv)


def places(root: Path) -> dict[str, str]:
    """The MLflow store and Ray storage under ``root``, shared by the search and its confirm."""
    return {"tracking_uri": f"sqlite:///{root / 'mlflow.db'}", "storage_path": str(root / "ray")}


def search_settings(args: argparse.Namespace, root: Path) -> SearchSettings:
    from astune.tuning.settings import SearchSettings

    return config_from_args(SearchSettings, args, checkpoint_every="end", **places(root))


def confirm_settings(args: argparse.Namespace, root: Path, experiment: str) -> ConfirmSettings:
    from astune.tuning.confirmation.confirm import ConfirmSettings

    return ConfirmSettings(
        experiment,
        front=True,
        top=args.top,
        seeds=args.seeds,
        within=args.within,
        max_concurrent=args.max_concurrent,
        **places(root),
    )


def family(params: dict[str, str]) -> str:
    """softmax, as_softmax, as_speed, as_skip or as_speed+skip, from a trial's params."""
    if params.get("loss") != "as_softmax":
        return str(params.get("loss"))
    on = [name for name in ("as_speed", "as_skip") if params.get(name) == "True"]
    return "+".join(on) if on else "as_softmax"


def trial_rows(summary: SearchResult) -> list[dict[str, Any]]:
    """Every finished trial of the search: family, params, accuracy, train seconds, front."""
    from astune.store.pareto import finished_points
    from astune.store.reader import Store

    store = Store(summary.tracking_uri)
    runs = store.trials(summary.parent_run_id, [summary.experiment_id])
    front = {p.run_id for p in summary.front}
    keys = ("lr", "delta", "warmup_ratio", "lam", "max_accum_steps", "skip_keep", "skip_anneal")
    rows = []
    for point in finished_points(runs, summary.objectives):
        rows.append(
            {
                "run_id": point.run_id,
                "family": family(point.params),
                "params": {k: v for k in keys if (v := point.params.get(k, "None")) != "None"},
                **point.values,
                "front": point.run_id in front,
            }
        )
    return sorted(rows, key=lambda r: r["train_seconds"])


def confirm_rows(summary: ConfirmResult) -> list[dict[str, Any]]:
    """The confirm table as numbers: per config the means, intervals and paired differences."""
    rows = []
    for row in summary.rows:
        diff, time_diff = row.difference, row.time_difference
        rows.append(
            {
                "config": row.config.label,
                "confirms": row.config.confirms,
                "family": family(dict(row.config.run.data.params)),
                "seeds": row.config.seeds,
                "accuracy": [row.objective.mean, row.objective.low, row.objective.high],
                "train_seconds": [
                    row.train_seconds.mean,
                    row.train_seconds.low,
                    row.train_seconds.high,
                ],
                "accuracy_diff": _interval(diff),
                "time_diff": _interval(time_diff),
                "faster_at_equal_accuracy": row.faster_at_equal,
            }
        )
    return rows


def _interval(diff: PairedDifference | None) -> list[float] | None:
    if diff is None:
        return None
    return [diff.interval.mean, diff.interval.low, diff.interval.high]


def copy_artifacts(summary: SearchResult, png_dir: Path) -> list[str]:
    """``pareto.png`` and ``confirm.png`` of the search's parent run into ``png_dir``."""
    from mlflow import MlflowClient

    from astune.store.reader import no_progress_bar

    client = MlflowClient(summary.tracking_uri)
    copied = []
    with tempfile.TemporaryDirectory() as folder, no_progress_bar():
        for name, target in (("pareto.png", "pareto.png"), ("confirm.png", "pareto_confirm.png")):
            path = client.download_artifacts(summary.parent_run_id, name, folder)
            shutil.copy(path, png_dir / target)
            copied.append(str(png_dir / target))
    return copied


def print_report(result: dict[str, Any]) -> None:
    softmax = [r for r in result["trials"] if r["family"] == "softmax"]
    reference = min((r["train_seconds"] for r in softmax), default=math.nan)
    print(f"\n## search: {len(result['trials'])} finished trials (fastest first)")
    print("| family | params | val accuracy | train s | / softmax | front |")
    print("|---|---|---|---|---|---|")
    for r in result["trials"]:
        params = ", ".join(f"{k}={float(v):.3g}" for k, v in r["params"].items())
        print(
            f"| {r['family']} | {params} | {r['objective']:.4f} | {r['train_seconds']:.1f} "
            f"| {r['train_seconds'] / reference:.2f} | {'**yes**' if r['front'] else ''} |"
        )
    print(f"\n## confirm --front --seeds {result['args']['seeds']} (mean [95% CI])")
    print("| config | family | val accuracy | train s | accuracy diff | time diff | verdict |")
    print("|---|---|---|---|---|---|---|")
    for r in result["confirm"]:
        acc, sec = r["accuracy"], r["train_seconds"]
        verdict = {True: "**faster at equal accuracy**", False: "not shown", None: "baseline"}
        print(
            f"| {r['config']} | {r['family']} | {acc[0]:.4f} [{acc[1]:.4f}, {acc[2]:.4f}] "
            f"| {sec[0]:.1f} [{sec[1]:.1f}, {sec[2]:.1f}] | {_diff(r['accuracy_diff'], 4)} "
            f"| {_diff(r['time_diff'], 1)} | {verdict[r['faster_at_equal_accuracy']]} |"
        )


def _diff(values: list[float] | None, digits: int) -> str:
    if values is None:
        return "-"
    mean, low, high = values
    return f"{mean:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def main(argv: list[str] | None = None) -> dict[str, Any]:

    from astune.tuning.confirmation.confirm import run_confirm
    from astune.tuning.runner import run_search

    args = parse_args(argv)
    if args.from_json:
        result = json.loads(Path(args.from_json).read_text())
        print_report(result)
        return result
    if args.num_samples < 1 or args.seeds < 2 or args.top < 1:
        raise SystemExit("--num-samples >= 1, --seeds >= 2 and --top >= 1, please.")
    root = Path(args.output_dir or tempfile.mkdtemp(prefix="astune-pareto-"))
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    search = run_search(search_settings(args, root))
    search_s = time.perf_counter() - started
    confirmed = run_confirm(confirm_settings(args, root, search.experiment))
    result = {
        "args": vars(args),
        "machine": machine_line("cpu", libraries=SEARCH_LIBRARIES),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "search_seconds": search_s,
        "confirm_seconds": time.perf_counter() - started - search_s,
        "trials": trial_rows(search),
        "confirm": confirm_rows(confirmed),
        "pngs": copy_artifacts(search, Path(args.png_dir)),
        "store": str(root),
    }
    print_report(result)
    print(f"\nsearch {search_s:.0f} s, confirm {result['confirm_seconds']:.0f} s; store: {root}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str) + "\n")
    inputs = provenance.data_inputs(args.data_dir, [args.dataset])
    provenance.record_each([args.json, *result["pngs"]], inputs=inputs, machine=result["machine"])
    return result


if __name__ == "__main__":
    main()
