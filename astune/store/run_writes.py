"""MLflow writes of a run in as few calls as MLflow's limits allow, and a client whose store
exists (no search logic: :mod:`astune.store.writer` decides what is written where)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import zip_longest
from typing import TYPE_CHECKING

from astune.store.uri import open_sqlite_locked
from astune.store.values import now_ms

if TYPE_CHECKING:
    from mlflow import MlflowClient

MAX_PARAMS_PER_BATCH = 100  # MLflow's limit on params (and tags) per log_batch
MAX_METRICS_PER_BATCH = 1000
MAX_TAG_LENGTH = 5000


def chunks(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def open_client(tracking_uri: str) -> MlflowClient:
    """An MlflowClient whose store exists. MLflow creates (or upgrades) a SQLite store's schema
    on first use, and two processes doing it at once collide (``duplicate column name``): here
    the first use of a SQLite store holds a file lock beside it. A store that still fails is a
    one-line TrackingError naming the URI."""
    from mlflow import MlflowClient

    if not tracking_uri.startswith("sqlite:///"):
        return MlflowClient(tracking_uri=tracking_uri)

    def open_store() -> MlflowClient:
        client = MlflowClient(tracking_uri=tracking_uri)
        client.search_experiments(max_results=1)  # creates or upgrades the schema
        return client

    return open_sqlite_locked(tracking_uri, "MLflow store", open_store)


def log_params_and_tags(
    client: MlflowClient,
    run_id: str,
    *,
    params: Mapping[str, str] | None = None,
    tags: Mapping[str, str] | None = None,
) -> None:
    """``params`` and ``tags`` (each cut to MLflow's length limit) on run ``run_id``."""
    from mlflow.entities import Param, RunTag

    param_list = [Param(k, v) for k, v in (params or {}).items()]
    tag_list = [RunTag(k, str(v)[:MAX_TAG_LENGTH]) for k, v in (tags or {}).items()]
    batches = zip_longest(
        chunks(param_list, MAX_PARAMS_PER_BATCH),
        chunks(tag_list, MAX_PARAMS_PER_BATCH),
        fillvalue=[],
    )
    for param_chunk, tag_chunk in batches:
        client.log_batch(run_id, params=param_chunk, tags=tag_chunk)


def log_metrics(client: MlflowClient, run_id: str, values: Mapping[str, float], step: int) -> int:
    """``values`` on run ``run_id`` at ``step``, timestamped now; how many were logged."""
    from mlflow.entities import Metric

    now = now_ms()
    metrics = [Metric(key, value, now, step) for key, value in values.items()]
    for chunk in chunks(metrics, MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=chunk)
    return len(metrics)
