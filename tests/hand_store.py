"""MLflow stores written by hand with MlflowClient (a real SQLite store, no Ray): the searches
and runs that tests of the readers (`export`, `confirm`) compute their answers against."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from stores import new_store

# The trials of FRONT_SEARCH: trial -> (objective, train_seconds, status, stopped early).
# Its Pareto front (objective max, train_seconds min) is fast, close, best.
TRIALS = {
    "best": (0.800, 100.0, "FINISHED", False),
    "close": (0.797, 60.0, "FINISHED", False),  # 0.3 points below the best, 40% faster
    "fast": (0.790, 30.0, "FINISHED", False),  # 1 point below, 70% faster
    "dominated": (0.780, 40.0, "FINISHED", False),  # "fast" beats it on both
    "stopped": (0.700, 5.0, "FINISHED", True),  # ASHA stopped it: never on the front
    "failed": (0.900, 1.0, "FAILED", False),
}
FRONT_SEARCH = "multi"  # objectives: the metric and training time
SINGLE_SEARCH = "single"  # the metric alone
UNFINISHED_SEARCH = "unfinished"  # the metric and training time; its one trial failed
ONE_FRONT_SEARCH = "one-front"  # the metric and training time; "only" beats "slower" on both
ONE_FRONT_TRIALS = {
    "only": (0.800, 30.0, "FINISHED", False),
    "slower": (0.790, 60.0, "FINISHED", False),
}


def log_run(
    client: MlflowClient,
    experiment_id: str,
    tags: dict[str, str],
    params: dict[str, Any],
    metrics: dict[str, float],
    status: str = "FINISHED",
) -> str:
    """A run with ``tags``, ``params`` (as strings) and ``metrics``, ended ``status``; its id."""
    run = client.create_run(experiment_id, tags=tags)
    for key, value in params.items():
        client.log_param(run.info.run_id, key, str(value))
    for key, value in metrics.items():
        client.log_metric(run.info.run_id, key, value)
    client.set_terminated(run.info.run_id, status)
    return run.info.run_id


def write_search(
    client: MlflowClient, name: str, objectives: str | None, trials: dict[str, tuple] = TRIALS
) -> dict[str, str]:
    """A search ``name`` (parent run, ``objectives`` param when given) with ``trials`` (as
    :data:`TRIALS`); trial name -> run id."""
    exp = client.create_experiment(name)
    params = {"dataset": "sst5", "backbone": "minilm", "num_layers": 1, "seed": 0, "mode": "max"}
    if objectives is not None:
        params["objectives"] = objectives
    parent = log_run(client, exp, {"astune.role": "search", "astune.dataset": "sst5"}, params, {})
    ids = {}
    for i, (trial, (value, seconds, status, stopped)) in enumerate(trials.items()):
        tags = {"mlflow.parentRunId": parent, "astune.role": "trial", "astune.trial_id": trial}
        if stopped:
            tags["astune.stopped_early"] = "true"
        metrics = {"best_objective": value, "val_accuracy": value, "train_seconds": seconds}
        params = {"loss": "as_softmax", "delta": 0.3, "lr": 0.001 * (i + 1), "seed": 0}
        ids[trial] = log_run(client, exp, tags, params, metrics, status)
    return ids


def write_front_store(folder: Path) -> tuple[str, dict[str, str]]:
    """A store in ``folder`` with :data:`FRONT_SEARCH`, :data:`SINGLE_SEARCH`,
    :data:`UNFINISHED_SEARCH` and :data:`ONE_FRONT_SEARCH`: its URI and the first's trial name
    (its tag ``astune.trial_id``) -> run id."""
    uri = new_store(folder)
    client = MlflowClient(tracking_uri=uri)
    ids = write_search(client, FRONT_SEARCH, "objective,train_seconds")
    write_search(client, SINGLE_SEARCH, None)
    failed = {"failed": TRIALS["failed"]}
    write_search(client, UNFINISHED_SEARCH, "objective,train_seconds", failed)
    write_search(client, ONE_FRONT_SEARCH, "objective,train_seconds", ONE_FRONT_TRIALS)
    return uri, ids
