"""The search's Optuna study in an RDB (SQLite) storage beside the MLflow store, so that
Optuna's own tools open it: ``optuna-dashboard sqlite:///<folder>/optuna.db``.

A local SQLite MLflow store gets ``optuna.db`` in its folder; any other tracking URI (a server)
gets ``./astune-runs/optuna.db`` on the driver, where the searcher runs. Each search has its own
study, named after its experiment and parent run, so that a new search under an old name does
not load the old trials.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from astune.store.conventions import TrackingError

if TYPE_CHECKING:
    import optuna

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
    import fcntl

    import optuna

    database = Path(url[len("sqlite:///") :])
    try:
        database.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{database}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                return optuna.storages.RDBStorage(url)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    except Exception as err:
        lines = str(err).strip().splitlines()
        raise TrackingError(
            f"Optuna storage {url} cannot be opened: {type(err).__name__}: "
            f"{lines[0] if lines else ''}"
        ) from None


def dashboard_command(url: str) -> str:
    return f"optuna-dashboard {url}"
