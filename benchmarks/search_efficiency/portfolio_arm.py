"""The portfolio arm of the search-efficiency benchmark (issue 62, items 1 and 5):
``astune-portfolio`` is astune's default search since issue 62, held out.

What it learns from is a reference file made from the other datasets' tables only, as the
packaged prior would hold them (issue 62 item 5, mode a), read through an empty MLflow store
by the same ``portfolio_for`` and ``with_portfolio`` a search runs: the portfolio is built for
the held-out dataset's slice (its task family, training rows, backbone and layers; no probe)
and run first, in the cold astune arm's space widened to hold it, laid on the grid. Its own
seconds (building the portfolio, on one thread) open the replay, paid by every worker.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from pathlib import Path

from benchmarks.search_efficiency import arms, settings
from benchmarks.search_efficiency.prior import recorded_difficulty
from benchmarks.search_efficiency.warm import base_space, grid_arm, held_out_reference

PORTFOLIO_ARM = "astune-portfolio"


@dataclasses.dataclass(frozen=True)
class PortfolioStart:
    """What the portfolio arm of one held-out dataset starts from."""

    entries: tuple  # astune.recommendation.portfolio.PortfolioEntry, run first in this order
    seconds: float  # building it, on one thread
    reference_datasets: tuple[str, ...]


def portfolio_start(dataset: str, *, root: Path | None = None) -> PortfolioStart:
    """The portfolio ``dataset``'s search would run first, learnt from the other datasets'
    tables (under ``root``) alone (timed)."""
    from astune.data.resolve import resolve_dataset
    from astune.recommendation.portfolio_sources import portfolio_for
    from astune.recommendation.transfer import TaskProfile
    from astune.store.reader import Store

    data = settings.DATASETS[dataset]
    target = TaskProfile(
        difficulty=None,
        task=resolve_dataset(dataset).spec.task,
        train_size=data.train,
        backbone=settings.BACKBONE,
        num_layers=data.num_layers,
    )
    space = base_space(dataset, fast=False)
    with tempfile.TemporaryDirectory() as folder:
        # a portfolio weighs no difficulty: the prior's recorded ones, no probe
        reference = held_out_reference(
            dataset, Path(folder), root=root, difficulty=recorded_difficulty()
        )
        learnt = tuple(e["dataset"] for e in json.loads(reference.read_text())["searches"])
        start = time.perf_counter()
        entries = portfolio_for(
            target,
            store=Store(f"sqlite:///{folder}/empty.db"),
            reference=reference,
            losses=list(space.losses),
        )
        seconds = time.perf_counter() - start
    return PortfolioStart(tuple(entries), seconds, learnt)


def portfolio_arm(dataset: str, start: PortfolioStart) -> arms.Arm:
    """The ``astune-portfolio`` arm of ``dataset`` on the grid."""
    from astune.recommendation.portfolio_space import with_portfolio

    space = with_portfolio(base_space(dataset, fast=False), list(start.entries))
    return grid_arm(PORTFOLIO_ARM, dataset, space, fast=False)
