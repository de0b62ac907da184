"""`astune recommend --write-space`: the space a search would run, written as YAML: the
dataset's shipped space with the delta advice (:func:`astune.recommendation.warm_space.warm_space`)
widened to hold the portfolio, whose configs are its first seed points in ``recommend``'s order,
so that ``search --space`` on the file runs what ``recommend`` printed."""

from __future__ import annotations

from pathlib import Path

from astune.history.portfolio_sources import shipped_space
from astune.history.portfolio_space import with_portfolio
from astune.recommendation.result import Recommendation
from astune.recommendation.warm_space import warm_space


def write_space(rec: Recommendation, dataset: str, path: str | Path) -> Path:
    """The dataset's shipped space (for its task) warmed by ``rec`` and holding its
    portfolio, written to ``path``."""
    space = warm_space(rec, shipped_space(dataset, rec.difficulty.task))
    return with_portfolio(space, rec.portfolio).dump(path)
