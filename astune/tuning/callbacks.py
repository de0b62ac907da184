"""Ray Tune callbacks of a search (driver side): trial events forwarded to the MLflow writer
(:class:`astune.store.writer.SearchTracker`), and the restart of a trial whose checkpoint is gone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from ray.tune import Callback

from astune.store.conventions import (
    ERROR_TAG,
    RESTARTED_KEY,
    RESTARTED_TAG,
    RETRIES_TAG,
    RETRY_ERROR_TAG,
    STOPPED_EARLY_TAG,
)
from astune.store.outbox import first_line
from astune.store.run_writes import log_metrics
from astune.store.values import result_metrics, trial_run_name
from astune.store.writer import SearchTracker

if TYPE_CHECKING:
    from ray.tune.experiment import Trial

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------- checkpoints
class CheckpointRecovery(Callback):
    """A trial whose checkpoint is gone from storage (a driver killed between a checkpoint and
    the snapshot naming it) restarts from its start instead of failing its retry too.

    Goes before :class:`MLflowTrialCallback` in the Tuner's callbacks: Ray calls them in order,
    and the tracking callback tags the run with what this one did.
    """

    def __init__(self) -> None:
        self._from_start: set[str] = set()

    def on_trial_recover(self, iteration: int, trials: list, trial: "Trial", **info: Any) -> None:
        from astune._private import checkpoint_gone, forget_checkpoints

        try:
            if checkpoint_gone(trial):
                forget_checkpoints(trial)
                self._from_start.add(trial.trial_id)
        except Exception as err:
            logger.warning(
                "checkpoint recovery of trial %s failed (%s: %s); Ray retries it from the "
                "checkpoint it knows",
                trial.trial_id,
                type(err).__name__,
                first_line(err),
            )

    def restarted_from_start(self, trial_id: str) -> bool:
        """True once after this callback sent ``trial_id`` back to its start."""
        if trial_id in self._from_start:
            self._from_start.discard(trial_id)
            return True
        return False


class DropFinishedCheckpoints(Callback):
    """A trial that completes never resumes: its checkpoints (``checkpoint_*``) and stored best
    weights (``best/``) leave the storage path when it ends, and Ray forgets them. An errored
    trial keeps its own, for Ray's retry and for ``--resume``."""

    def on_trial_complete(self, iteration: int, trials: list, trial: "Trial", **info: Any) -> None:
        from astune._private import forget_checkpoints, trial_folder

        try:
            filesystem, folder = trial_folder(trial)
            n = drop_checkpoint_folders(filesystem, folder)
            forget_checkpoints(trial)
        except Exception as err:  # the search goes on; the space is only not given back
            logger.warning(
                "could not delete the checkpoints of finished trial %s (%s: %s); they stay on "
                "the storage path",
                trial.trial_id,
                type(err).__name__,
                first_line(err),
            )
        else:
            logger.debug("trial %s finished: %d checkpoint folders deleted", trial.trial_id, n)


def drop_checkpoint_folders(filesystem: Any, folder: str) -> int:
    """Delete the ``checkpoint_*`` and ``best`` folders right under ``folder`` of the pyarrow
    ``filesystem``; returns how many went."""
    from pyarrow import fs

    found = filesystem.get_file_info(fs.FileSelector(folder, allow_not_found=True))
    doomed = [
        info.path
        for info in found
        if info.type == fs.FileType.Directory
        and (info.base_name.startswith("checkpoint_") or info.base_name == "best")
    ]
    for path in doomed:
        filesystem.delete_dir(path)
    return len(doomed)


# ----------------------------------------------------------------------------------- tracking
class MLflowTrialCallback(Callback):
    """Ray Tune callback (driver side) mapping each trial to a child run of the tracker's parent.

    A trial that Tune stops (scheduler or stopper: the result it gets back has ``done=True``)
    before its ``final`` report (the trainable's last, after training ends) ends FINISHED with
    ``astune.stopped_early=true``; :meth:`mark_stopped_early` marks one explicitly.
    Each hook's writes go through the tracker's :class:`~astune.store.outbox.Outbox`: held in
    order while the tracking server is unreachable, one warning and dropped when it refuses
    one; the search goes on either way.
    """

    def __init__(
        self,
        tracker: SearchTracker,
        recovery: "CheckpointRecovery | None" = None,
        *,
        progress_every: float = 60.0,
    ):
        self.tracker = tracker
        self.recovery = recovery  # placed before this callback in the Tuner's list
        self.progress_every = progress_every  # seconds between a running trial's progress points
        self._runs: dict[str, str] = {}  # trial id -> open child run id
        self._stopped_early: set[str] = set()
        self._last_step: dict[str, int] = {}  # trial id -> last evaluation logged

    def get_state(self) -> dict[str, Any]:
        return {"runs": dict(self._runs), "stopped_early": set(self._stopped_early)}

    def set_state(self, state: dict[str, Any]) -> None:
        self._runs = dict(state.get("runs", {}))
        self._stopped_early = set(state.get("stopped_early", ()))

    def mark_stopped_early(self, trial_id: str) -> None:
        """Tag the trial's run ``astune.stopped_early=true`` when it completes."""
        self._stopped_early.add(trial_id)

    def setup(self, **info: Any) -> None:
        self.tracker.require_parent()

    def _submit(self, label: str, write: Callable[[], object]) -> None:
        self.tracker.outbox.submit(label, write)

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        self._log_progress(trials)
        self.tracker.outbox.flush()  # held writes are retried when due, results or not

    def _log_progress(self, trials: list) -> None:
        """Each running trial's ``progress`` (its share of its samples, at the samples seen as
        the step), at most every ``progress_every`` seconds: the UI shows how far it is."""
        from astune.tuning.progress import read_progress

        every = getattr(self, "progress_every", 60.0)  # a callback pickled before it had one
        now = time.monotonic()
        if now - getattr(self, "_progress_at", 0.0) < every:
            return
        self._progress_at = now
        for trial in trials:
            run_id = self._runs.get(trial.trial_id)
            progress = read_progress(trial.trial_id) if trial.status == "RUNNING" else None
            if run_id is None or progress is None:
                continue
            values = {"progress": round(progress.fraction, 4)}
            self._submit(
                f"the progress of trial {trial.trial_id}",
                partial(log_metrics, self.tracker.client, run_id, values, progress.samples),
            )

    def on_trial_start(self, iteration: int, trials: list, trial: "Trial", **info: Any) -> None:
        trial_id, config = trial.trial_id, dict(trial.config)
        name = trial_run_name(trial_id, config)
        self._stopped_early.discard(trial_id)

        def write() -> None:
            run_id = self.tracker.open_trial_run(trial_id, config, name)
            self._runs[trial_id] = run_id
            self._last_step[trial_id] = self.tracker.last_step(run_id)

        self._submit(f"the start of trial {trial_id}", write)

    def on_trial_result(
        self, iteration: int, trials: list, trial: "Trial", result: dict, **info: Any
    ) -> None:
        trial_id, result = trial.trial_id, dict(result)
        if result.get(RESTARTED_KEY):  # the trial found its checkpoint unreadable
            logger.warning(
                "trial %s restarted from its start: its checkpoint was unreadable", trial_id
            )
        if result.get("done") and not result.get("final"):  # Tune stopped it before its end
            self._stopped_early.add(trial_id)
        self._submit(f"a result of trial {trial_id}", partial(self._log_result, trial_id, result))

    def _log_result(self, trial_id: str, result: dict) -> None:
        run_id = self._run_of(trial_id)
        if run_id is None:
            return
        if result.get("final"):
            self.tracker.log_final(run_id, result)
            return
        if self.tracker.log_result(run_id, result, after=self._last_step.get(trial_id, -1)):
            self._last_step[trial_id] = result_metrics(result)[1]

    def on_trial_complete(self, iteration: int, trials: list, trial: "Trial", **info: Any) -> None:
        trial_id = trial.trial_id
        tags = {STOPPED_EARLY_TAG: "true"} if trial_id in self._stopped_early else None
        self._stopped_early.discard(trial_id)
        self._submit(
            f"the end of trial {trial_id}", lambda: self._close(trial_id, "FINISHED", tags)
        )

    def on_trial_recover(self, iteration: int, trials: list, trial: "Trial", **info: Any) -> None:
        """Ray restarts the trial (from its last checkpoint) after a failure: the run stays
        open and says so (``astune.retries``, ``astune.retry_error``, and
        ``astune.restarted_from_start`` when :class:`CheckpointRecovery` found its checkpoint
        gone)."""
        from astune.tuning.lifecycle.trial_errors import trial_error_message

        trial_id, tags = trial.trial_id, {RETRY_ERROR_TAG: trial_error_message(trial)}
        if self.recovery is not None and self.recovery.restarted_from_start(trial_id):
            tags[RESTARTED_TAG] = "true"

        def write() -> None:
            run_id = self._run_of(trial_id)
            if run_id is not None:
                retries = int(self.tracker.client.get_run(run_id).data.tags.get(RETRIES_TAG, 0))
                self.tracker.tag_run(run_id, {**tags, RETRIES_TAG: str(retries + 1)})

        self._submit(f"the retry of trial {trial_id}", write)

    def on_trial_error(self, iteration: int, trials: list, trial: "Trial", **info: Any) -> None:
        from astune.tuning.lifecycle.trial_errors import trial_error_message

        trial_id, tags = trial.trial_id, {ERROR_TAG: trial_error_message(trial)}
        self._stopped_early.discard(trial_id)
        self._submit(
            f"the failure of trial {trial_id}", lambda: self._close(trial_id, "FAILED", tags)
        )

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        """Runs still open here were neither completed nor failed: the search was
        interrupted (or ended with trials unfinished), so they end KILLED. A completed
        trial's run is left to its own event (still held, maybe, while the server is away)."""
        failed = {trial.trial_id for trial in trials if trial.status == "ERROR"}
        completed = {trial.trial_id for trial in trials if trial.status == "TERMINATED"}

        def write() -> None:
            for trial_id, run_id in list(self._runs.items()):
                if trial_id not in completed:
                    status = "FAILED" if trial_id in failed else "KILLED"
                    self.tracker.close_trial_run(run_id, status)
                self._runs.pop(trial_id, None)

        self._submit("the end of the search's open runs", write)

    def _run_of(self, trial_id: str) -> str | None:
        if trial_id not in self._runs:
            run_id = self.tracker.find_trial_run(trial_id)
            if run_id is None:
                return None  # never started (stopped while pending): nothing to log
            self._runs[trial_id] = run_id
        return self._runs[trial_id]

    def _close(self, trial_id: str, status: str, tags: Mapping[str, str] | None) -> None:
        run_id = self._run_of(trial_id)
        if run_id is not None:
            self.tracker.close_trial_run(run_id, status, tags)
        self._runs.pop(trial_id, None)
        self._last_step.pop(trial_id, None)  # nothing kept per ended trial: searches of 1000s


def attach_tracker(tuner: Any, tracker: SearchTracker) -> MLflowTrialCallback | None:
    """Point the callback of a restored Tuner at ``tracker``; return it (None if not found).

    ``Tuner.restore`` takes no ``RunConfig``: it unpickles the one the first Tuner saved, with
    its callbacks and their tracker (same URI and parent run as then). This rebinds that
    callback to the driver's current tracker, so that both share one parent run and
    :meth:`MLflowTrialCallback.mark_stopped_early` reaches the live callback. It reads Ray's
    private ``Tuner._local_tuner`` (absent with Ray Client): without it, the restored callback
    goes on with its pickled tracker.
    """
    from astune._private import restored_run_config

    run_config = restored_run_config(tuner)
    for callback in getattr(run_config, "callbacks", None) or []:
        if isinstance(callback, MLflowTrialCallback):
            callback.tracker = tracker
            return callback
    return None
