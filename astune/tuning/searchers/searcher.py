"""Optuna behind Ray Tune, told the truth about trials that did not finish.

Ray's ``OptunaSearch`` tells Optuna that a trial stopped early by the scheduler is COMPLETE with
its early (truncated) score, and that a trial which raised after reporting is COMPLETE too, so
TPE learns from values that are not the trials' results. Here the first is PRUNED (Optuna's
state for exactly this) and the second FAIL.
"""

from __future__ import annotations

from typing import Any

from optuna.trial import TrialState
from ray.tune.search.optuna import OptunaSearch

from astune._private import optuna_study, optuna_trials, told_trials


class PruneAwareOptunaSearch(OptunaSearch):
    """``OptunaSearch`` that marks scheduler-stopped trials PRUNED and errored ones FAIL."""

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        if trial_id in told_trials(self) or trial_id not in optuna_trials(self):
            return super().on_trial_complete(trial_id, result, error)
        if error:
            return self._tell(trial_id, None, TrialState.FAIL)
        if result is not None and not result.get("final"):  # stopped before its last report
            return self._tell(trial_id, None, TrialState.PRUNED)
        return super().on_trial_complete(trial_id, result, error)

    def _tell(self, trial_id: str, value: float | None, state: TrialState) -> None:
        optuna_study(self).tell(optuna_trials(self)[trial_id], value, state=state)
        told_trials(self).add(trial_id)

    def trial_states(self) -> dict[str, str]:
        """Optuna's state of every trial told so far, by Tune trial id (for tests and reports)."""
        trials = optuna_study(self).get_trials(deepcopy=False)
        by_number = {t.number: t.state.name for t in trials}
        return {tid: by_number[t.number] for tid, t in optuna_trials(self).items()}
