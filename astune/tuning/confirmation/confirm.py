"""`astune confirm`: re-run a search's best configs and the baseline over seeds with Ray Tune.

The runs reuse the search's trainable, resources and MLflow tracking, with no scheduler (no
early stopping). Each run is a child of the search's parent run with ``astune.role=confirm``;
the table (:mod:`astune.confirmation.table`) goes on the parent as ``confirm.csv``, ``confirm.md``
and ``confirm.png``. Resuming is by MLflow: a (config, seed) pair with a FINISHED run is not
run again, and what an interrupted confirm left unfinished is deleted and run anew.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any

from astune._checks import check_int, check_range
from astune.confirmation.plan import CONFIRMS_KEY, ConfirmPlan, plan_confirm
from astune.store.conventions import (
    CONFIRM_ROLE,
    CONFIRMS_TAG,
    DATASET_TAG,
    TASK_TAG,
    stop_note,
)
from astune.store.reader import param
from astune.store.writer import SearchTracker
from astune.tuning.confirmation.confirm_summary import ConfirmResult, summarize_confirm
from astune.tuning.settings import SearchSettings

if TYPE_CHECKING:
    from mlflow.entities import Run

    from astune.config import TrainConfig
    from astune.data.encoding import EncodedData
    from astune.store.driver_lock import DriverLock
    from astune.tuning.lifecycle.stop import StopSignals

FRONT_WITHIN = 0.5  # percentage points: the default tolerance of "faster at equal accuracy"
CONFIRM_AGAIN = "run the same confirm again: it keeps the finished runs and runs the others anew"


@dataclass
class ConfirmSettings:
    """What `astune confirm` was asked for; resources left None take the search's values."""

    experiment: str
    _: KW_ONLY
    top: int | None = None  # default: 2, or with ``front`` every front trial
    seeds: int = 3
    baseline: str = "softmax"
    front: bool = False  # the trials of the Pareto front, cheapest first
    within: float | None = None  # points "faster at equal accuracy" allows (front: 0.5)
    tracking_uri: str | None = None
    max_concurrent: int | None = None
    cpus_per_trial: float | None = None
    gpus_per_trial: float | None = None
    address: str | None = None
    storage_path: str | None = None
    storage_timeout: float | None = None
    console: bool = True
    verbose: bool = False  # --verbose: Ray's and MLflow's own console output
    plugins: tuple[str, ...] = ()  # modules that register the losses its configs name

    @property
    def verdict_within(self) -> float | None:
        """A confirm of the front: its verdict's tolerance (points); else None."""
        if not self.front:
            return None
        return FRONT_WITHIN if self.within is None else self.within

    def validate(self) -> "ConfirmSettings":
        from astune.plugins import load_plugins, plugin_names

        self.plugins = plugin_names(list(self.plugins))
        load_plugins(self.plugins)  # the losses the search's configs may name
        if self.top is not None:
            check_int("top", self.top, 1)
        check_int("seeds", self.seeds, 2)
        if self.within is not None:
            check_range("within", self.within, 0.0, None)
            if not self.front:
                raise ValueError("within applies to a confirm of the front: add --front.")
        if self.max_concurrent is not None:
            check_int("max_concurrent", self.max_concurrent, 1)
        if self.cpus_per_trial is not None:
            check_range("cpus_per_trial", self.cpus_per_trial, 0.0, None, low_open=True)
        if self.gpus_per_trial is not None:
            check_range("gpus_per_trial", self.gpus_per_trial, 0.0)
        if self.storage_timeout is not None:
            check_range("storage_timeout", self.storage_timeout, 0.0)
        return self


@dataclass(kw_only=True)
class PreparedConfirm:
    """A confirm checked and ready for Ray: the plan, the search's settings and data, and the
    (config, seed) pairs that already have a finished run."""

    settings: ConfirmSettings
    plan: ConfirmPlan
    search: SearchSettings
    train_base: TrainConfig
    data: EncodedData
    done: set[tuple[str, int]]
    lock: DriverLock  # this confirm's hold on the search, released by execute_confirm


class ConfirmTracker(SearchTracker):
    """Confirm runs as children of an existing search run; the parent is left as it was."""

    child_role = CONFIRM_ROLE

    def attach(self, parent: "Run") -> None:
        self.experiment_id = parent.info.experiment_id
        self.parent_run_id = parent.info.run_id

    def child_params(self, config: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
        config = dict(config)
        confirms = str(config.pop(CONFIRMS_KEY))
        params, tags = super().child_params(config)
        return params, {**tags, CONFIRMS_TAG: confirms}

    def finish(self, status: str = "FINISHED", *, stopped_by: str | None = None) -> None:
        """Confirm runs still open end KILLED (tagged, with a note, as ``stopped_by``, the
        signal that stopped the confirm); the search's parent run keeps its status."""
        if self.parent_run_id is None:
            return
        for run_id in self.open_trial_runs():
            if stopped_by is not None:
                self.tag_run(run_id, stop_note(stopped_by, then=CONFIRM_AGAIN))
            self.client.set_terminated(run_id, "KILLED")


def confirm_trial(config: dict[str, Any], *, data: EncodedData, base: TrainConfig) -> None:
    """The search's trainable, on the config without the name of what it confirms."""
    from astune.tuning.trainable import train_trial

    train_trial({k: v for k, v in config.items() if k != CONFIRMS_KEY}, data=data, base=base)


def run_confirm(settings: ConfirmSettings) -> ConfirmResult:
    """Plan, run and summarize a confirm; bad input fails before Ray starts."""
    return execute_confirm(prepare_confirm(settings))


def prepare_confirm(settings: ConfirmSettings) -> PreparedConfirm:
    """Validate the request against the store and rebuild the search's data (ValueError)."""
    from astune.config import TrainConfig
    from astune.data.resolve import resolve_dataset
    from astune.tuning.execution import check_local_gpus
    from astune.tuning.runner import base_config

    settings.validate()
    plan = plan_confirm(
        settings.experiment,
        top=settings.top,
        seeds=settings.seeds,
        baseline=settings.baseline,
        front=settings.front,
        tracking_uri=settings.tracking_uri,
    )
    lock = hold_for_confirm(plan)  # before any work, and before unfinished runs are deleted
    try:
        search = search_settings(settings, plan.parent.data.params)
        check_local_gpus(search)
        ref = resolve_dataset(search.dataset)
        train_base = TrainConfig.from_dict(base_config(search, ref)).validate()
        from astune.data.encoded import load_encoded  # torch: once the request is known good

        data = load_encoded(train_base, ref=ref)  # the search checked that its metric works
        done = finished_pairs(plan)
    except BaseException:
        lock.release()
        raise
    return PreparedConfirm(
        settings=settings,
        plan=plan,
        search=search,
        train_base=train_base,
        data=data,
        done=done,
        lock=lock,
    )


def hold_for_confirm(plan: ConfirmPlan) -> DriverLock:
    """One confirm at a time per search: DriverBusy (one line) when another live confirm
    holds it (two would delete each other's unfinished runs)."""
    from astune.store.driver_lock import DriverLock

    client, run_id = plan.store.client, plan.parent.info.run_id
    lock = DriverLock(
        client,
        run_id,
        role="confirm",
        what=f"a confirm of {plan.experiment!r}",
        rivals=lambda: [client.get_run(run_id)],
    )
    lock.acquire()
    return lock


def search_settings(settings: ConfirmSettings, params: Mapping[str, str]) -> SearchSettings:
    """The search's settings from its parent run's params, with the resources and places this
    confirm was given."""
    from astune.tuning.lifecycle.resume import as_before

    given = {
        k: v
        for k, v in dataclasses.asdict(settings).items()
        if k in {f.name for f in dataclasses.fields(SearchSettings)} and v is not None
    }
    given.pop("tracking_uri", None)  # resolved once, by the plan's store
    own = SearchSettings(dataset=params.get("dataset", ""), **given)
    own.given = frozenset({*given, "dataset", "console", "resume", "name"})
    return as_before(own, params).validate()


def finished_pairs(plan: ConfirmPlan) -> set[tuple[str, int]]:
    """The (confirms, seed) pairs of the plan with a FINISHED run; the plan's other runs (left
    RUNNING, KILLED or FAILED by an interrupted confirm) are deleted, to be run anew."""
    store, parent = plan.store, plan.parent
    wanted = {(c.confirms, seed) for c in plan.candidates for seed in plan.seeds}
    done, stale = set(), []
    for run in store.confirm_runs(parent.info.run_id, [parent.info.experiment_id]):
        pair = (run.data.tags.get(CONFIRMS_TAG, ""), param(run, "seed"))
        finished = run.info.status == "FINISHED" and "best_objective" in run.data.metrics
        if finished:
            done.add(pair)
        elif pair in wanted:
            stale.append(run)
    for run in stale:
        if (run.data.tags.get(CONFIRMS_TAG, ""), param(run, "seed")) not in done:
            store.client.delete_run(run.info.run_id)
    return done & wanted


def execute_confirm(prepared: PreparedConfirm) -> ConfirmResult:
    """Run the missing (config, seed) pairs, then log and return the table; SearchStopped (its
    one line) when SIGTERM or SIGINT stopped the runs (:mod:`astune.tuning.lifecycle.stop`)."""
    from astune.tuning import execution
    from astune.tuning.lifecycle.stop import stop_on_signals
    from astune.tuning.notices import library_notices

    points = prepared.plan.points(prepared.done)
    try:
        if points:
            with (
                library_notices(prepared.search.verbose),
                stop_on_signals() as stop,
                execution.ray_for(prepared.search, stop),
            ):
                _fit(prepared, points, stop)
        return summarize_confirm(
            prepared.plan,
            within=prepared.settings.verdict_within,
            metric=f"val_{prepared.data.spec.metric}",
            ran=len(points),
            reused=len(prepared.done),
        )
    finally:
        prepared.lock.release()


def _fit(prepared: PreparedConfirm, points: list[dict[str, Any]], stop: StopSignals) -> None:
    from ray.tune.schedulers import FIFOScheduler
    from ray.tune.search.basic_variant import BasicVariantGenerator

    from astune.tuning.execution import fitting_trials
    from astune.tuning.lifecycle.scratch import clean_stale_scratch
    from astune.tuning.lifecycle.stop import SearchStopped, finished_trials, fit_unless_stopped
    from astune.tuning.tuner import build_tuner, trainable

    search, parent = prepared.search, prepared.plan.parent
    tracker = ConfirmTracker(
        prepared.plan.store.uri,
        prepared.plan.experiment,
        dataset=parent.data.tags.get(DATASET_TAG, ""),
        task=parent.data.tags.get(TASK_TAG, ""),
        search_params={},
    )
    tracker.attach(parent)
    limit = search.max_concurrent or fitting_trials(search)
    tuner = build_tuner(
        search,
        trainable(confirm_trial, search, base=prepared.train_base, data=prepared.data),
        name=f"{prepared.plan.experiment}-confirm-{time.strftime('%Y%m%d-%H%M%S')}",
        tracker=tracker,
        search_alg=BasicVariantGenerator(points_to_evaluate=points, max_concurrent=limit),
        scheduler=FIFOScheduler(),  # no early stopping: every seed runs to the end
        num_samples=len(points),
        metric="objective",
        # Every key of every point must exist in the space for Ray to take the points as given.
        param_space={key: None for point in points for key in point},
        command="confirm",
    )
    experiment = prepared.plan.experiment

    def end_without_ray() -> str:
        tracker.finish(stopped_by=stop.name or None)
        prepared.lock.release()
        by = f"stopped by {stop.name}" if stop.name else "stopped"
        return (
            f"confirm of search {experiment!r} {by} (Ray's processes ended with it; the "
            f"unfinished runs are KILLED in MLflow); {CONFIRM_AGAIN}"
        )

    try:
        results = fit_unless_stopped(
            tuner, stop, command="confirm", end_without_ray=end_without_ray
        )
    finally:
        tracker.finish(stopped_by=stop.name or None)
        clean_stale_scratch()
    if stop.received:
        raise SearchStopped(
            f"confirm of search {experiment!r} stopped by {stop.name} "
            f"({finished_trials(results)} of {len(points)} runs finished, the others KILLED in "
            f"MLflow); {CONFIRM_AGAIN}",
            signal_name=stop.name,
            exit_code=stop.exit_code,
        )
