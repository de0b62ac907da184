"""A few trials one step from the best so far, then the wrapped sampler alone (issue 70).

A portfolio (:mod:`astune.history.portfolio`) starts a search near what won on past tasks; the
best of it is rarely the task's best, but often one step from it (a larger lr, another delta).
TPE then proposes at random for its first trials. :class:`NeighbourSampler` spends a few of
those trials on the incumbent's one-exchange neighbourhood instead (one parameter moved one
step, as SMAC's local search moves, Hutter et al. 2011): after the enqueued seed points, each of
its first ``trials`` trials is a neighbour of the best finished trial not yet tried, drawn at
random. Every other trial, and every parameter the neighbour does not name (the other loss's
after a move of ``loss``), is the wrapped sampler's.

A step: the next choice up or down of an ordered numeric categorical, any other choice of one
that is not; :data:`STEP_FRACTION` of a numeric range (of its logarithm on a log scale).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import FrozenTrial, TrialState

from astune._checks import check_int
from astune._private import optuna_enqueued

STEP_FRACTION = 0.25
"""A numeric parameter's step, as a fraction of its range: four steps from end to end."""


class NeighbourSampler(optuna.samplers.BaseSampler):
    """``base`` (TPE by default), whose first ``trials`` trials after the enqueued ones are the
    incumbent's neighbours. One objective only: with several there is no one incumbent."""

    def __init__(
        self,
        base: optuna.samplers.BaseSampler | None = None,
        *,
        trials: int,
        seed: int | None = None,
    ) -> None:
        self.trials = check_int("trials", trials, 0)
        self.base = base if base is not None else optuna.samplers.TPESampler(seed=seed)
        self._rng = np.random.RandomState(seed)
        self._plans: dict[int, dict[str, Any]] = {}

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.base.before_trial(study, trial)
        if len(self._plans) >= self.trials or optuna_enqueued(trial):
            return
        if len(study.directions) != 1:
            return
        plan = self._neighbour(study)
        if plan is not None:
            self._plans[trial.number] = plan

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        if trial.number in self._plans:
            return {}
        return self.base.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if trial.number in self._plans:
            return {}
        return self.base.sample_relative(study, trial, search_space)

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        plan = self._plans.get(trial.number, {})
        if param_name in plan and _holds(param_distribution, plan[param_name]):
            return plan[param_name]
        return self.base.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        self.base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.base.reseed_rng()
        self._rng.seed()

    def planned(self) -> dict[int, dict[str, Any]]:
        """The neighbour each local trial was given, by trial number."""
        return {number: dict(plan) for number, plan in self._plans.items()}

    def _neighbour(self, study: optuna.Study) -> dict[str, Any] | None:
        """A neighbour of the best finished trial that no trial has run, or None."""
        done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if not done:
            return None
        pick = max if study.direction == optuna.study.StudyDirection.MAXIMIZE else min
        best = pick(done, key=lambda t: float(t.value))  # type: ignore[arg-type]
        tried = [t.params for t in study.get_trials(deepcopy=False) if t.params]
        moves = [
            {**best.params, name: value}
            for name, dist in best.distributions.items()
            for value in neighbour_values(dist, best.params[name])
        ]
        fresh = [m for m in moves if not any(_same(m, params) for params in tried)]
        fresh = [m for m in fresh if m not in self._plans.values()]
        return fresh[self._rng.randint(len(fresh))] if fresh else None


def neighbour_values(dist: BaseDistribution, value: Any) -> list[Any]:
    """The values one step from ``value`` within ``dist`` (module docstring), none equal to it."""
    if isinstance(dist, CategoricalDistribution):
        return _categorical_steps(dist.choices, value)
    if isinstance(dist, (FloatDistribution, IntDistribution)):
        return _numeric_steps(dist, value)
    return []


def _categorical_steps(choices: Sequence[Any], value: Any) -> list[Any]:
    numeric = all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in choices)
    if not numeric or value not in choices:
        return [c for c in choices if c != value]
    ordered = sorted(set(choices))
    at = ordered.index(value)
    return [ordered[i] for i in (at - 1, at + 1) if 0 <= i < len(ordered)]


def _numeric_steps(dist: FloatDistribution | IntDistribution, value: float) -> list[Any]:
    low, high = float(dist.low), float(dist.high)
    scale, unscale = (math.log, math.exp) if dist.log else (float, float)
    step = STEP_FRACTION * (scale(high) - scale(low))
    out: list[Any] = []
    for sign in (-1, 1):
        moved = min(max(unscale(scale(float(value)) + sign * step), low), high)
        moved = _on_grid(dist, moved, value, sign)
        if moved != value and moved not in out and low <= moved <= high:
            out.append(moved)
    return out


def _on_grid(dist: FloatDistribution | IntDistribution, moved: float, value: float, sign: int):
    """``moved`` on ``dist``'s steps (at least one step from ``value``) and of its type."""
    grid = dist.step
    if grid is None:
        return moved
    steps = max(1, round(abs(moved - value) / grid))
    moved = value + sign * steps * grid
    return int(round(moved)) if isinstance(dist, IntDistribution) else float(moved)


def _holds(dist: BaseDistribution, value: Any) -> bool:
    """Whether ``dist`` can take ``value`` (a plan made in another branch of the space may
    name a parameter that this trial's distribution of it cannot)."""
    if isinstance(dist, CategoricalDistribution):
        return value in dist.choices
    if isinstance(dist, (FloatDistribution, IntDistribution)):
        return isinstance(value, (int, float)) and dist.low <= value <= dist.high
    return False


def _same(plan: dict[str, Any], params: dict[str, Any]) -> bool:
    """Whether a trial of ``params`` ran ``plan``: equal on every key both name."""
    return all(params[k] == v for k, v in plan.items() if k in params)
