"""The recorder of the search-efficiency tables (issue 44 item 3): every grid config x seed x
epochs of a dataset trained once by astune's own loop (:class:`astune.training.Run`, the one a
search trial runs), every evaluation recorded, written as Parquet shards that resume.

A table is ``benchmarks/results/tables/<dataset>/part-*.parquet`` (shards of at most
:data:`SHARD_ROWS` rows, far under 10 MB) plus ``DIGEST.json`` (the shards' SHA-256 and the
digest of them all). One row per evaluation:

- ``key`` (:func:`efficiency_settings.config_key`), ``seed`` and the config's columns;
- ``evaluation`` (1, 2, ...), ``epoch``, ``last`` (the run's final evaluation);
- ``val`` (the validation metric, the search's ``objective``) and ``test`` (the test metric of
  the same weights, measured here and not counted in any time);
- ``elapsed_seconds``: wall seconds from the trial's start (the model's construction, the data
  being shared as in a search) to the end of this evaluation, evaluations and checkpoint writes
  included; ``trial_seconds``: the whole run's, the final test of the best weights included;
- ``startup_seconds``: what a search trial pays before that in a process of its own (Python,
  torch and astune's imports, the model's first load), timed once per piece in a fresh
  process; the replay adds it to every time of the run (Ray's actor start is not in it);
- costs: ``train_seconds``, ``samples_computed``, ``optimizer_steps``.

A run whose loss diverges (``FloatingPointError``) ends with one more row whose ``val`` and
``test`` are NaN, at the second it failed: the replay tells the searcher it errored.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from astune.training.hooks import LoopHooks  # noqa: E402
from benchmarks import efficiency_settings as settings  # noqa: E402
from benchmarks._harness import RESULTS  # noqa: E402

TABLES = RESULTS / "tables"
SHARD_ROWS = 20_000
"""Rows per shard: a row is ~150 bytes in Parquet, so a shard stays far under 10 MB."""
DIGEST_FILE = "DIGEST.json"


def table_dir(dataset: str, root: Path | None = None) -> Path:
    """The folder of ``dataset``'s table (under ``root``, default :data:`TABLES`)."""
    return (root or TABLES) / settings.check_dataset(dataset)


def read_table(folder: Path):
    """Every shard of a table as one DataFrame (empty, with no columns, when there is none)."""
    import pandas as pd

    shards = sorted(folder.glob("part-*.parquet"))
    if not shards:
        return pd.DataFrame()
    return pd.concat([pd.read_parquet(s) for s in shards], ignore_index=True)


def grid_table(dataset: str, root: Path | None = None):
    """``dataset``'s table (under ``root``) as the replay reads it: one clear error when it
    holds runs of configs the grid no longer has (a grid change), which :func:`prune` drops."""
    table = read_table(table_dir(dataset, root))
    if table.empty:
        return table
    stray = sorted(set(table["key"]) - settings.grid_keys(dataset))
    if stray:
        raise SystemExit(
            f"{dataset}'s table holds {len(stray)} configs outside the grid (e.g. {stray[0]}): "
            f"drop them with `search_efficiency.py prune --dataset {dataset}`"
        )
    return table


def complete_table(dataset: str, root: Path | None = None):
    """``dataset``'s table as a replay needs it: every grid config on every seed, or one clear
    error naming how many runs are missing (after a grid grows, until they are recorded)."""
    table = grid_table(dataset, root)
    runs = {(settings.config_key(c), s) for c in settings.grid(dataset) for s in settings.SEEDS}
    missing = sorted(runs - runs_of(table))
    if missing:
        key, seed = missing[0]
        raise SystemExit(
            f"{dataset}'s table lacks {len(missing)} of its grid's {len(runs)} runs (e.g. {key} "
            f"seed {seed}): record them first (`search_efficiency.py record --dataset {dataset}"
            " --hours H`)"
        )
    return table


def prune(dataset: str, root: Path | None = None, *, log: Callable[[str], None] = print) -> int:
    """Rewrite ``dataset``'s table without the runs of configs outside the grid (after a grid
    change; git keeps the old shards) and return how many runs were dropped."""
    folder = table_dir(dataset, root)
    table = read_table(folder)
    if table.empty:
        return 0
    keep = table["key"].isin(settings.grid_keys(dataset))
    dropped = int(table[~keep].groupby(["key", "seed"]).ngroups)
    if dropped:
        old = sorted(folder.glob("part-*.parquet"))
        rows = table[keep].to_dict("records")
        written = {
            write_shard(folder, rows[start : start + SHARD_ROWS])
            for start in range(0, len(rows), SHARD_ROWS)
        }
        for shard in old:
            if shard not in written:  # a shard rewritten in the same second keeps its name
                shard.unlink()
        write_digest(folder)
    log(f"{dataset}: {dropped} runs outside the grid dropped")
    return dropped


def recorded_runs(folder: Path) -> set[tuple[str, int]]:
    """The (key, seed) pairs a table already holds (a run's rows are written together)."""
    return runs_of(read_table(folder))


def runs_of(table) -> set[tuple[str, int]]:
    """The (key, seed) pairs of a table's rows (none for an empty table)."""
    if table.empty:
        return set()
    return set(zip(table["key"], table["seed"].astype(int)))


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
    done = recorded_runs(folder)
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


def write_shard(folder: Path, rows: list[dict]) -> Path:
    """Write ``rows`` as a new shard of ``folder``'s table and refresh its digest."""
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    path = folder / f"part-{stamp}-{os.getpid()}.parquet"
    for n in itertools.count(1):  # a second shard within the same second must not replace it
        if not path.exists():
            break
        path = folder / f"part-{stamp}-{os.getpid()}-{n}.parquet"
    scratch = folder / f".writing-{path.name}"  # a reader never sees half a shard
    pd.DataFrame(rows).to_parquet(scratch, index=False)
    os.replace(scratch, path)
    write_digest(folder)
    return path


def table_digest(folder: Path) -> dict[str, Any]:
    """The SHA-256 of each shard and of the table (the shards' digests in name order)."""
    shards = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.glob("part-*.parquet"))
    }
    whole = hashlib.sha256("".join(f"{k}:{v}\n" for k, v in shards.items()).encode()).hexdigest()
    return {"sha256": whole, "shards": shards}


def write_digest(folder: Path) -> dict[str, Any]:
    """Write ``DIGEST.json`` (the digest and the table's row and run counts) and return it."""
    table = read_table(folder)
    digest = {
        **table_digest(folder),
        "rows": len(table),
        "runs": 0 if table.empty else int(table.groupby(["key", "seed"]).ngroups),
    }
    scratch = folder / f".writing-{DIGEST_FILE}-{os.getpid()}"
    scratch.write_text(json.dumps(digest, indent=2) + "\n")
    os.replace(scratch, folder / DIGEST_FILE)
    return digest


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
    folder = table_dir(dataset, root)
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
            if done % flush_every == 0 or len(rows) >= SHARD_ROWS:
                write_shard(folder, rows)
                rows = []
    finally:  # Ctrl-C (or SIGINT) mid-run keeps every run already finished
        if rows:
            write_shard(folder, rows)
        log(f"{dataset}: {done} runs recorded; digest {write_digest(folder)['sha256'][:16]}")
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
            "in benchmarks/efficiency_settings.py before recording its table"
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
