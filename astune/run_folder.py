"""A training run's folder: the files a run writes there, whether it holds a run already, and
the next free folder beside it. No torch: the command checks its folder before torch loads."""

from __future__ import annotations

import shutil
from pathlib import Path

METRICS_FILE = "metrics.jsonl"
"""One JSON line an evaluation."""
FINAL_FILE = "final.json"
"""The best evaluation's validation scores and its weights' test scores."""
CHECKPOINT_DIR = "checkpoint"
"""The state a run resumes from, and its best weights."""


def held(folder: str | Path) -> list[str]:
    """What of a run ``folder`` holds already (its final record, checkpoint, logged
    evaluations); empty when none, or no folder."""
    folder = Path(folder)
    metrics = folder / METRICS_FILE
    return [
        name
        for name, there in (
            (FINAL_FILE, (folder / FINAL_FILE).is_file()),
            (f"{CHECKPOINT_DIR}/", (folder / CHECKPOINT_DIR).is_dir()),
            (METRICS_FILE, metrics.is_file() and metrics.stat().st_size > 0),
        )
        if there
    ]


def next_free(folder: str | Path) -> Path:
    """``folder`` if it holds no run, else the first of ``folder-2``, ``folder-3``, ... that
    holds none."""
    folder = Path(folder)
    count = 1
    candidate = folder
    while held(candidate):
        count += 1
        candidate = folder.with_name(f"{folder.name}-{count}")
    return candidate


def clear(folder: str | Path) -> None:
    """Remove what a run wrote in ``folder`` (the files above; nothing else of the folder)."""
    folder = Path(folder)
    for name in (FINAL_FILE, METRICS_FILE):
        (folder / name).unlink(missing_ok=True)
    shutil.rmtree(folder / CHECKPOINT_DIR, ignore_errors=True)
