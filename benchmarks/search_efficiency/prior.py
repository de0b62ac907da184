"""Build the prior packaged with astune (astune/history/reference_trials.json) from the
recorded tables at their pinned digests (tables/PINNED.json): per dataset, its probe difficulty
and every complete grid config, ranked by the seed-mean validation score of its final
evaluation (the warm start reads the best quarter, the portfolio all); with ``--full-size``,
also the full-size study's finished runs as pinned, each dataset's a task of its whole size
(:func:`.full_size.full_size_entries`), which a portfolio for a target of that size learns from
alone.

    python -m benchmarks.search_efficiency.prior           # check the pins, then build
    python -m benchmarks.search_efficiency.prior --pin     # pin the tables as they are, then build
    python -m benchmarks.search_efficiency.prior --pin --full-size   # with the full-size runs too

A table at the pin the packaged prior was built from keeps the difficulty recorded there (the
probe varies in its last digits across machines), so pinning anew moves only what changed.
A table whose shards no longer hash to its pin is refused, with both digests: a prior is only
ever built from the tables it names. A dataset whose table holds no config on every seed is left
out, with a line saying so. ``reference_entries`` is what the benchmark's warm arms build their
held-out prior with; ``tests/test_search_efficiency_tables.py`` rebuilds the packaged prior from
the pinned tables and compares.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from astune.history.reference import (
    PRIOR_FILE,
    at_tables_scale,
    reference_entry,
    reference_searches,
    write_reference,
)
from astune.history.transfer import TaskProfile, ranked
from benchmarks.search_efficiency import full_size, settings, tables

DifficultyOf = Callable[[str], tuple[float | None, str | None]]
"""A dataset's name -> its probe difficulty and task family."""
PINS = tables.TABLES / "PINNED.json"
"""Dataset -> the SHA-256 of the table the packaged prior is built from (tables.table_digest)."""


def trial_config(dataset: str, config: dict[str, Any]) -> dict[str, Any]:
    """A grid config as the flat trial config astune logs (the fast levers as AS-Softmax with
    AS-Skip on, its skip policy, grouped by length)."""
    fields = settings.train_fields(dataset, config, seed=0)
    keys = ("loss", "lr", "batch_size", "epochs", "delta", "warmup_ratio", "lr_warmup_ratio")
    out = {k: fields[k] for k in keys if fields.get(k) is not None}
    out.update(as_speed=False, as_skip=bool(fields.get("as_skip")), infobatch=False)
    if out["as_skip"]:
        out["skip_policy"] = fields.get("skip_policy", "zero")
    out["length_window"] = int(fields.get("length_window", 0))
    return out


def config_scores(
    frame: Any, *, min_seeds: int = len(settings.SEEDS)
) -> list[tuple[dict[str, Any], float]]:
    """(grid config, seed-mean final validation score) of each config run on at least
    ``min_seeds`` of the table's seeds (default: every seed)."""
    last = frame[frame["last"]]
    out = []
    for _key, runs in last.groupby("key"):
        if len(set(runs["seed"].astype(int)) & set(settings.SEEDS)) < min_seeds:
            continue
        config = {k: runs[k].iloc[0] for k in settings.CONFIG_KEYS if k in runs}
        config = {k: (None if v != v else v) for k, v in config.items()}  # NaN: not applicable
        out.append((settings.normalized(config), float(runs["val"].mean())))
    return out


def difficulty_of(dataset: str) -> tuple[float | None, str | None]:
    """The probe's difficulty and task family of ``dataset`` (an empty store: the probe alone)."""
    from astune.history.difficulty import measure_difficulty

    with tempfile.TemporaryDirectory() as folder:
        d = measure_difficulty(dataset, tracking_uri=f"sqlite:///{folder}/probe.db")
    return d.value, d.task


def recorded_difficulty(
    path: Path = PRIOR_FILE,
) -> DifficultyOf:
    """A dataset's difficulty and task family as the packaged prior recorded them (what
    :func:`reference_entries` takes in place of a probe where none is wanted)."""
    recorded = {
        e["dataset"]: (e["difficulty"], e["task"])
        for e in reference_searches(path) if at_tables_scale(e)
    }  # fmt: skip
    return recorded.__getitem__


def kept_difficulty(pins: dict[str, str], path: Path = PRIOR_FILE) -> DifficultyOf:
    """A table's difficulty as the packaged prior at ``path`` recorded it when that prior was
    built from the table at its pin in ``pins``, else the probe's now. The probe is not
    bit-for-bit the same across machines and thread counts (GoEmotions' 0.7032 on 2026-12-01,
    0.7069 on 2026-12-03), so pinning the full-size runs anew must not move an unchanged
    table's difficulty."""
    built_from = json.loads(path.read_text()).get("tables", {}) if path.exists() else {}
    recorded = recorded_difficulty(path) if path.exists() else None

    def of(dataset: str) -> tuple[float | None, str | None]:
        if recorded is not None and built_from.get(dataset) == pins.get(dataset):
            return recorded(dataset)
        return difficulty_of(dataset)

    return of


def reference_entries(
    datasets: list[str],
    *,
    root: Path | None = None,
    min_seeds: int = len(settings.SEEDS),
    difficulty: DifficultyOf = difficulty_of,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """The reference file's entries of ``datasets``' tables (under ``root``), each config
    scored over at least ``min_seeds`` seeds; ``difficulty``: a dataset's probe difficulty and
    task family (default: measured now)."""
    entries = []
    for name in datasets:
        frame = tables.grid_table(name, root)
        scored = config_scores(frame, min_seeds=min_seeds) if not frame.empty else []
        if not scored:
            log(f"{name}: no config on {min_seeds} seeds yet; left out")
            continue
        start = time.perf_counter()
        value, task = difficulty(name)
        data = settings.DATASETS[name]
        profile = TaskProfile(
            value, task, data.train, settings.BACKBONE, data.num_layers, data.max_length
        )
        configs = [(trial_config(name, c), s) for c, s in scored]
        trials = ranked(f"prior {name}", name, profile, configs, share=1.0)
        by_key = {str(sorted(c.items())): s for c, s in configs}
        scores = [by_key[str(sorted(t.config.items()))] for t in trials]
        metric = str(frame["metric"].iloc[0])
        entries.append(reference_entry(trials, scores=scores, metric=metric, mode="max"))
        log(
            f"{name}: {len(scored)} complete configs, best {scores[0]:.4f}; difficulty "
            f"{value} ({time.perf_counter() - start:.0f} s probe)"
        )
    return entries


def read_pins(path: Path = PINS) -> dict[str, str]:
    """Dataset -> the pinned SHA-256 of its table."""
    return json.loads(path.read_text())["tables"]


def read_full_size_pin(path: Path = PINS) -> dict[str, Any] | None:
    """The full-size runs the packaged prior is built from (:func:`full_size.runs_pin`), or
    None when it holds none."""
    return json.loads(path.read_text()).get("full_size_runs")


def pin(datasets: list[str], path: Path = PINS, *, full_size_runs: bool = False) -> dict[str, str]:
    """Pin ``datasets``' tables as they are now (their digests recomputed from the shards) and,
    with ``full_size_runs``, the full-size study's finished runs as they are now."""
    pins = {**(read_pins(path) if path.exists() else {})}
    pins.update({name: tables.table_digest(tables.table_dir(name))["sha256"] for name in datasets})
    about = "the SHA-256 of each table the packaged prior is built from (tables.table_digest)"
    body: dict[str, Any] = {"about": about, "tables": pins}
    if full_size_runs:
        body["full_size_runs"] = full_size.runs_pin()
    path.write_text(json.dumps(body, indent=1) + "\n")
    return pins


def check_pins(datasets: list[str], pins: dict[str, str]) -> None:
    """SystemExit (one line) when a table is not pinned or no longer hashes to its pin."""
    for name in datasets:
        if name not in pins:
            raise SystemExit(f"{name}: its table is not pinned in {PINS}; run with --pin")
        now = tables.table_digest(tables.table_dir(name))["sha256"]
        if now != pins[name]:
            raise SystemExit(
                f"{name}: its table hashes to {now}, not to its pin {pins[name]} ({PINS}); "
                "restore the pinned shards or pin them anew with --pin"
            )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default=",".join(settings.DATASETS))
    p.add_argument("--out", default=str(PRIOR_FILE))
    p.add_argument("--pin", action="store_true", help="pin the tables as they are now first")
    p.add_argument(
        "--full-size", action="store_true",
        help="hold the full-size study's runs too, each dataset's a task of its own size (with "
        "--pin: as they are now)",
    )  # fmt: skip
    p.add_argument(
        "--min-seeds",
        type=int,
        default=len(settings.SEEDS),
        help="score a config over at least this many seeds (default: all; a table still "
        "being recorded holds its first seeds first)",
    )
    args = p.parse_args(argv)
    if not 1 <= args.min_seeds <= len(settings.SEEDS):
        raise SystemExit(f"--min-seeds must be in [1, {len(settings.SEEDS)}], got {args.min_seeds}")
    names = [settings.check_dataset(n) for n in args.datasets.split(",")]
    pins = pin(names, full_size_runs=args.full_size) if args.pin else read_pins()
    runs = read_full_size_pin() if args.full_size else None
    if args.full_size and runs is None:
        raise SystemExit(f"--full-size: {PINS} pins no full-size runs; add --pin to pin them")
    entries, about = build_prior(
        names, pins, min_seeds=args.min_seeds, difficulty=kept_difficulty(pins), full_size_runs=runs
    )
    print(f"wrote {write_reference(args.out, entries, **about)} ({len(entries)} searches)")


def build_prior(
    names: list[str],
    pins: dict[str, str],
    *,
    min_seeds: int = len(settings.SEEDS),
    difficulty: DifficultyOf = difficulty_of,
    full_size_runs: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The prior's entries of ``names``' tables, checked against their ``pins`` first, and the
    file's provenance keys; ``difficulty`` as :func:`reference_entries` takes it;
    ``full_size_runs``: the pin of the full-size runs to add, each dataset's a task recorded at
    its whole size (:func:`full_size.full_size_entries`; None: none)."""
    check_pins(names, pins)
    entries = reference_entries(names, min_seeds=min_seeds, difficulty=difficulty)
    about = {
        "made_by": "python -m benchmarks.search_efficiency.prior",
        "made_on": time.strftime("%Y-%m-%d", time.gmtime()),
        "tables": {e["dataset"]: pins[e["dataset"]] for e in entries},
        "score": "seed-mean validation score of the final evaluation over at least "
        f"{min_seeds} of seeds " + ", ".join(map(str, settings.SEEDS)),
    }
    if full_size_runs is not None:
        entries += full_size.full_size_entries(full_size.pinned_runs(full_size_runs))
        about["full_size_runs"] = full_size_runs
    return entries, about


if __name__ == "__main__":
    main()
