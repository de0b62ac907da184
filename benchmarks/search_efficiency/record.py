"""The recorder of the search-efficiency tables (issue 44 item 3): every grid config x seed x
epochs of a dataset trained once by astune's own loop (:class:`astune.training.Run`, the one a
search trial runs), every evaluation recorded, written as Parquet shards that resume.

The table's layout, its shards and digest: :mod:`benchmarks.search_efficiency.tables`.
"""

from __future__ import annotations

import json
import math
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from astune.training.hooks import LoopHooks
from benchmarks.search_efficiency import settings, tables


def pending_runs(
    dataset: str,
    folder: Path,
    *,
    configs: list[dict[str, Any]] | None = None,
    seeds: tuple[int, ...] = settings.SEEDS,
    part: tuple[int, int] = (0, 1),
) -> list[tuple[dict[str, Any], int]]:
    """The (config, seed) runs of the grid not yet in the table, seed by seed (so a partial
    table holds whole seeds first), in grid order; ``part`` (i, n): every n-th of them from
    the i-th, so that n recorders on n cores share the runs without overlap."""
    done = tables.recorded_runs(folder)
    configs = settings.grid(dataset) if configs is None else configs
    runs = [(c, seed) for seed in seeds for c in configs]
    index, count = part
    return [run for run in runs[index::count] if (settings.config_key(run[0]), run[1]) not in done]


def grid_of_losses(dataset: str, losses: str) -> list[dict[str, Any]]:
    """The grid configs of ``dataset`` whose loss is one of ``losses`` (comma-separated
    :data:`efficiency_settings.GRID_LOSSES` names); one clear error for another name."""
    names = [name.strip() for name in losses.split(",") if name.strip()]
    unknown = [name for name in names if name not in settings.GRID_LOSSES]
    if unknown or not names:
        raise SystemExit(
            f"--losses must name grid losses ({', '.join(settings.GRID_LOSSES)}), got {losses!r}"
        )
    return [config for config in settings.grid(dataset) if config["loss"] in names]


def parse_part(text: str) -> tuple[int, int]:
    """``"I/N"`` as (I, N) with 0 <= I < N; one clear error otherwise."""
    try:
        index, count = (int(x) for x in text.split("/"))
    except ValueError:
        index, count = -1, 0
    if not 0 <= index < count:
        raise SystemExit(f"--part must be I/N with 0 <= I < N (e.g. 0/2), got {text!r}")
    return index, count


class _TestEachEvaluation(LoopHooks):
    """Loop hooks that score the test split after each validation evaluation and keep the time
    this costs out of the trial's clock (a real trial does not do it)."""

    def __init__(self) -> None:
        self.tests: list[float] = []
        self.extra = 0.0

    def on_evaluate_end(self, run) -> None:
        start = time.perf_counter()
        self.tests.append(run.evaluate("test").metrics[run.spec.metric])
        self.extra += time.perf_counter() - start


_STARTUP_SCRIPT = """
import json, sys, time
start = time.perf_counter()
import torch
from astune.config import TrainConfig
from astune.data.resolve import resolve_dataset
from astune.training.compute import model_parts
torch.set_num_threads(int(sys.argv[2]))
config = TrainConfig(**json.loads(sys.argv[1])).validate()
model_parts(config, resolve_dataset(config.dataset).spec, torch.device("cpu"))
print(time.perf_counter() - start)
"""


def measure_startup(dataset: str) -> float:
    """Seconds a fresh process takes to import torch and astune and build ``dataset``'s model
    (what a search trial pays before its loop starts)."""
    import subprocess

    config = {"loss": "softmax", "lr": 5e-5, "batch_size": 16, "epochs": 1}
    fields = settings.train_fields(dataset, config, 0)
    if settings.DATASETS[dataset].multi_label:
        fields["loss"] = "multilabel_softmax"
    args = [sys.executable, "-c", _STARTUP_SCRIPT, json.dumps(fields), str(settings.THREADS)]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def record_run(dataset: str, config: dict[str, Any], *, seed: int, data: Any) -> list[dict]:
    """Train one grid ``config`` with ``seed`` on ``data`` (the dataset's encoded slice) and
    return its rows (one per evaluation, see the module docstring)."""
    from astune.checkpoint_policy import SEARCH_DEFAULT
    from astune.config import TrainConfig
    from astune.training import Run

    config = settings.normalized(config)
    hook = _TestEachEvaluation()
    records: list[tuple[dict[str, Any], float]] = []
    out = Path(tempfile.mkdtemp(prefix="astune-record-"))
    try:
        fields = settings.train_fields(dataset, config, seed)
        train = TrainConfig(**fields, output_dir=str(out), checkpoint_every=SEARCH_DEFAULT)
        start = time.perf_counter()

        def keep(record: dict[str, Any], _checkpoint: Path | None) -> None:
            records.append((record, time.perf_counter() - start - hook.extra))

        run = Run(train.validate(), data=data, hooks=[hook])
        try:
            run.train(keep)
        except FloatingPointError:  # the loss diverged: a search records an errored trial
            records.append(({"objective": math.nan, "epoch": math.nan}, math.nan))
            hook.tests.append(math.nan)
        trial_seconds = time.perf_counter() - start - hook.extra
        metric = run.spec.metric
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if math.isnan(records[-1][1]):  # it failed at the end of what it ran
        last = records[-1][0] | {"train_seconds": trial_seconds}
        records[-1] = (last | {"samples_computed": -1, "optimizer_steps": -1}, trial_seconds)
    return [
        {
            "key": settings.config_key(config),
            "seed": seed,
            **config,
            "metric": metric,
            "evaluation": i + 1,
            "epoch": float(record["epoch"]),
            "last": i == len(records) - 1,
            "val": float(record["objective"]),
            "test": float(hook.tests[i]),
            "elapsed_seconds": elapsed,
            "trial_seconds": trial_seconds,
            "train_seconds": float(record["train_seconds"]),
            "samples_computed": int(record["samples_computed"]),
            "optimizer_steps": int(record["optimizer_steps"]),
        }
        for i, (record, elapsed) in enumerate(records)
    ]


def load_data(dataset: str) -> Any:
    """``dataset``'s slice, encoded once for every run of the table (as a search driver does)."""
    from astune.config import TrainConfig
    from astune.data.encoded import load_for_run

    config = {"loss": "softmax", "lr": 5e-5, "batch_size": 16, "epochs": 1}
    fields = settings.train_fields(dataset, config, 0)
    if settings.DATASETS[dataset].multi_label:
        fields["loss"] = "multilabel_softmax"
    return load_for_run(TrainConfig(**fields).validate())[1]


def record(
    dataset: str,
    *,
    hours: float,
    root: Path | None = None,
    configs: list[dict[str, Any]] | None = None,
    seeds: tuple[int, ...] = settings.SEEDS,
    part: tuple[int, int] = (0, 1),
    flush_every: int = 20,
    log: Callable[[str], None] = print,
) -> int:
    """Record pending runs of ``dataset`` until none is left or ``hours`` of wall time would
    pass with one more (the last run's time as the guess); return the runs recorded."""
    import torch

    torch.set_num_threads(settings.THREADS)
    folder = tables.table_dir(dataset, root)
    todo = pending_runs(dataset, folder, configs=configs, seeds=seeds, part=part)
    log(f"{dataset}: {len(todo)} runs pending in {folder}")
    if not todo:
        return 0
    data, start, rows, last, done = load_data(dataset), time.perf_counter(), [], 0.0, 0
    startup = measure_startup(dataset)
    log(f"{dataset}: a trial's start-up in a fresh process: {startup:.1f} s")
    try:
        for n, (config, seed) in enumerate(todo, 1):
            used = time.perf_counter() - start
            if used + last > hours * 3600:
                break
            run_start = time.perf_counter()
            new = [
                {**row, "startup_seconds": startup}
                for row in record_run(dataset, config, seed=seed, data=data)
            ]
            last = time.perf_counter() - run_start
            rows += new
            done += 1
            log(
                f"[{n}/{len(todo)}] {settings.config_key(config)} seed {seed}: "
                f"val {new[-1]['val']:.4f} in {new[-1]['trial_seconds']:.1f} s "
                f"({used / 60:.1f} min used)"
            )
            if done % flush_every == 0 or len(rows) >= tables.SHARD_ROWS:
                tables.write_shard(folder, rows)
                rows = []
    finally:  # Ctrl-C (or SIGINT) mid-run keeps every run already finished
        if rows:
            tables.write_shard(folder, rows)
        log(f"{dataset}: {done} runs recorded; digest {tables.write_digest(folder)['sha256'][:16]}")
    return done


def add_arguments(parser: Any) -> None:
    """The recorder's flags on ``parser`` (its own command line, and ``search_efficiency.py
    record``'s)."""
    parser.add_argument("--dataset", required=True, help=", ".join(settings.DATASETS))
    parser.add_argument("--hours", type=float, required=True, help="wall-clock limit of a piece")
    parser.add_argument("--part", default="0/1", help="I/N: this recorder's share, one per core")
    parser.add_argument(
        "--losses",
        default=",".join(settings.GRID_LOSSES),
        help="record only the grid configs of these grid losses (default: all)",
    )


def run(args: Any) -> None:
    """Record a piece as the parsed flags ask (one clear line for a bad one)."""
    if not args.hours > 0:
        raise SystemExit(f"--hours must be > 0, got {args.hours}")
    dataset = settings.check_dataset(args.dataset)
    if not settings.DATASETS[dataset].probed:
        raise SystemExit(
            f"{dataset}'s slice is provisional: probe that it learns and mark it probed=True "
            "in benchmarks/search_efficiency/settings.py before recording its table"
        )
    # SIGTERM (kill, Slurm's scancel, timeout) stops a piece as Ctrl-C does: the runs it
    # finished are written first (a background job started by a shell ignores SIGINT).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        configs = grid_of_losses(dataset, args.losses)
        record(dataset, hours=args.hours, part=parse_part(args.part), configs=configs)
    except KeyboardInterrupt:  # the finished runs are written: say so, without a traceback
        raise SystemExit(f"{dataset}: stopped; the runs it finished are kept") from None


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="record a search-efficiency table (resumes)")
    add_arguments(parser)
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
