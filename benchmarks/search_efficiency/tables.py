"""The search-efficiency tables on disk (issue 44 item 3): Parquet shards that resume, their
digest, and the checks a reader makes against the grid.

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
  process; the replay adds it to the times of a trial on a fresh Ray actor, after Ray's
  actor start (:data:`efficiency_settings.ACTOR_START_SECONDS`), and not on a reused one;
- costs: ``train_seconds``, ``samples_computed``, ``optimizer_steps``.

A run whose loss diverges (``FloatingPointError``) ends with one more row whose ``val`` and
``test`` are NaN, at the second it failed: the replay tells the searcher it errored.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.search_efficiency import settings

TABLES = Path(__file__).resolve().parent / "tables"
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
