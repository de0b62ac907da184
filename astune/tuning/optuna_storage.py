"""The search's Optuna study in an RDB (SQLite) storage beside the MLflow store, so that
Optuna's own tools open it: ``optuna-dashboard sqlite:///<folder>/optuna.db``.

The searcher itself keeps its study in memory: Ray pickles it into the experiment's snapshots,
and a resumed search restores it as it was at the snapshot, in step with the trials Ray
restores. A live RDB study would run ahead of that snapshot (a trial it holds as finished
comes back running) and Optuna refuses the update. So the RDB study is written from the
search's MLflow trial runs whenever the search ends (finished, failed or interrupted), and
rewritten by a resumed search.

A local SQLite MLflow store gets ``optuna.db`` in its folder; any other tracking URI (a server)
gets ``./astune-runs/optuna.db`` on the driver, where the searcher runs. Each search has its own
study, named after its experiment and parent run, so that a new search under an old name does
not load the old trials.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from astune.store.conventions import STOPPED_EARLY_TAG
from astune.store.optuna_trials import distributions, frozen_trial
from astune.store.pareto import finished_points
from astune.store.reader import objective
from astune.store.uri import open_sqlite_locked

if TYPE_CHECKING:
    import optuna
    from mlflow.entities import Run

    from astune.space.space import SearchSpace
    from astune.store.writer import SearchTracker

logger = logging.getLogger(__name__)

OPTUNA_DB = "optuna.db"
STORAGE_TAG = "astune.optuna_storage"
STUDY_TAG = "astune.optuna_study"


def storage_url(tracking_uri: str) -> str:
    """``sqlite:///<absolute folder>/optuna.db`` for the store at ``tracking_uri``."""
    if tracking_uri.startswith("sqlite:///"):
        folder = Path(tracking_uri[len("sqlite:///") :].partition("?")[0]).parent
    else:
        folder = Path("astune-runs")
    return f"sqlite:///{folder.resolve() / OPTUNA_DB}"


def study_name(experiment: str, parent_run_id: str) -> str:
    return f"{experiment}-{parent_run_id[:8]}"


def open_storage(url: str) -> "optuna.storages.RDBStorage":
    """The RDB storage at ``url``; its schema is created under a file lock (two searches
    starting at once would both create the tables). One-line TrackingError if it fails."""
    import optuna

    return open_sqlite_locked(url, "Optuna storage", lambda: optuna.storages.RDBStorage(url))


def dashboard_command(url: str) -> str:
    return f"optuna-dashboard {url}"


def write_study(tracker: "SearchTracker", space: "SearchSpace") -> str | None:
    """(Re)write the search's study from its trial runs, one direction per objective of
    ``space``; return the storage URL, or None when it could not be written (a warning: the
    search's results are in MLflow all the same)."""
    import optuna

    if tracker.parent_run_id is None:
        return None
    url = storage_url(tracker.tracking_uri)
    name = study_name(tracker.experiment_name, tracker.parent_run_id)
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "A new study created" line
    try:
        storage = open_storage(url)
        if name in {s.study_name for s in optuna.get_all_study_summaries(storage)}:
            optuna.delete_study(study_name=name, storage=storage)
        directions = ["minimize" if m == "min" else "maximize" for m in space.modes]
        study = optuna.create_study(storage=storage, study_name=name, directions=directions)
        runs = sorted(tracker.trial_runs(), key=lambda r: r.info.start_time or 0)
        dists = distributions([r.data.params for r in runs])
        trials = [_trial(run, dists, space) for run in runs]
        study.add_trials([t for t in trials if t is not None])
        for key, value in ((STORAGE_TAG, url), (STUDY_TAG, name)):
            tracker.client.set_tag(tracker.parent_run_id, key, value)
    except Exception as err:
        lines = str(err).strip().splitlines()
        logger.warning("Optuna study not written to %s: %s", url, lines[0] if lines else err)
        return None
    finally:
        optuna.logging.set_verbosity(verbosity)
    return url


def _trial(run: "Run", dists: dict, space: "SearchSpace") -> "optuna.trial.FrozenTrial | None":
    """The Optuna trial of ``run``: COMPLETE with one value per objective (those of
    :func:`astune.store.pareto.finished_points`), else PRUNED or FAIL; None while it runs."""
    state = _state(run)
    if state is None:
        return None
    if not space.multi_objective:
        return frozen_trial(run.data.params, dists, objective(run), state)
    finished = finished_points([run], space.objectives)
    if state == "COMPLETE" and not finished:
        state = "FAIL"  # a cost never logged: it cannot stand on the front
    values = [finished[0].values[n] for n in space.objectives] if finished else None
    return frozen_trial(run.data.params, dists, values, state)


def _state(run: "Run") -> str | None:
    """The Optuna state of a trial run: COMPLETE (ran to the end), PRUNED (stopped early),
    FAIL (failed or killed); None while it runs."""
    status = run.info.status
    if status == "FINISHED":
        stopped = run.data.tags.get(STOPPED_EARLY_TAG) == "true"
        return "PRUNED" if stopped or objective(run) is None else "COMPLETE"
    return "FAIL" if status in ("FAILED", "KILLED") else None
