"""MLflow naming conventions of astune (docs/contract.md, "MLflow conventions"): tags, params,
metrics.

Torch-free and Ray-free: the search writes runs with these names, and every reader of past
searches (export, recommend, confirm, report) finds them by these names.
"""

from __future__ import annotations

ROLE_TAG = "astune.role"
SEARCH_ID_TAG = "astune.search_id"
TRIAL_ID_TAG = "astune.trial_id"
DATASET_TAG = "astune.dataset"
TASK_TAG = "astune.task"
ERROR_TAG = "astune.error"
STOPPED_EARLY_TAG = "astune.stopped_early"
PARENT_TAG = "mlflow.parentRunId"
BEST_TAG_PREFIX = "astune.best."
NOT_APPLICABLE = "None"
# Logged on every child run, "None" where the trial's config lacks the key (see module doc).
CONVENTION_PARAMS = ("loss", "delta", "warmup_ratio", "lam", "max_accum_steps", "lr")
RUN_STATUSES = ("FINISHED", "FAILED", "KILLED")
# Ray Tune's bookkeeping entries of a result: never logged as metrics.
RAY_RESULT_KEYS = frozenset(
    {
        "config",
        "date",
        "done",
        "hostname",
        "node_ip",
        "pid",
        "timestamp",
        "trial_id",
        "experiment_id",
        "experiment_tag",
        "training_iteration",
        "iterations_since_restore",
        "time_this_iter_s",
        "time_total_s",
        "time_since_restore",
        "timesteps_total",
        "timesteps_since_restore",
        "timesteps_this_iter",
        "episodes_total",
        "episodes_this_iter",
        "checkpoint_dir_name",
        "should_checkpoint",
        "warmup_time",
        "evaluation",  # the metrics' step, not a metric
    }
)
LOST_TAG = "astune.lost"
RETRIES_TAG = "astune.retries"  # times Ray restarted the trial after a failure (a node lost...)
RETRY_ERROR_TAG = "astune.retry_error"  # the failure that made the latest restart
RESTARTED_TAG = "astune.restarted_from_start"  # its checkpoint was gone: the retry starts over
RESTARTED_KEY = "restarted_from_start"  # a trial's report: its checkpoint was unreadable
# A trial's reports after it waited for object storage: the seconds waited so far (cumulative).
STORAGE_WAIT_KEY = "storage_wait_seconds"
STOPPED_BY_TAG = "astune.stopped_by"  # the signal (SIGTERM, SIGINT) that stopped the search
NOTE_TAG = "mlflow.note.content"  # the run's description in the MLflow UI
# A search's parent run: how many of its first trials run the portfolio's configs (absent:
# none, or a search started before it was recorded).
PORTFOLIO_POINTS = "portfolio_points"
# A search's parent run: a param a resume gave another value (MLflow refuses to change a logged
# param), tagged with this prefix and the param's key; the tag holds the value now in force
# (`--resume --num-samples` with more trials, say).
CHANGED_ON_RESUME = "astune.changed_on_resume."
# A search's parent run: the seconds it sat with no driver (from its driver's end, or last
# heartbeat, to a resume), summed over its resumes: `status` leaves them out of its time.
IDLE_SECONDS_TAG = "astune.idle_seconds"
# The costs (astune.metrics.objectives.COSTS) are not among them: every evaluation logs them, so
# their latest value is the run's, and the curves keep one point per evaluation.
FINAL_METRICS = (
    "best_evaluation",
    "checkpoints",  # resume checkpoints the trial wrote (astune.checkpoint_policy)
    "checkpoint_bytes",  # their bytes, best weights included: what went to the storage path
)
SKIPPED_RATIO = "skipped_ratio"
"""Per evaluation, with AS-Skip: the share of the samples visited since the last evaluation
that skipped the forward/backward pass."""
# Confirm runs (`astune confirm`): children of the search's parent run with role "confirm", the
# trial run they re-run in CONFIRMS_TAG ("baseline" for the baseline loss's runs).
CONFIRM_ROLE = "confirm"
CONFIRMS_TAG = "astune.confirms"
CONFIRM_BASELINE = "baseline"
# On the search's parent run while its latest confirm was of the Pareto front (`confirm
# --front`): the points of "faster at equal accuracy" it allowed. `export` then prefers the
# front trial confirmed faster at equal accuracy.
CONFIRM_FRONT_TAG = "astune.confirm_front_within"


class TrackingError(ValueError):
    """The MLflow store cannot be used; the one-line message names the URI and the problem."""


def quote(value: str) -> str:
    """A string literal of MLflow's search filter syntax."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def stop_note(
    signal_name: str,
    *,
    then: str = "`astune search --name ... --resume` goes on from the last checkpoint",
) -> dict[str, str]:
    """The tags of a run whose search (or confirm) a signal stopped: the signal and a note for
    the UI, ending with ``then``, what goes on from there."""
    text = f"Stopped by {signal_name} before it finished; {then}."
    return {STOPPED_BY_TAG: signal_name, NOTE_TAG: text}
