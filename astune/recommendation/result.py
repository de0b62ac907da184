"""What `astune recommend` answers: :class:`Recommendation`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from astune.history.difficulty import Difficulty
from astune.history.portfolio import PortfolioEntry
from astune.history.transfer import TransferAdvice
from astune.recommendation.delta_history import HistoryPoint
from astune.recommendation.schedules import ScheduleAdvice


@dataclass
class Recommendation:
    """delta with its range, r, the delta schedule, the difficulty they rest on, and why; what
    history transfers of the other keys (:mod:`astune.history.transfer`); the configs a
    search runs first (:mod:`astune.history.portfolio`)."""

    dataset: str
    delta: float
    low: float
    high: float
    warmup_ratio: float
    difficulty: Difficulty
    prior_delta: float
    fit_delta: float | None
    history_weight: float
    schedule: ScheduleAdvice
    points: list[HistoryPoint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rationale: str = ""
    transfer: TransferAdvice | None = None
    fit_warmup_ratio: float | None = None  # history's fit of r at this difficulty (None: none)
    space_file: Path | None = None  # the warmed space, when one was written (--write-space)
    portfolio: list[PortfolioEntry] = field(default_factory=list)  # what a search runs first
    portfolio_scale: str | None = None  # the scale it was learnt at, beside the task's
    backbone: str | None = None  # the search to come's, which the portfolio is for
