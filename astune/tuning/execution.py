"""The Ray side of a search: starting or joining Ray, resources, the Tuner and its fit (what
the fit gives is :mod:`astune.tuning.outcome`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from astune.store.conventions import PORTFOLIO_POINTS
from astune.tuning.settings import PreparedSearch, SearchError, SearchResult, SearchSettings

if TYPE_CHECKING:
    import pyarrow.fs

    from astune.store.backfill import TrialRecord
    from astune.store.driver_lock import DriverLock
    from astune.store.writer import SearchTracker
    from astune.tuning.lifecycle.stop import StopSignals

logger = logging.getLogger(__name__)


def init_ray(settings: SearchSettings) -> bool:
    """Join ``--address`` or start a local Ray; True when this call started it (and must stop
    it)."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # One checkpoint per evaluation is the design, not a bottleneck worth a warning each time.
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    if ray.is_initialized():
        return False
    # Trials' own output stays in their logs and Ray's INFO lines off the console (unless
    # --verbose); the console callback shows progress and errors.
    kwargs: dict[str, Any] = dict(
        include_dashboard=False,
        log_to_driver=settings.verbose,
        configure_logging=settings.verbose,
    )
    if settings.plugins:  # every node's trials import them: Ray uploads their files
        from astune.plugins import shipped_paths

        kwargs["runtime_env"] = {"py_modules": shipped_paths(settings.plugin_list)}
    if settings.address:
        ray.init(address=settings.address, **kwargs)
        return True
    from astune._private import ray_processes_apart_from_job_signals

    # A signal to the driver's process group, or SIGTERM to every process of the job, then
    # stops the driver alone, which stops its trials gracefully and shuts Ray down itself.
    with ray_processes_apart_from_job_signals():
        ray.init(**kwargs)
    return True


def init_ray_and_store(settings: SearchSettings, tracking_uri: str) -> bool:
    """:func:`init_ray` while the MLflow store at ``tracking_uri`` opens in a thread: creating
    a new SQLite store's schema takes as long as starting Ray (seconds each). True when this
    call started Ray; a store that cannot be opened raises its TrackingError, Ray stopped."""
    import ray

    from astune.store.run_writes import open_client

    with ThreadPoolExecutor(max_workers=1) as pool:
        store = pool.submit(open_client, tracking_uri)
        started_here = init_ray(settings)
    try:
        store.result()
    except BaseException:
        if started_here:
            ray.shutdown()
        raise
    return started_here


@contextmanager
def ray_for(
    settings: SearchSettings, stop: StopSignals, *, tracking_uri: str | None = None
) -> Iterator[None]:
    """Ray for the block: joined, or started here and shut down on the way out, the MLflow store
    at ``tracking_uri`` opened meanwhile (None: none to open), the cluster's resources checked;
    ``stop`` takes SIGTERM and SIGINT back once ``ray.init`` has set its own handler."""
    import ray

    if tracking_uri is None:
        started_here = init_ray(settings)
    else:
        started_here = init_ray_and_store(settings, tracking_uri)
    stop.install()
    try:
        check_resources(settings)
        yield
    finally:
        if started_here:
            ray.shutdown()


def check_local_gpus(settings: SearchSettings) -> None:
    """Before Ray starts: a local search cannot get more GPUs than this machine has."""
    if settings.address or not settings.gpus_per_trial:
        return
    import torch

    have = torch.cuda.device_count()
    if settings.gpus_per_trial > have:
        raise SearchError(
            f"--gpus-per-trial {settings.gpus_per_trial:g} asks for more GPUs than this machine "
            "has "
            f"({have}); accepted: at most {have}"
            + (" (use 0 on a machine without a GPU)" if not have else "")
        )


def check_resources(settings: SearchSettings) -> None:
    """Fail at once on a request the cluster can never meet, instead of PENDING forever."""
    import ray

    total = ray.cluster_resources()
    want = {"CPU": settings.cpus_per_trial, "GPU": settings.gpus_per_trial or 0.0}
    for name, amount in want.items():
        have = total.get(name, 0.0)
        if amount > have:
            flag = "--gpus-per-trial" if name == "GPU" else "--cpus-per-trial"
            raise SearchError(
                f"{flag} {amount:g} asks for more than the Ray cluster has ({have:g} {name}); "
                f"accepted: at most {have:g}"
                + (" (use 0 on a machine without a GPU)" if name == "GPU" else "")
            )


def fitting_trials(settings: SearchSettings) -> int:
    import ray

    total = ray.cluster_resources()
    fits = int(total.get("CPU", 1) // settings.cpus_per_trial)
    if settings.gpus_per_trial:
        fits = min(fits, int(total.get("GPU", 0) // settings.gpus_per_trial))
    return max(1, fits)


def tune_search(prepared: PreparedSearch, max_t: int, *, stop: StopSignals) -> SearchResult:
    """Run the trials under MLflow tracking; the parent run ends with the search's status.
    :class:`~astune.tuning.lifecycle.ending.TrackingBehind` when the tracking server is
    unreachable at the end (the trials' writes wait for it meanwhile: HTTP calls give up in
    seconds); :class:`~astune.tuning.lifecycle.stop.SearchStopped` on a stop signal ``stop``
    received."""
    from astune.store.outbox import fast_failing_http
    from astune.tuning.lifecycle.ending import SearchEnd, TrackingBehind
    from astune.tuning.lifecycle.resume import (
        experiment_saved,
        forget_experiment,
        resume_command,
    )
    from astune.tuning.lifecycle.stop import SearchStopped, fit_or_stop
    from astune.tuning.outcome import search_was_stopped, summarize

    settings, space, base = prepared.settings, prepared.space, prepared.base
    # a new search stopped before fit has nothing to resume: Ray saves its trials from there
    where = dict(
        experiment=settings.experiment_name,
        resume=resume_command(settings),
        resumable=settings.resume,
    )
    stop.check(**where)  # a signal while Ray started: nothing is written
    tracker = search_tracker(prepared)
    lock = claim_search(tracker, resume=settings.resume)
    end = SearchEnd(tracker, lock, space=space, settings=settings)
    try:
        with fast_failing_http():
            stop.check(**where)
            tuner = _tuner(prepared, tracker, max_t)
            results = fit_or_stop(
                tuner,
                stop,
                **where,
                close_killed=lambda: end.close(
                    "KILLED", stopped_by=stop.name or None, failing=True
                ),
                saved=lambda: experiment_saved(settings),
            )
            end.check_caught_up()
            with end.behind_if_unreachable():
                summary = summarize(settings, space, base, results, tracker)
    except SearchStopped as stopped:  # Tune ended the trials gracefully; resume goes on
        end.close("KILLED", stopped_by=stopped.signal_name, failing=True)
        if not stopped.resumable:  # nothing ran: the same command starts it anew
            end.discard()
            forget_experiment(settings)
        raise
    except TrackingBehind:  # nothing more reaches the server: --resume writes it all
        end.give_up()
        raise
    except BaseException as err:
        end.close("KILLED" if isinstance(err, KeyboardInterrupt) else "FAILED", failing=True)
        raise
    # a Tune loop stopped from outside (SIGUSR1) returns with trials unfinished
    end.close("KILLED" if search_was_stopped(results) else "FINISHED")
    return summary


def search_tracker(prepared: PreparedSearch) -> SearchTracker:
    """The MLflow writer of the search: its experiment, and the parent run's params."""
    from astune.store.writer import SearchTracker
    from astune.tuning.lifecycle.resume import search_params

    settings, data = prepared.settings, prepared.data
    return SearchTracker(
        prepared.tracking_uri,
        settings.experiment_name,
        dataset=data.spec.name,
        task=data.spec.task,
        search_params=search_params(settings, prepared.space) | _portfolio_param(prepared),
    )


def _portfolio_param(prepared: PreparedSearch) -> dict[str, int]:
    """How many first trials run the portfolio's configs, for `astune status` (a resume has
    none to give: the parent keeps what its start recorded)."""
    return {PORTFOLIO_POINTS: prepared.portfolio_points} if prepared.portfolio_points else {}


def claim_search(tracker: SearchTracker, *, resume: bool) -> DriverLock:
    """Start (or reopen) the parent run and hold the search for this driver: SearchError (one
    line) when another live driver holds it; a parent run created here is then deleted."""
    from astune.store.driver_lock import DriverBusy, DriverLock

    run_id = tracker.start(resume=resume)
    what = f"search {tracker.experiment_name!r}"
    lock = DriverLock(tracker.client, run_id, role="search", what=what, rivals=tracker.parent_runs)
    try:
        lock.acquire()
    except DriverBusy as err:
        if tracker.created_parent:
            tracker.client.delete_run(run_id)
        raise SearchError(str(err)) from None
    return lock


def _tuner(prepared: PreparedSearch, tracker: SearchTracker, max_t: int) -> Any:
    """A new Tuner, or with ``--resume`` the restored one, its callbacks pointed at ``tracker``
    and the child runs settled with the trials Ray restored."""
    from astune.store.reconcile import finish_completed_trials, forget_lost_trials
    from astune.tuning.callbacks import attach_tracker
    from astune.tuning.lifecycle.backfill import trial_records
    from astune.tuning.lifecycle.resume import go_on_to
    from astune.tuning.searchers.algorithms import scheduler_for, searcher_for
    from astune.tuning.trainable import train_trial
    from astune.tuning.tuner import build_tuner, restore_tuner, trainable

    settings, space = prepared.settings, prepared.space
    function = trainable(train_trial, settings, base=prepared.train_base, data=prepared.data)
    if not settings.resume:
        limit = settings.max_concurrent or fitting_trials(settings)
        return build_tuner(
            settings,
            function,
            name=settings.experiment_name,
            tracker=tracker,
            search_alg=searcher_for(space, settings, max_concurrent=limit),
            scheduler=scheduler_for(space, max_t, settings.scheduler_object),
            num_samples=space.num_samples,
            metric=space.metric,
        )
    if prepared.more_trials:  # a larger --num-samples: the search goes on to more trials
        go_on_to(settings, space.num_samples)
    filesystem, path = settings.experiment_storage()  # built once: it may ask S3 for a region
    tuner = restore_tuner(function, filesystem=filesystem, path=path)
    attach_tracker(tuner, tracker)  # the restored Tuner brings its pickled callbacks
    _set_verbosity(tuner, settings)
    restored = _restored_trials(filesystem, path)
    forget_lost_trials(tracker, set(restored))
    finish_completed_trials(tracker, {t for t, s in restored.items() if s == "TERMINATED"})
    records = trial_records(tuner, restored)
    _restored_console(tuner, settings, space.num_samples, records)
    _backfill(tracker, records)
    _replay_rungs(tuner, records)
    return tuner


def _set_verbosity(tuner: Any, settings: SearchSettings) -> None:
    """The restored Tuner's verbosity as this run asks (``--verbose`` may change on resume;
    the Tuner brings the one it was pickled with)."""
    from astune._private import restored_run_config
    from astune.tuning.tuner import tune_verbosity

    run_config = restored_run_config(tuner)
    if run_config is not None:
        run_config.verbose = tune_verbosity(settings)


def _restored_console(
    tuner: Any, settings: SearchSettings, total: int, records: list[TrialRecord]
) -> None:
    """The restored console as this run asks (it was pickled with the search's first
    ``--num-samples``, which a resume may raise, and ``--progress-every``): its count of
    trials to run, and its progress counting the trials that ended before (with their
    seconds: what is left is estimated from them too)."""
    from astune._private import restored_run_config
    from astune.tuning.console import ConsoleCallback
    from astune.tuning.progress import SearchProgress

    ended = {r.trial_id: float(r.results[-1].get("time_total_s", 0.0)) for r in records
             if r.completed and r.results}  # fmt: skip
    for callback in getattr(restored_run_config(tuner), "callbacks", None) or []:
        if isinstance(callback, ConsoleCallback):
            callback.num_samples, callback.progress = total, SearchProgress(total)
            callback.progress.ran_before(ended)
            callback.progress_every = settings.progress_every


def _replay_rungs(tuner: Any, records: list[TrialRecord]) -> None:
    """Give the restored multi-objective scheduler back the rungs the trials reached before
    the search stopped: it is unpickled as it was when the search started."""
    from astune._private import restored_scheduler
    from astune.tuning.searchers.mo_halving import MOHalvingScheduler

    scheduler = restored_scheduler(tuner)
    if isinstance(scheduler, MOHalvingScheduler):
        for record in records:
            scheduler.replay(record.trial_id, record.results)


def _backfill(tracker: SearchTracker, records: list[TrialRecord]) -> None:
    """Write what the restored trials reported and MLflow lacks, and say so in one line."""
    from astune.store.backfill import backfill_trials

    done = backfill_trials(tracker, records)
    if done.anything:
        logger.warning(
            "tracking caught up from Ray's records: %d runs created, %d evaluations and %d "
            "final reports written, %d runs set FINISHED",
            done.runs,
            done.evaluations,
            done.finals,
            len(done.finished),
        )


def _restored_trials(filesystem: pyarrow.fs.FileSystem | None, path: str) -> dict[str, str]:
    """Trial id -> Ray status (``TERMINATED``: completed) of the experiment saved at ``path``
    (on ``filesystem``; None: ``path`` is a local folder or URI)."""
    from ray.tune import ExperimentAnalysis

    analysis = ExperimentAnalysis(path, storage_filesystem=filesystem)
    return {trial.trial_id: trial.status for trial in analysis.trials}
