"""`astune recommend --write-space`: the dataset's search space warmed by the recommendation
(:func:`astune.recommendation.warm_space.warm_space`), written as YAML."""

from __future__ import annotations

from pathlib import Path

from astune.recommendation.result import Recommendation
from astune.recommendation.warm_space import warm_space
from astune.space.space import load_space


def write_space(rec: Recommendation, dataset: str, path: str | Path) -> Path:
    """The dataset's shipped space (for its task) warmed by ``rec``, written to ``path``."""
    from astune.data.resolve import resolve_dataset

    space = load_space(dataset=resolve_dataset(dataset).registry_name)
    if rec.difficulty.task is not None:
        space = space.for_task(rec.difficulty.task)
    return warm_space(rec, space).dump(path)
