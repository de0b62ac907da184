"""The portfolio arms of the search-efficiency benchmark (issue 62, items 1, 3 and 5):
``astune-portfolio`` is astune's default search since issue 62, held out.

What it learns from is, in mode a, a reference file made from the other datasets' tables only,
as the packaged prior would hold them, read through an empty MLflow store; in mode b
(``astune-portfolio-store``), an MLflow store of replayed astune searches of the other datasets
(:mod:`.history_store`) and no reference file. Both go through the same ``portfolio_for`` and
``with_portfolio`` a search runs: the portfolio is built for the held-out dataset's slice (its
task family, training rows, backbone and layers; no probe) and run first, in the cold astune
arm's space widened to hold it, laid on the grid. Its own seconds (building the portfolio, on
one thread) open the replay, paid by every worker. Both run behind FIFO, astune's default
behind a portfolio since issue 70's rules study; the ``-hyperband`` and ``-asha`` arms are mode a
under another scheduler (ASHA: the default until then).
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.search_efficiency import arms, settings
from benchmarks.search_efficiency.prior import recorded_difficulty
from benchmarks.search_efficiency.warm import base_space, grid_arm, held_out_reference

if TYPE_CHECKING:
    from astune.history.transfer import TaskProfile

PORTFOLIO_ARM = "astune-portfolio"
STORE_ARM = "astune-portfolio-store"
SOURCES = ("prior", "store")
"""Where a portfolio arm learns from: item 5's mode a (the tables as the packaged prior holds
them) and mode b (an MLflow store of replayed searches)."""
PORTFOLIO_ARMS = {
    PORTFOLIO_ARM: ("prior", "fifo"),
    "astune-portfolio-hyperband": ("prior", "hyperband"),
    "astune-portfolio-asha": ("prior", "asha"),
    STORE_ARM: ("store", "fifo"),
}
"""Each portfolio arm's source (of :data:`SOURCES`) and scheduler (of :data:`arms.SCHEDULES`):
astune's default (FIFO behind the portfolio since issue 70's rules study) in both modes, and
mode a under the other schedulers (ASHA: the default before)."""


@dataclasses.dataclass(frozen=True)
class PortfolioStart:
    """What a portfolio arm of one held-out dataset starts from."""

    entries: tuple  # astune.history.portfolio.PortfolioEntry, run first in this order
    seconds: float  # building it, on one thread
    reference_datasets: tuple[str, ...]  # the datasets it learnt from
    source: str = "prior"  # of SOURCES


def portfolio_start(
    dataset: str, *, root: Path | None = None, store_uri: str | None = None
) -> PortfolioStart:
    """The portfolio ``dataset``'s search would run first (timed), learnt from the other
    datasets alone: their tables (under ``root``) as the prior holds them, or, given
    ``store_uri``, the searches of the MLflow store there (:mod:`.history_store`)."""
    from astune.history.portfolio import build_portfolio
    from astune.history.portfolio_sources import portfolio_for, store_tasks
    from astune.history.reference import reference_searches
    from astune.store.reader import Store

    losses = list(base_space(dataset, fast=False).losses)
    if store_uri is not None:
        start = time.perf_counter()
        # portfolio_for with no reference file, its two steps apart: the tasks name the sources
        tasks = store_tasks(Store(store_uri), exclude=[dataset])
        entries = build_portfolio(target_profile(dataset), tasks, losses=losses)
        seconds = time.perf_counter() - start
        learnt = tuple(sorted({t.dataset for t in tasks}))
        return PortfolioStart(tuple(entries), seconds, learnt, "store")
    with tempfile.TemporaryDirectory() as folder:
        # a portfolio weighs no difficulty: the prior's recorded ones, no probe
        reference = held_out_reference(
            dataset, Path(folder), root=root, difficulty=recorded_difficulty()
        )
        learnt = tuple(e["dataset"] for e in reference_searches(reference))
        start = time.perf_counter()
        entries = portfolio_for(
            target_profile(dataset),
            store=Store(f"sqlite:///{folder}/empty.db"),
            reference=reference,
            losses=losses,
        )
        seconds = time.perf_counter() - start
    return PortfolioStart(tuple(entries), seconds, learnt)


def target_profile(dataset: str) -> TaskProfile:
    """The held-out dataset's slice as a portfolio sees it: no probe, so no difficulty."""
    from astune.data.resolve import resolve_dataset
    from astune.history.transfer import TaskProfile

    data = settings.DATASETS[dataset]
    return TaskProfile(
        difficulty=None,
        task=resolve_dataset(dataset).spec.task,
        train_size=data.train,
        backbone=settings.BACKBONE,
        num_layers=data.num_layers,
    )


def portfolio_arm(
    dataset: str, start: PortfolioStart, *, name: str = PORTFOLIO_ARM, fast: bool = False
) -> arms.Arm:
    """The portfolio arm ``name`` (of :data:`PORTFOLIO_ARMS`) of ``dataset`` on the grid
    (``fast``: its space holds the fast levers too, as the speed/accuracy search's does)."""
    from astune.history.portfolio_space import with_portfolio

    source, schedule = PORTFOLIO_ARMS[name]
    if start.source != source:
        raise ValueError(f"arm {name!r} learns from the {source}, not the {start.source}")
    space = with_portfolio(base_space(dataset, fast=fast), list(start.entries))
    arm = grid_arm(name, dataset, space, fast=fast)
    return dataclasses.replace(arm, schedule=schedule)
