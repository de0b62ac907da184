"""A search of many tiny trials: trials per minute, the driver's memory, MLflow calls per trial.

One ``run_search`` exactly as ``astune search`` runs it (a local Ray started and stopped by the
search, Optuna TPE, a sqlite MLflow store, FIFO) of ``--num-samples`` tiny trials: SST-5, MiniLM
cut to one layer, 64 training and 32 validation samples, one epoch. Measured in this process
(the driver) while it runs:

- trials per minute: finished trials / wall of the ``run_search`` call;
- the driver's memory: its RSS every 0.25 s, against the trials finished so far (read from the
  MLflow store's file); its growth per 100 trials is the slope of a line fitted to the second
  half of the search (after start-up), which is what would grow without bound;
- MLflow calls per trial: every public ``MlflowClient`` method the driver calls, counted (the
  driver is the only process that talks to MLflow); by method too;
- overhead: 1 - summed trial time / (concurrency x wall), against Ray's ``time_total_s`` of each
  trial and against astune's ``train_seconds`` (``_overhead_report.summarise``).

Usage (this machine: 2 cores):
  HF_HUB_OFFLINE=1 ASTUNE_DATA_DIR=../shared/data \\
    python -m benchmarks.search_overhead.search_scale --num-samples 200 --max-concurrent 2 \\
      --json benchmarks/search_overhead/results/search_scale_cpu.json
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import provenance
from benchmarks.common.harness import SEARCH_LIBRARIES, config_from_args, machine_line
from benchmarks.search_overhead import RESULTS
from benchmarks.search_overhead.overhead_report import summarise, trial_rows

FINISHED_TRIALS = (
    "SELECT count(*) FROM runs JOIN tags ON tags.run_uuid = runs.run_uuid WHERE runs.status "
    "IN ('FINISHED', 'FAILED') AND tags.key = 'astune.role' AND tags.value = 'trial'"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = p.add_argument
    add("--num-samples", type=int, default=200, help="trials")
    add("--max-concurrent", type=int, default=os.cpu_count() or 1, help="trials at once")
    add("--max-train-samples", "--train-samples", type=int, default=64)
    add("--max-eval-samples", "--eval-samples", type=int, default=32)
    add("--data-dir", default=None, help="default: $ASTUNE_DATA_DIR")
    add("--output-dir", default=None, help="the search's folder (default: a temporary one)")
    add("--plot", default=str(RESULTS / "search_scale.png"), help="PNG ('' to skip)")
    add("--json", default=None, help="write every number to this file")
    args = p.parse_args(argv)
    counts = ("num_samples", "max_concurrent", "max_train_samples", "max_eval_samples")
    if min(getattr(args, name) for name in counts) < 1:
        p.error(", ".join("--" + name.replace("_", "-") for name in counts) + " must be >= 1")
    return args


def space_mapping(num_samples: int) -> dict[str, Any]:
    """FIFO, AS-Softmax (delta, AS-Speed) and softmax, one epoch of batch 16."""
    return {
        "extends": "default",
        "description": "benchmarks/search_overhead/search_scale.py",
        "num_samples": num_samples,
        "losses": ["as_softmax", "softmax"],
        "scheduler": {"type": "none"},
        "params": {
            "lr": {"type": "float", "low": 1.0e-4, "high": 3.0e-3, "log": True},
            "batch_size": {"type": "fixed", "value": 16},
            "epochs": {"type": "fixed", "value": 1},
        },
        "loss_params": {
            "as_softmax": {
                "delta": {"type": "float", "low": 0.1, "high": 0.5, "step": 0.05},
                "warmup_ratio": {"type": "fixed", "value": 0.0},
            }
        },
        "speed_params": {"as_speed": {"type": "categorical", "choices": [True, False]}},
        "seed_points": [],
    }


class MlflowCalls:
    """Counts the driver's calls of public ``MlflowClient`` methods (wrapped on the class)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def install(self) -> None:
        from mlflow import MlflowClient

        for name, member in list(vars(MlflowClient).items()):
            if name.startswith("_") or not callable(member):
                continue
            setattr(MlflowClient, name, self._counted(name, member))

    def _counted(self, name: str, method: Any) -> Any:
        @functools.wraps(method)
        def counted(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.counts[name] += 1
            return method(*args, **kwargs)

        return counted


class Sampler(threading.Thread):
    """The driver's RSS every ``every`` s with the trials finished so far (from the store)."""

    def __init__(self, database: Path, every: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.database, self.every = database, every
        self.samples: list[tuple[float, int, int]] = []  # (seconds, rss bytes, finished)
        self._halt = threading.Event()

    def run(self) -> None:
        import psutil

        me, t0, finished, polled = psutil.Process(), time.monotonic(), 0, 0.0
        while not self._halt.wait(self.every):
            now = time.monotonic() - t0
            if now - polled >= 2.0:
                finished, polled = max(finished, self._finished()), now
            self.samples.append((now, me.memory_info().rss, finished))

    def _finished(self) -> int:
        if not self.database.exists():
            return 0
        try:
            with sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, timeout=1) as db:
                return int(db.execute(FINISHED_TRIALS).fetchone()[0])
        except sqlite3.OperationalError:
            return 0

    def stop(self) -> None:
        self._halt.set()
        self.join()


def growth_per_100(samples: list[tuple[float, int, int]]) -> float | None:
    """MB of driver RSS per 100 finished trials: the least-squares slope of the RSS when each
    count of finished trials was first reached, over the second half of the trials (start-up
    and the end's summary, plots and artifacts excluded)."""
    first: dict[int, float] = {}
    for _, rss, finished in samples:
        first.setdefault(finished, rss / 1e6)
    last = max(first, default=0)
    points = [(f, mb) for f, mb in first.items() if last / 2 <= f < last]
    if len(points) < 2:
        return None
    n = len(points)
    mx, my = sum(f for f, _ in points) / n, sum(m for _, m in points) / n
    sxx = sum((f - mx) ** 2 for f, _ in points)
    return 100.0 * sum((f - mx) * (m - my) for f, m in points) / sxx


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    import yaml

    from astune.tuning.runner import SearchSettings, run_search

    space = root / "space.yaml"
    space.write_text(yaml.safe_dump(space_mapping(args.num_samples), sort_keys=False))
    settings = config_from_args(
        SearchSettings,
        args,
        dataset="sst5",
        space=str(space),
        storage_path=str(root / "ray"),
        tracking_uri=f"sqlite:///{root / 'mlflow.db'}",
        name="scale",
        backbone="minilm",
        num_layers=1,
        scheduler="none",
        console=False,
    )
    calls = MlflowCalls()
    calls.install()
    sampler = Sampler(root / "mlflow.db")
    sampler.start()
    t0 = time.time()
    try:
        summary = run_search(settings)
    finally:
        wall = time.time() - t0
        sampler.stop()
    rows = trial_rows(summary.experiment_path, summary.tracking_uri, summary.experiment)
    finished = len(rows)
    return {
        **summarise(rows, wall, args.max_concurrent),
        "trials_per_minute": 60.0 * finished / wall,
        "mlflow_calls": sum(calls.counts.values()),
        "mlflow_calls_per_trial": sum(calls.counts.values()) / max(1, finished),
        "mlflow_calls_by_method": dict(calls.counts.most_common()),
        "driver_peak_rss_mb": max(s[1] for s in sampler.samples) / 1e6,
        "driver_rss_growth_mb_per_100_trials": growth_per_100(sampler.samples),
        "samples": sampler.samples,
        "trial_states": summary.trial_states,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seconds, rss, finished = zip(*result["samples"], strict=True)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    left.plot([s / 60 for s in seconds], finished)
    left.set(xlabel="minutes", ylabel="trials finished", title="progress")
    right.plot(finished, [r / 1e6 for r in rss], ".", markersize=2)
    right.set(xlabel="trials finished", ylabel="driver RSS (MB)", title="driver memory")
    fig.suptitle(
        f"{result['trials']} tiny trials, {result['slots']} at once: "
        f"{result['trials_per_minute']:.1f} trials/min, "
        f"{result['mlflow_calls_per_trial']:.1f} MLflow calls per trial"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = Path(args.output_dir or tempfile.mkdtemp(prefix="search-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    result = run(args, root)
    print(
        f"{result['trials']} trials ({result['trial_states']}) in {result['wall_s']:.0f} s: "
        f"{result['trials_per_minute']:.1f} trials/min with {result['slots']} at once\n"
        f"overhead: {result['overhead_vs_fit_pct']:.1f}% of slot time outside the trials' "
        f"fit, {result['overhead_vs_train_pct']:.1f}% outside their training steps\n"
        f"driver: peak RSS {result['driver_peak_rss_mb']:.0f} MB, growth "
        f"{result['driver_rss_growth_mb_per_100_trials']} MB per 100 trials (second half)\n"
        f"MLflow: {result['mlflow_calls']} calls, {result['mlflow_calls_per_trial']:.1f} per "
        f"trial; by method: {result['mlflow_calls_by_method']}"
    )
    if args.plot:
        plot(result, Path(args.plot))
    machine = machine_line("cpu", libraries=SEARCH_LIBRARIES)
    if args.json:
        payload = {"machine": machine, "args": vars(args), **result}
        Path(args.json).write_text(json.dumps(payload, indent=1) + "\n")
    inputs = provenance.data_inputs(args.data_dir, ["sst5"])
    provenance.record_each([args.json, args.plot], inputs=inputs, machine=machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
