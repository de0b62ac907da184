"""Early stopping with several objectives, measured (issue 44 item 5): the hypervolume of a
speed/accuracy search's front against trial-seconds, with astune's successive halving by
non-dominated sorting (:class:`astune.tuning.searchers.mo_halving.MOHalvingScheduler`) and
without it (every trial to its end: what ``auto`` did with several objectives before), in the
same replay.

The search: the ``astune-fast-cold`` arm's grid (the shipped space, softmax, the epochs, the
fast levers), its seed points first, objectives (validation metric, max;
``train_seconds``, min) proposed by astune's prune-aware ``OptunaSearch`` over Optuna's
multi-objective TPE; a stopped trial is told PRUNED and never enters the front.

Each scheduler runs twice: from the fast arm's own seed points (issue 44) and with the
portfolio in front (issue 62 item 3: the fast arm's space widened to hold the held-out dataset's
portfolio from the other tables, which runs first). The multi-objective default is the
scheduler with the larger median hypervolume area (its curve's mean over the budget) behind the
portfolio on most datasets (:func:`mo_default`); the current default, MO-halving, keeps a tie.

Hypervolume: of the front of the trials that ran to their end, each at its final report
(metric, train seconds), against :data:`efficiency_settings.HV_REFERENCE` (a metric of 0 and two
trial-lengths of seconds), the area the front dominates, in metric x trial-lengths.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from benchmarks.search_efficiency import arms, lineup, replay, settings

OBJECTIVES, MODES = ("objective", "train_seconds"), ("max", "min")
SCHEDULERS = ("mo-halving", "fifo")


@dataclasses.dataclass(frozen=True)
class ParetoArm:
    """The fast arm's grid searched on two objectives, with or without early stopping."""

    base: arms.Arm
    halving: bool

    @property
    def seed_points(self) -> tuple[dict[str, Any], ...]:
        return self.base.seed_points

    @property
    def reuse_actors(self) -> bool:
        return self.base.reuse_actors

    def searcher(self, seed: int) -> Any:
        import optuna

        from astune.tuning.searchers.searcher import PruneAwareOptunaSearch

        return PruneAwareOptunaSearch(
            space=self.base.define_by_run,
            metric=list(OBJECTIVES),
            mode=list(MODES),
            points_to_evaluate=[dict(p) for p in self.seed_points],
            sampler=optuna.samplers.TPESampler(seed=seed),
        )

    def scheduler(self) -> Any:
        from ray.tune.schedulers import FIFOScheduler

        from astune.tuning.searchers.mo_halving import MOHalvingScheduler

        if not self.halving:
            return FIFOScheduler()
        return MOHalvingScheduler(
            metrics=list(OBJECTIVES),
            modes=list(MODES),
            time_attr="training_iteration",
            max_t=self.base.max_epochs,
            grace_period=self.base.grace_period,
            reduction_factor=self.base.reduction_factor,
        )


class ParetoReplay(replay.Replay):
    """A replay that keeps, at each trial's end, the front's hypervolume so far."""

    def __init__(self, table: replay.Table, arm: ParetoArm, **kwargs: Any):
        super().__init__(table, arm, **kwargs)
        self.length = table.trial_length()
        self.finished: list[tuple[float, float]] = []  # (metric, train seconds) at the end
        self.hv_curve: list[tuple[float, float]] = []  # (trial-seconds, hypervolume)

    def _end(self, now: float, tid: str, *, error: bool = False) -> None:
        act = self.active[tid]
        if not error and not act.log.stopped and act.result is not None:
            self.finished.append((act.result["objective"], act.result["train_seconds"]))
            hv = hypervolume(self.finished, self.length)
            self.hv_curve.append((self.busy(now), hv))
        super()._end(now, tid, error=error)


def hypervolume(points: list[tuple[float, float]], trial_length: float) -> float:
    """The area (metric x trial-lengths) that ``points`` (metric, max; seconds, min) dominate
    up to the reference point: metric ``HV_REFERENCE["objective"]``, seconds
    ``HV_REFERENCE["trial_lengths"]`` trial-lengths."""
    ref_metric = settings.HV_REFERENCE["objective"]
    ref_cost = settings.HV_REFERENCE["trial_lengths"]
    inside = sorted(
        (s / trial_length, m) for m, s in points if m > ref_metric and s / trial_length < ref_cost
    )
    area, best = 0.0, ref_metric
    for i, (cost, metric) in enumerate(inside):
        best = max(best, metric)
        upto = inside[i + 1][0] if i + 1 < len(inside) else ref_cost
        area += (upto - cost) * (best - ref_metric)
    return area


def hv_at(curve: list[tuple[float, float]], at: np.ndarray) -> np.ndarray:
    """The hypervolume at each trial-seconds of ``at`` (0 before the first finished trial)."""
    seconds = np.array([s for s, _ in curve])
    values = np.array([v for _, v in curve])
    index = np.searchsorted(seconds, at, side="right") - 1
    return np.where(index >= 0, values[np.maximum(index, 0)] if len(values) else 0.0, 0.0)


def replay_pareto(
    table: replay.Table,
    dataset: str,
    *,
    budget: float,
    repetitions: int,
    points: int = 50,
    portfolio: Any = None,
) -> dict[str, Any]:
    """Both schedulers on ``table``, ``repetitions`` times each (repetition i seeded i), from
    the fast arm's seed points and, given ``portfolio`` (a
    :class:`~benchmarks.search_efficiency.portfolio_arm.PortfolioStart`), behind it."""
    from benchmarks.search_efficiency.portfolio_arm import portfolio_arm

    at = np.linspace(0, budget, points + 1)[1:]
    out: dict[str, Any] = {
        "objectives": list(OBJECTIVES),
        "modes": list(MODES),
        "reference": settings.HV_REFERENCE,
        "trial_length_seconds": table.trial_length(),
        "trial_seconds": at.tolist(),
    }
    out.update(_schedulers(table, lineup.build_arm("astune-fast-cold", dataset), at, repetitions))
    if portfolio is not None:
        base = portfolio_arm(dataset, portfolio, fast=True)
        out["portfolio"] = _schedulers(table, base, at, repetitions)
    return out


def _schedulers(
    table: replay.Table, base: arms.Arm, at: np.ndarray, repetitions: int
) -> dict[str, Any]:
    """Each of :data:`SCHEDULERS` over ``base``'s grid and seed points: its hypervolume curve
    (median at ``at``), area, final value and trials."""
    out = {}
    for name in SCHEDULERS:
        arm = ParetoArm(base, halving=name == "mo-halving")
        budget = float(at[-1])
        runs = [ParetoReplay(table, arm, seed=i, budget=budget).run() for i in range(repetitions)]
        curves = np.array([hv_at(r.hv_curve, at) for r in runs])
        final = [float(c[-1]) for c in curves]
        out[name] = {
            "hypervolume_median": np.median(curves, axis=0).tolist(),
            "hypervolume_area": replay.median_interval([float(c.mean()) for c in curves]),
            "final_hypervolume": replay.median_interval(final),
            "trials_median": float(np.median([len(r.trials) for r in runs])),
            "stopped_share": float(np.mean([np.mean([t.stopped for t in r.trials]) for r in runs])),
        }
    return out


def mo_default(datasets: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Issue 62 item 3's rule for several objectives: behind the portfolio, the scheduler whose
    median hypervolume area is larger on more datasets; MO-halving (the default before) on a
    tie. Each dataset's winner is listed."""
    winners = {}
    for name, entry in datasets.items():
        if "portfolio" in entry:
            areas = {s: entry["portfolio"][s]["hypervolume_area"]["median"] for s in SCHEDULERS}
            winners[name] = max(SCHEDULERS, key=lambda s: (areas[s], s == "mo-halving"))
    wins = {s: sum(w == s for w in winners.values()) for s in SCHEDULERS}
    default = "fifo" if wins["fifo"] > wins["mo-halving"] else "mo-halving"
    return {"by_dataset": winners, "wins": wins, "default": default}
