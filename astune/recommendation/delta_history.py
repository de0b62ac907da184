"""The history `recommend` learns from: one point per search with finished AS-Softmax trials
(its dataset's difficulty, and the delta, r and delta schedule of its best AS trial), and the
weighted line fitted through such points."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from astune.config import TRAIN_FIELDS
from astune.history.difficulty import Difficulty
from astune.history.transfer import HISTORY_SHRINK
from astune.losses.delta import SCHEDULE_KEYS
from astune.store.confirmed import confirmed_configs, confirmed_winner
from astune.store.conventions import PARENT_TAG
from astune.store.reader import (
    AS_LOSSES,
    Store,
    best_trial,
    dataset_of,
    finished_trials,
    objective,
    param,
    search_mode,
)

if TYPE_CHECKING:
    from mlflow.entities import Run


@dataclass
class HistoryPoint:
    """The best AS-Softmax trial of one search, placed at its dataset's difficulty."""

    experiment: str
    dataset: str
    difficulty: float
    delta: float
    warmup_ratio: float
    objective: float
    n_trials: int
    confirmed_seeds: int = 0  # > 0: delta, r and objective are `astune confirm`'s winner's
    run_id: str = ""  # the best AS trial's run
    schedule: str = "fixed"  # its delta schedule (astune/losses/delta.py)
    schedule_params: dict[str, float] = field(default_factory=dict)  # the keys it reads
    schedules_tried: tuple[str, ...] = ("fixed",)  # by the search's AS trials, sorted

    @property
    def weight(self) -> float:
        """A search with more AS trials pins its best delta down better."""
        return self.n_trials / (self.n_trials + HISTORY_SHRINK)


def history_points(
    store: Store, difficulty_of: Callable[[str, "Run"], Difficulty]
) -> tuple[list[HistoryPoint], list[str]]:
    """One point per search with finished AS-Softmax trials, and notes on searches left out."""
    by_parent: dict[str, list[Run]] = {}
    for run in finished_trials(store.trials(), AS_LOSSES):
        by_parent.setdefault(run.data.tags.get(PARENT_TAG, ""), []).append(run)
    points, notes = [], []
    for parent in store.searches():
        trials = [t for t in by_parent.get(parent.info.run_id, []) if param(t, "delta") is not None]
        if not trials:
            continue
        name = store.experiment_name(parent.info.experiment_id)
        difficulty = difficulty_of(dataset_of(parent) or "", parent)
        if difficulty.value is None:
            notes.append(f"search {name!r} left out: difficulty of {dataset_of(parent)!r} unknown")
            continue
        best, value, seeds = _best_as_trial(store, parent, trials)
        schedule = schedule_of(best)
        points.append(
            HistoryPoint(
                experiment=name,
                dataset=dataset_of(parent) or "",
                difficulty=difficulty.value,
                delta=float(param(best, "delta")),
                warmup_ratio=float(param(best, "warmup_ratio") or 0.0),
                objective=value,
                n_trials=len(trials),
                confirmed_seeds=seeds,
                run_id=best.info.run_id,
                schedule=schedule,
                schedule_params=schedule_params_of(best, schedule),
                schedules_tried=tuple(sorted({schedule_of(t) for t in trials})),
            )
        )
    return points, notes


def schedule_of(trial: "Run") -> str:
    """The trial's delta schedule: ``fixed`` for runs from before schedules were logged."""
    return str(param(trial, "delta_schedule") or "fixed")


def schedule_params_of(trial: "Run", schedule: str) -> dict[str, float]:
    """The keys ``schedule`` reads, as the trial ran them (a key it did not log: the default)."""
    logged = {key: param(trial, key) for key in SCHEDULE_KEYS[schedule]}
    return {k: float(TRAIN_FIELDS[k].default if v is None else v) for k, v in logged.items()}


def _best_as_trial(store: Store, parent: "Run", trials: list["Run"]) -> tuple["Run", float, int]:
    """The search's best AS trial, its objective and seeds: by confirmed mean where
    `astune confirm` re-ran AS trials of the search, else by single-run objective."""
    by_id = {t.info.run_id: t for t in trials}
    confirmed = [c for c in confirmed_configs(store, parent) if c.confirms in by_id]
    mode = search_mode(parent)
    winner = confirmed_winner(confirmed, mode)
    if winner is not None:
        return by_id[winner.confirms], winner.mean, len(winner.seeds)
    best = best_trial(trials, mode)
    return best, objective(best), 0


@dataclass
class LineFit:
    """``y = intercept + slope * x`` through weighted points; predictions clipped to [low, high]."""

    intercept: float
    slope: float
    low: float
    high: float
    resid_sd: float | None  # None below 3 points

    def predict(self, x: float) -> float:
        return min(self.high, max(self.low, self.intercept + self.slope * x))


def fit_line(xs: list[float], ys: list[float], ws: list[float]) -> LineFit:
    """Weighted least squares; a weighted mean below 3 points or when all x are equal."""
    total = sum(ws)
    mx = sum(w * x for w, x in zip(ws, xs)) / total
    my = sum(w * y for w, y in zip(ws, ys)) / total
    sxx = sum(w * (x - mx) ** 2 for w, x in zip(ws, xs))
    slope = 0.0
    if len(xs) >= 3 and sxx > 1e-9:
        slope = sum(w * (x - mx) * (y - my) for w, x, y in zip(ws, xs, ys)) / sxx
    intercept = my - slope * mx
    resid_sd = None
    if len(xs) >= 3:
        dof = len(xs) - (2 if slope else 1)
        rss = sum(w * (y - intercept - slope * x) ** 2 for w, x, y in zip(ws, xs, ys)) / total
        resid_sd = math.sqrt(rss * len(xs) / max(1, dof))
    return LineFit(intercept, slope, min(ys), max(ys), resid_sd)
