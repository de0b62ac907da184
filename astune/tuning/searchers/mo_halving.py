"""Successive halving on several objectives (MO-ASHA) as a Ray Tune scheduler.

Rungs lie at ``grace_period * reduction_factor**k`` of ``time_attr`` (``training_iteration``:
the trial's reports), below ``max_t``, as in Ray's ``ASHAScheduler``. As there, the decision is
asynchronous: a trial that reaches a rung is compared at once with the trials recorded at that
rung before it, and goes on when it is among the best ``1 / reduction_factor`` of them, itself
included; otherwise it stops. A rung that holds fewer than ``reduction_factor`` trials, this one
included, lets it go on. "Best" is NSGA-II's order of the trials' objective vectors (each
objective in its own mode): non-dominated sorting, then crowding distance within the last front
reached (:func:`astune.metrics.objectives.nsga2_keys`), the design of Syne Tune's ``MOASHA``
(Salinas et al., 2021; it breaks ties within a front by an epsilon-net instead). A trial tied
with others is ranked after none of them (ASHA too lets a trial equal to its cutoff go on).

The decision itself, :meth:`MOHalvingScheduler.decide`, needs neither Ray running nor Tune's
trial objects, so a simulated replay of recorded curves can drive the scheduler directly.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from astune._checks import check_choice, check_int, check_range
from astune.metrics.objectives import MODES, nsga2_keys

if TYPE_CHECKING:
    from ray.tune.experiment import Trial


def rung_levels(grace_period: int, reduction_factor: float, max_t: int) -> list[float]:
    """The rungs, lowest first: ``grace_period * reduction_factor**k`` below ``max_t`` (a trial
    at ``max_t`` ends anyway), at least the grace period's own when it lies below ``max_t``."""
    levels: list[float] = []
    level: float = grace_period
    while level < max_t:
        levels.append(level)
        level *= reduction_factor
    return levels


class MOHalvingScheduler(FIFOScheduler):
    """Asynchronous successive halving that ranks the trials at a rung by NSGA-II's order.

    Args:
        metrics: the result keys compared, e.g. ``["objective", "train_seconds"]``.
        modes: ``"max"`` or ``"min"`` per metric, e.g. ``["max", "min"]``.
        time_attr: the result key that counts a trial's progress (monotonic).
        max_t: the most ``time_attr`` a trial reaches; a trial there is stopped (it has ended).
        grace_period: the first rung; no trial is stopped before it.
        reduction_factor: greater than 1; the best ``1 / reduction_factor`` of a rung go on.
    """

    def __init__(
        self,
        metrics: Sequence[str],
        modes: Sequence[str],
        *,
        time_attr: str = "training_iteration",
        max_t: int = 100,
        grace_period: int = 1,
        reduction_factor: float = 3,
    ) -> None:
        super().__init__()
        self._metrics = _check_metrics(metrics, modes)
        self._modes = [check_choice("mode", m, MODES) for m in modes]
        self._time_attr = time_attr
        self._max_t = check_int("max_t", max_t, 1)
        grace = check_int("grace_period", grace_period, 1, self._max_t)
        self._reduction_factor = check_range("reduction_factor", reduction_factor, 1, low_open=True)
        self._metric = self._metrics[0]  # Ray's TrialScheduler.metric: the primary one
        # rung level -> trial id -> the trial's objective vector when it reached that rung
        self._rungs: dict[float, dict[str, tuple[float, ...]]] = {
            level: {} for level in rung_levels(grace, self._reduction_factor, self._max_t)
        }
        self._num_stopped = 0

    # ------------------------------------------------------------------------ Ray Tune's API
    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """The metrics and modes are the scheduler's own: a ``TuneConfig`` that names others
        is refused (False), as Ray's ASHA refuses them."""
        return metric is None and mode is None

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        pass  # one bracket: nothing to assign

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        return self._on_result(trial.trial_id, result, stop_at_end=True)

    def on_trial_complete(self, tune_controller: Any, trial: Trial, result: dict) -> None:
        """A trial that ended records its last result at the rung it reached, as in ASHA."""
        if result:
            self._on_result(trial.trial_id, result, stop_at_end=False, count=False)

    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        pass  # its records stay: the trials that reached a rung are the rung's population

    def debug_string(self) -> str:
        rungs = ", ".join(f"{level:g}: {len(seen)}" for level, seen in self._rungs.items())
        return (
            f"Using multi-objective successive halving ({', '.join(self._metrics)}): "
            f"num_stopped={self._num_stopped}; trials per rung {{{rungs}}}"
        )

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as handle:
            pickle.dump(self.__dict__, handle)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as handle:
            self.__dict__.update(pickle.load(handle))

    # ------------------------------------------------------------------------- the decision
    def _on_result(
        self, trial_id: str, result: Mapping[str, Any], *, stop_at_end: bool, count: bool = True
    ) -> str:
        if self._time_attr not in result or any(m not in result for m in self._metrics):
            return TrialScheduler.CONTINUE  # nothing to compare: as ASHA, no decision
        time = result[self._time_attr]
        if stop_at_end and time >= self._max_t:
            return TrialScheduler.STOP
        values = [result[m] for m in self._metrics]
        decision = self.decide(trial_id, time, values)
        if decision == TrialScheduler.STOP and count:
            self._num_stopped += 1
        return decision

    def decide(self, trial_id: str, time: float, values: Sequence[float]) -> str:
        """``CONTINUE`` or ``STOP`` for trial ``trial_id`` reporting ``values`` (one per metric,
        in the metrics' order) at progress ``time``; a trial reaching a rung it has not been
        recorded at is recorded there. Ray Tune's hooks call this; a replay may call it
        directly."""
        level = self._rung_reached(trial_id, time)
        if level is None:
            return TrialScheduler.CONTINUE
        seen = self._rungs[level]
        seen[trial_id] = tuple(_number(v) for v in values)
        return TrialScheduler.CONTINUE if self.promotes(seen, trial_id) else TrialScheduler.STOP

    def replay(self, trial_id: str, results: Iterable[Mapping[str, Any]]) -> None:
        """Record where ``trial_id`` stood at each rung it reached, from its ``results`` in the
        order reported (a resumed search's history, which ``Tuner.restore`` does not bring
        back): no decision is made or counted. The rungs do not depend on the order of trials."""
        for result in results:
            if self._time_attr not in result or any(m not in result for m in self._metrics):
                continue
            level = self._rung_reached(trial_id, result[self._time_attr])
            if level is not None and result[self._time_attr] < self._max_t:
                self._rungs[level][trial_id] = tuple(_number(result[m]) for m in self._metrics)

    def promotes(self, seen: Mapping[str, Sequence[float]], trial_id: str) -> bool:
        """Whether ``trial_id`` is among the best ``1 / reduction_factor`` of the trials
        ``seen`` at a rung (trial id -> objective vector, ``trial_id``'s own included), or
        the rung holds fewer than ``reduction_factor`` trials."""
        if len(seen) < self._reduction_factor:
            return True
        ids = list(seen)
        keys = nsga2_keys([seen[i] for i in ids], self._modes)
        own = keys[ids.index(trial_id)]
        ahead = sum(key < own for key in keys)
        return ahead * self._reduction_factor < len(ids)

    def _rung_reached(self, trial_id: str, time: float) -> float | None:
        """The highest rung at or below ``time``, if ``trial_id`` is not yet recorded there."""
        reached = [level for level in self._rungs if level <= time]
        if not reached or trial_id in self._rungs[reached[-1]]:
            return None
        return reached[-1]

    @property
    def rungs(self) -> dict[float, dict[str, tuple[float, ...]]]:
        """Rung level -> trial id -> the objective vector it was recorded with (a copy)."""
        return {level: dict(seen) for level, seen in self._rungs.items()}


def _check_metrics(metrics: Sequence[str], modes: Sequence[str]) -> list[str]:
    names = list(metrics) if not isinstance(metrics, str) else [metrics]
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"metrics must be a list of result keys, but got {metrics!r}.")
    if isinstance(modes, str) or len(modes) != len(names):
        raise ValueError(
            f"modes must give one of 'min', 'max' per metric ({len(names)}), but got {modes!r}."
        )
    return names


def _number(value: Any) -> float:
    """A reported value as a float; a missing or non-numeric one is NaN (the worst)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
