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
