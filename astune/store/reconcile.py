"""On ``--resume``: the child runs of a search brought in line with the experiment Ray restored.

Ray's experiment snapshot and MLflow disagree after a driver died between the two: a trial Ray
never saved (started after the last snapshot) has a run, and a trial Ray saved as completed has
a run still RUNNING. These functions settle both before the restored Tuner runs.
"""

from __future__ import annotations

from astune.store.conventions import LOST_TAG, TRIAL_ID_TAG
from astune.store.writer import SearchTracker


def forget_lost_trials(tracker: SearchTracker, known_trial_ids: set[str]) -> list[str]:
    """On resume: child runs of trials the restored experiment does not know (started just
    before the driver died, after Ray's last snapshot; Optuna proposes them anew). A run
    with no metrics is deleted (MLflow keeps it restorable); one with metrics ends KILLED
    with ``astune.lost=true``. Returns the run ids handled."""
    handled = []
    for run in tracker.trial_runs():
        if run.data.tags.get(TRIAL_ID_TAG) in known_trial_ids:
            continue
        if run.data.metrics:
            tracker.client.set_tag(run.info.run_id, LOST_TAG, "true")
            tracker.client.set_terminated(run.info.run_id, "KILLED")
        else:
            tracker.client.delete_run(run.info.run_id)
        handled.append(run.info.run_id)
    return handled


def finish_completed_trials(tracker: SearchTracker, completed_trial_ids: set[str]) -> list[str]:
    """On resume: child runs still RUNNING of trials the restored experiment holds as
    completed (the driver died after a trial's last report, before its run was closed); Ray
    will not run them again, so they end FINISHED. Returns the run ids handled."""
    handled = []
    for run in tracker.trial_runs():
        if run.info.status == "RUNNING" and run.data.tags.get(TRIAL_ID_TAG) in completed_trial_ids:
            tracker.client.set_terminated(run.info.run_id, "FINISHED")
            handled.append(run.info.run_id)
    return handled
