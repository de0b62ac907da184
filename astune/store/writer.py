"""The MLflow writer of a search: one parent run on the driver, one child run per trial.

No Ray here: :class:`SearchTracker` owns the experiment and the parent run and writes the child
runs; ``astune.tuning.callbacks.MLflowTrialCallback`` (a ``ray.tune.Callback`` on the driver)
forwards Ray Tune's trial events to it. Trials themselves never talk to MLflow, so a trial
restart, a trial on another node or a resumed search cannot create duplicate runs: a child run
is found again by its ``astune.trial_id`` tag under the parent.

Conventions (docs/contract.md, "MLflow conventions"):

- parent run: tags ``astune.role=search``, ``astune.search_id``, ``astune.dataset``,
  ``astune.task``; params: the search settings given to :class:`SearchTracker`.
- child run: tags ``astune.role=trial``, ``mlflow.parentRunId``, ``astune.trial_id``,
  ``astune.dataset``, ``astune.task``; params: every key of the trial config, plus ``loss``,
  ``delta``, ``warmup_ratio``, ``lam``, ``max_accum_steps`` and ``lr`` always: a key that the
  trial's config lacks because it does not apply (``delta`` of a softmax trial, ``lam`` with
  AS-Speed off) is logged as the string ``"None"`` ("not applicable"), never as a made-up value.
- metrics: every numeric entry of a reported result except Ray's bookkeeping, at
  ``step = result["evaluation"]`` when reported, else ``training_iteration - 1``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from astune.store.conventions import (
    CHANGED_ON_RESUME,
    DATASET_TAG,
    ERROR_TAG,
    FINAL_METRICS,
    IDLE_SECONDS_TAG,
    NOTE_TAG,
    PARENT_TAG,
    RESTARTED_KEY,
    RESTARTED_TAG,
    ROLE_TAG,
    RUN_STATUSES,
    SEARCH_ID_TAG,
    STOPPED_BY_TAG,
    STOPPED_EARLY_TAG,
    TASK_TAG,
    TRIAL_ID_TAG,
    TrackingError,
    quote,
    stop_note,
)
from astune.store.driver_lock import idle_seconds
from astune.store.outbox import Outbox
from astune.store.run_writes import log_metrics, log_params_and_tags, open_client
from astune.store.uri import artifact_location, resolve_tracking_uri
from astune.store.values import flat_params, result_metrics, trial_params

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Run

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------- tracker
class SearchTracker:
    """The MLflow side of one search: its experiment, its parent run and its child runs.

    Created on the driver. Picklable (Ray pickles the callbacks, which hold the tracker, into
    the experiment folder): the client is rebuilt from ``tracking_uri`` after unpickling.
    Its child runs carry the role ``child_role`` (``trial``;
    :mod:`astune.tuning.confirmation.confirm` tracks confirm runs with a subclass).
    """

    child_role = "trial"

    def __init__(
        self,
        tracking_uri: str | None,
        experiment_name: str,
        *,
        dataset: str,
        task: str,
        search_params: Mapping[str, Any],
        tags: Mapping[str, str] | None = None,
        search_id: str | None = None,
    ):
        if not experiment_name or not experiment_name.strip():
            raise TrackingError(
                f"experiment name must be a non-empty string, got {experiment_name!r}."
            )
        self.tracking_uri = resolve_tracking_uri(tracking_uri)
        self.experiment_name = experiment_name
        self.search_id = search_id or experiment_name
        self.dataset, self.task = dataset, task
        self.search_params = dict(search_params)
        self.tags = {str(k): str(v) for k, v in (tags or {}).items()}
        self.experiment_id: str | None = None
        self.parent_run_id: str | None = None
        self._client: MlflowClient | None = None
        self._outbox: Outbox | None = None
        self._killed: list[str] = []  # child runs this driver ended KILLED
        self.created_parent = False  # start() made a new parent run (else reopened one)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None, "_outbox": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update({"_killed": [], **state})  # pickled by an older astune: no _killed

    @property
    def client(self) -> "MlflowClient":
        if self._client is None:
            self._client = open_client(self.tracking_uri)
        return self._client

    @property
    def outbox(self) -> Outbox:
        """The queue the search's trial events are written through (held while the tracking
        server is unreachable); not pickled with the tracker."""
        if getattr(self, "_outbox", None) is None:
            self._outbox = Outbox()
        return self._outbox

    def _base_tags(self, role: str) -> dict[str, str]:
        return {**self.tags, ROLE_TAG: role, DATASET_TAG: self.dataset, TASK_TAG: self.task}

    # --------------------------------------------------------------------- parent run
    def start(self, resume: bool = False, parent_run_id: str | None = None) -> str:
        """Create the experiment (if new) and the parent run; return the parent run id.

        With ``resume``, reopen the parent: ``parent_run_id`` when given, else the latest
        parent run of this ``search_id`` in the experiment (a new one if there is none).
        """
        self.experiment_id = self._experiment_id()
        run_id = None
        if resume:
            run_id = parent_run_id or self._find_parent()
            if run_id is None:
                logger.warning("no parent run of search %r to resume; starting one", self.search_id)
        self.created_parent = run_id is None
        if run_id is None:
            run_id = self._create_parent()
        else:
            parent = self._check_parent(run_id)
            idle = idle_seconds(parent, "search", time.time())  # before this driver's claim
            self._reopen(
                parent, flat_params(self.search_params), tags={IDLE_SECONDS_TAG: f"{idle:.3f}"}
            )
        self.parent_run_id = run_id
        return run_id

    def _experiment_id(self) -> str:
        experiment = self.client.get_experiment_by_name(self.experiment_name)
        if experiment is None:
            return self.client.create_experiment(
                self.experiment_name,
                artifact_location=artifact_location(self.tracking_uri, self.experiment_name),
            )
        if experiment.lifecycle_stage == "deleted":
            self.client.restore_experiment(experiment.experiment_id)
        return experiment.experiment_id

    def _find_parent(self) -> str | None:
        runs = self.parent_runs(max_results=1)
        return runs[0].info.run_id if runs else None

    def parent_runs(self, max_results: int = 100) -> list["Run"]:
        """The parent runs of this search in its experiment, newest first."""
        return self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`{ROLE_TAG}` = 'search' and tags.`{SEARCH_ID_TAG}` = "
            f"{quote(self.search_id)}",
            max_results=max_results,
            order_by=["attributes.start_time DESC"],
        )

    def _check_parent(self, run_id: str) -> Run:
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException:
            message = f"parent run {run_id!r} not found in {self.tracking_uri}."
            raise TrackingError(message) from None
        if run.info.experiment_id != self.experiment_id or run.data.tags.get(ROLE_TAG) != "search":
            raise TrackingError(
                f"run {run_id!r} is not a search run of experiment {self.experiment_name!r}."
            )
        return run

    def _create_parent(self) -> str:
        tags = {**self._base_tags("search"), SEARCH_ID_TAG: self.search_id}
        run = self.client.create_run(self.experiment_id, run_name=self.search_id, tags=tags)
        self._log(run.info.run_id, params=flat_params(self.search_params))
        return run.info.run_id

    def _reopen(
        self, run: Run, params: Mapping[str, str], *, tags: Mapping[str, str] | None = None
    ) -> None:
        """Set ``run`` (as just read) back to RUNNING; log the params it lacks, tag the ones that
        changed (MLflow refuses to change a logged param), and ``tags``."""
        run_id, existing = run.info.run_id, run.data.params
        new = {k: v for k, v in params.items() if k not in existing}
        changed = {
            f"{CHANGED_ON_RESUME}{k}": v
            for k, v in params.items()
            if k in existing and existing[k] != v
        }
        changed.update(tags or {})
        if run.info.status != "RUNNING":
            self.client.update_run(run_id, status="RUNNING")
        if STOPPED_BY_TAG in run.data.tags:  # the stop's note is past once it runs again
            for tag in (STOPPED_BY_TAG, NOTE_TAG):
                self.client.delete_tag(run_id, tag)
        self._log(run_id, params=new, tags=changed)

    def finish(self, status: str = "FINISHED", *, stopped_by: str | None = None) -> None:
        """End the search: still-open child runs end KILLED, the parent ends with ``status``;
        ``stopped_by`` (a signal's name) is tagged, with a note, on the parent and those runs."""
        if status not in RUN_STATUSES:
            raise TrackingError(f"status must be one of {', '.join(RUN_STATUSES)}, got {status!r}.")
        if self.parent_run_id is None:
            return
        still_open = self.open_trial_runs()
        if stopped_by is not None:
            for run_id in {*self._killed, *still_open, self.parent_run_id}:
                self.tag_run(run_id, stop_note(stopped_by))
        for run_id in still_open:
            self.client.set_terminated(run_id, "KILLED")
        self.client.set_terminated(self.parent_run_id, status)

    @contextmanager
    def session(self, resume: bool = False, parent_run_id: str | None = None) -> Iterator[str]:
        """``start`` then ``finish``: FINISHED, KILLED on Ctrl-C, FAILED on an exception."""
        run_id = self.start(resume, parent_run_id)
        try:
            yield run_id
        except (KeyboardInterrupt, SystemExit):
            self.finish("KILLED")
            raise
        except Exception:
            self.finish("FAILED")
            raise
        self.finish("FINISHED")

    # --------------------------------------------------------------------- child runs
    def require_parent(self) -> str:
        if self.parent_run_id is None:
            raise TrackingError(
                f"search {self.search_id!r} has no parent run: call SearchTracker.start() "
                "before creating the Tuner."
            )
        return self.parent_run_id

    def find_trial_run(self, trial_id: str) -> str | None:
        """The child run of ``trial_id`` under this parent, if one exists."""
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`{TRIAL_ID_TAG}` = {quote(trial_id)} and "
            f"tags.`{PARENT_TAG}` = {quote(self.require_parent())} and {self._role_filter()}",
            max_results=1,
            order_by=["attributes.start_time DESC"],
        )
        return runs[0].info.run_id if runs else None

    def open_trial_run(
        self, trial_id: str, config: Mapping[str, Any], name: str | None = None
    ) -> str:
        """Create the child run of a trial, or reopen the one a resumed search left."""
        params, extra_tags = self.child_params(config)
        run_id = self.find_trial_run(trial_id)
        if run_id is not None:
            run = self.client.get_run(run_id)
            for tag in (ERROR_TAG, STOPPED_EARLY_TAG):  # from the earlier attempt
                if tag in run.data.tags:
                    self.client.delete_tag(run_id, tag)
            self._reopen(run, params)
            return run_id
        parent = self.require_parent()
        tags = {**self._base_tags(self.child_role), TRIAL_ID_TAG: trial_id, PARENT_TAG: parent}
        tags.update(extra_tags)
        run = self.client.create_run(self.experiment_id, run_name=name or trial_id, tags=tags)
        self._log(run.info.run_id, params=params)
        return run.info.run_id

    def last_step(self, run_id: str) -> int:
        """The last evaluation logged on a trial's run (-1: none): a trial that restarts from
        an older checkpoint (or from scratch) repeats evaluations MLflow already holds."""
        history = self.client.get_metric_history(run_id, "objective")
        return max((m.step for m in history), default=-1)

    def child_params(self, config: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
        """The params and the extra tags of a child run of ``config``."""
        return trial_params(config), {}

    def log_result(self, run_id: str, result: Mapping[str, Any], after: int = -1) -> int:
        """Log a Tune result's metrics in one batch unless its step is ``after`` or earlier
        (already logged); return how many were logged. A result that says its trial restarted
        from its start (its checkpoint was unreadable) tags the run so, logged or not: its
        first report repeats an evaluation MLflow holds."""
        if result.get(RESTARTED_KEY):
            self.tag_run(run_id, {RESTARTED_TAG: "true"})
        values, step = result_metrics(result)
        return 0 if step <= after else log_metrics(self.client, run_id, values, step)

    def log_final(self, run_id: str, result: Mapping[str, Any]) -> None:
        """The last report of a finished trial: its test metrics and summary numbers (step 0),
        and the validation p_margin histogram as ``p_margin.json``. Its best-evaluation copies
        of the validation metrics are not logged again, so the curves keep one point per
        evaluation."""
        values, _ = result_metrics(result)
        keep = {k: v for k, v in values.items() if k.startswith("test_") or k in FINAL_METRICS}
        if "objective" in values:
            keep["best_objective"] = values["objective"]
        log_metrics(self.client, run_id, keep, 0)
        if isinstance(result.get("p_margin_json"), str):
            self.client.log_dict(run_id, json.loads(result["p_margin_json"]), "p_margin.json")

    def tag_run(self, run_id: str, tags: Mapping[str, str]) -> None:
        self._log(run_id, tags=tags)

    def close_trial_run(
        self, run_id: str, status: str, tags: Mapping[str, str] | None = None
    ) -> None:
        if tags:
            self._log(run_id, tags=tags)
        self.client.set_terminated(run_id, status)
        if status == "KILLED":
            self._killed.append(run_id)

    def open_trial_runs(self) -> list[str]:
        """The child runs of this parent still RUNNING."""
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`{PARENT_TAG}` = {quote(self.require_parent())} and "
            f"attributes.status = 'RUNNING' and {self._role_filter()}",
            max_results=10000,
        )
        return [run.info.run_id for run in runs]

    def trial_runs(self) -> list["Run"]:
        """All child runs of this parent (``mlflow.entities.Run``)."""
        return self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`{PARENT_TAG}` = {quote(self.require_parent())} and "
            f"{self._role_filter()}",
            max_results=10000,
        )

    def _role_filter(self) -> str:
        return f"tags.`{ROLE_TAG}` = {quote(self.child_role)}"

    def _log(
        self,
        run_id: str,
        *,
        params: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        log_params_and_tags(self.client, run_id, params=params, tags=tags)
