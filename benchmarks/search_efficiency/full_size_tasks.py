"""The two tasks of the full-size study (:mod:`.full_size`) as it trains and a portfolio sees
them: the whole training sets, all six layers of the tables' MiniLM and the tables' tokens."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.search_efficiency import settings

if TYPE_CHECKING:
    from astune.history.transfer import TaskProfile

DATASETS = ("sst5", "conll2003")
NUM_LAYERS = None  # all six


def full_size_profile(dataset: str) -> "TaskProfile":
    """``dataset`` at full size as a portfolio sees it: all its rows and layers, no probe."""
    from astune.data.resolve import resolve_dataset
    from astune.history.transfer import TaskProfile

    task = resolve_dataset(dataset).spec.task
    return TaskProfile(
        None, task, train_rows(dataset), settings.BACKBONE, NUM_LAYERS, max_length(dataset)
    )


def train_rows(dataset: str) -> int:
    """The rows of ``dataset``'s whole training set."""
    with open(data_dir() / dataset / "train.jsonl") as f:
        return sum(1 for _ in f)


def data_dir() -> Path:
    return Path(os.environ.get("ASTUNE_DATA_DIR", "../shared/data"))


def max_length(dataset: str) -> int:
    return settings.DATASETS[dataset].max_length


def test_metric(dataset: str) -> str:
    """The test score a run is judged by: the dataset's own metric, the one its validation
    objective is (F1 on CoNLL-2003, not the first test metric the record holds)."""
    from astune.data.resolve import resolve_dataset

    return f"test_{resolve_dataset(dataset).spec.metric}"
