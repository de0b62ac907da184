"""New MLflow SQLite stores for tests, copied from one store created once per test process.

MLflow creates a store's tables through its schema migrations, which took 1.6-3.0 s on this
machine for every new store (opening a copy: 0.04 s). A copy of a store just created is the
same database at the same schema revision, and MLflow opens it as it opens any existing store.
The tests that are about creating a store (``tests/test_tracking.py``) still create theirs.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any


def new_store(folder: Path) -> str:
    """The URI of ``folder/mlflow.db``, a new empty store (its Default experiment only) unless
    the file exists already; ``folder`` is created."""
    folder.mkdir(parents=True, exist_ok=True)
    database = folder / "mlflow.db"
    if not database.exists():
        shutil.copyfile(_template(), database)
    return f"sqlite:///{database}"


@functools.cache
def _template() -> Path:
    """The migrated empty database, made on first use, removed when the process ends."""
    from mlflow import MlflowClient

    root = Path(tempfile.mkdtemp(prefix="astune-store-template-"))
    atexit.register(shutil.rmtree, root, True)
    database = root / "mlflow.db"
    MlflowClient(f"sqlite:///{database}").search_experiments()  # runs the migrations
    return database


def open_store_together(uri: str, barrier: Any) -> None:
    """Open the store at ``uri`` when every process waiting on ``barrier`` reaches it: the
    target of the processes of ``test_tracking.py``'s fresh-store test. Here, not in that test
    module: a spawned process imports the module of its target, and that one imports Ray."""
    from astune.store.run_writes import open_client

    barrier.wait(timeout=120)
    open_client(uri).search_experiments()


def copy_store(source: Path, target: Path) -> str:
    """A copy of the SQLite store in ``source`` (``mlflow.db``, the Optuna study beside it and
    its artifact folder) in ``target``, its artifact locations moved to the copy: commands run on
    the copy leave the original as it was. Returns the copy's URI."""
    import sqlite3

    target.mkdir(parents=True, exist_ok=True)
    for name in ("mlflow.db", "optuna.db"):
        if (source / name).exists():
            shutil.copyfile(source / name, target / name)
    if (source / "artifacts").is_dir():
        shutil.copytree(source / "artifacts", target / "artifacts")
    old, new = (source / "artifacts").as_uri(), (target / "artifacts").as_uri()
    with sqlite3.connect(target / "mlflow.db") as db:
        for table, column in (("experiments", "artifact_location"), ("runs", "artifact_uri")):
            db.execute(f"UPDATE {table} SET {column} = replace({column}, ?, ?)", (old, new))
    # MLflow (3.17) caches a run's artifact repository by run id alone, across stores: a process
    # that logged to the original would read and write the copy's artifacts there.
    from mlflow.tracking._tracking_service import utils

    utils._artifact_repos_cache.clear()
    return f"sqlite:///{target / 'mlflow.db'}"


def count_rows(db: Path, query: str) -> int:
    """A count read straight from the sqlite store ``db``: an MlflowClient here would race a
    driver creating the tables, or wait on a tracking server that is down. 0 while there is no
    store yet."""
    import sqlite3

    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as connection:
            return connection.execute(query).fetchone()[0]
    except sqlite3.OperationalError:  # tables not there yet, or locked for a moment
        return 0
