"""The prior packaged with astune: the best trials of the project's own reference searches, so
that a fresh install's first `recommend` (and `search --warm-start`) already transfers.

The file (:data:`PRIOR_FILE`, JSON) holds one entry per reference search, keyed by backbone
(and the layers kept) and training rows, with the task's family and probe difficulty and its
configs ranked by seed-mean validation score, best first, each with its score. The warm start
learns from the best quarter of each (:data:`~astune.history.transfer.BEST_SHARE`); the
portfolio scores every config (:mod:`astune.history.portfolio_sources`). An entry with a
``recorded`` value (``"full size"``: the full-size study's runs, with no probe and a handful of
configs) is recorded at another scale than the tables: a portfolio learns from it at that size,
and the warm start and the delta advice leave it out. A file that
holds only a search's best trials reads the same for the warm start. ``python -m
benchmarks.search_efficiency.prior`` builds it from the search-efficiency tables at their pinned
digests (benchmarks/search_efficiency/tables/PINNED.json), which the file names.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from astune.history.transfer import ReferenceTrial, TaskProfile, best_count

PRIOR_FILE = Path(__file__).with_name("reference_trials.json")
FORMAT = 1
ENTRY_KEYS = ("dataset", "task", "difficulty", "train_size", "backbone", "num_layers", "trials")


def load_reference(
    path: str | Path = PRIOR_FILE, *, exclude: Iterable[str] = ()
) -> list[ReferenceTrial]:
    """The reference trials of ``path`` (the packaged prior by default), leaving out the
    searches of the datasets named in ``exclude``; ValueError (one line) for a file that is
    not a reference file of this format; not the entries ``recorded`` at another scale
    (module docstring), which hold no probe's difficulty for the transfer to weigh."""
    entries = reference_searches(path, exclude=exclude)
    return [t for entry in entries if at_tables_scale(entry) for t in _trials(entry)]


def at_tables_scale(entry: dict[str, Any]) -> bool:
    """Whether a reference file's entry was recorded at the tables' scale: one with no
    ``recorded`` value (module docstring)."""
    return "recorded" not in entry


def reference_searches(
    path: str | Path = PRIOR_FILE, *, exclude: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """The searches of a reference file as it holds them (each with :data:`ENTRY_KEYS`),
    those of the datasets in ``exclude`` left out; ValueError (one line) for a file that is
    not a reference file of this format."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"reference file {path}: cannot read it ({err})") from None
    found = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
    if found != FORMAT:
        raise ValueError(f"reference file {path}: expected format {FORMAT}, got {found!r}")
    skip = set(exclude)
    out: list[dict[str, Any]] = []
    for i, entry in enumerate(raw.get("searches", [])):
        missing = [k for k in ENTRY_KEYS if k not in entry]
        if missing:
            raise ValueError(f"reference file {path}: searches[{i}] lacks {', '.join(missing)}")
        if entry["dataset"] not in skip:
            out.append(entry)
    return out


def _trials(entry: dict[str, Any]) -> list[ReferenceTrial]:
    profile = TaskProfile(
        difficulty=entry["difficulty"],
        task=entry["task"],
        train_size=entry["train_size"],
        backbone=entry["backbone"],
        num_layers=entry["num_layers"],
    )
    source = f"prior {entry['dataset']} ({entry['backbone']}, {entry['train_size']} rows)"
    size = int(entry.get("ranked", len(entry["trials"])))
    best = entry["trials"][: best_count(size)]  # the warm start's share, however many are held
    return [
        ReferenceTrial(source, entry["dataset"], profile, t["config"], float(t["rank"]), size)
        for t in best
    ]


def reference_entry(
    trials: list[ReferenceTrial], *, scores: list[float], metric: str, mode: str
) -> dict[str, Any]:
    """One search's entry of the file from its ranked trials (:func:`transfer.ranked`) and
    their scores, in the order :func:`load_reference` reads."""
    profile = trials[0].profile
    return {
        "dataset": trials[0].dataset,
        "task": profile.task,
        "difficulty": profile.difficulty,
        "train_size": profile.train_size,
        "backbone": profile.backbone,
        "num_layers": profile.num_layers,
        "max_length": profile.max_length,
        "metric": metric,
        "mode": mode,
        "ranked": trials[0].search_size,
        "trials": [
            {"config": dict(t.config), "rank": round(t.rank, 6), "score": round(s, 6)}
            for t, s in zip(trials, scores)
        ],
    }


def write_reference(path: str | Path, entries: list[dict[str, Any]], **about: Any) -> Path:
    """Write a reference file of ``entries`` with the ``about`` keys (its provenance)."""
    path = Path(path)
    body = {"format": FORMAT, **about, "searches": entries}
    path.write_text(json.dumps(body, indent=1, sort_keys=False) + "\n")
    return path


def reference_file(value: str | None) -> Path | None:
    """A ``--reference`` value as the file to read: None gives the packaged prior, ``none``
    no file, anything else that path; ValueError (one line) when it is no file."""
    if value is None:
        return PRIOR_FILE
    if value.strip().lower() == "none":
        return None
    if not Path(value).is_file():
        raise ValueError(
            f"--reference {value}: no such file; give a reference file (as "
            f"{PRIOR_FILE.name}, which astune packages) or 'none' (the store's searches alone)"
        )
    return Path(value)
