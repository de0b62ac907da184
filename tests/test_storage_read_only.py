"""A trial whose folder on the storage path turns read-only mid-search (a disk remounted
read-only, a quota, a permission changed under it): the trial fails with one line naming the
path, is retried once as every failed trial is, and the search goes on and ends FINISHED, not
as a stopped search. Real local Ray, real SQLite MLflow."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import ray
from mlflow import MlflowClient
from ray import tune
from stores import new_store

from astune._private import trial_storage
from astune.store.uri import resolve_tracking_uri
from astune.store.writer import SearchTracker
from astune.tuning.callbacks import MLflowTrialCallback
from astune.tuning.outcome import best_finished, failed_trials, search_was_stopped

pytestmark = pytest.mark.ray


def read_only(folder: Path) -> None:
    """No new entries in ``folder``, for root too (who writes past permissions): immutable
    (``chattr +i``, ext4) as root, else without write permission."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(folder)], check=True)
    else:
        folder.chmod(0o555)


def writable_again(root: Path) -> None:
    """Undo :func:`read_only` for every folder under ``root`` (pytest deletes them later)."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-R", "-i", str(root)], check=True)
    else:
        for folder in [root, *root.rglob("*")]:
            if folder.is_dir():
                folder.chmod(0o755)


def trainable(config: dict) -> None:
    """Three evaluations with a checkpoint each; with ``read_only`` its trial folder on the
    storage path turns read-only after the first."""
    _, folder = trial_storage()
    for i in range(3):
        with tempfile.TemporaryDirectory() as scratch:
            Path(scratch, "state.txt").write_text(str(i))
            checkpoint = tune.Checkpoint.from_directory(scratch)
            tune.report({"objective": 0.5 + 0.1 * i, "evaluation": i}, checkpoint=checkpoint)
        if config["read_only"]:
            read_only(Path(folder))


def test_a_trial_whose_folder_turns_read_only_fails_naming_it_and_the_search_goes_on(tmp_path):
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import it
    store = resolve_tracking_uri(new_store(tmp_path / "mlflow"))
    params = {"dataset": "sst5", "space": "sst5.yaml", "num_samples": 2, "losses": "as_softmax"}
    tracker = SearchTracker(
        store, "read-only", dataset="sst5", task="single_label", search_params=params
    )
    tracker.start()
    storage = tmp_path / "ray"
    ray.init(num_cpus=1, include_dashboard=False, configure_logging=False)
    try:
        results = tune.Tuner(
            trainable,
            param_space={"read_only": tune.grid_search([True, False])},
            run_config=tune.RunConfig(
                storage_path=str(storage),
                name="search",
                callbacks=[MLflowTrialCallback(tracker)],
                failure_config=tune.FailureConfig(max_failures=1),  # as a search's
                verbose=0,
            ),
        ).fit()
        tracker.finish("FINISHED")
    finally:
        ray.shutdown()
        writable_again(storage)

    stuck, ok = sorted(results, key=lambda r: not r.config["read_only"])
    # Ray reads a trial's error back from its folder, where this one could write none: the
    # driver's own status says it failed, so the search is not taken for a stopped one
    assert stuck.error is None
    assert failed_trials(results) == [r is stuck for r in results]
    assert not search_was_stopped(results)
    best, _ = best_finished(results, "objective", "max")
    assert best.path == ok.path

    client = MlflowClient(store)
    experiment = client.get_experiment_by_name("read-only")
    trials = client.search_runs([experiment.experiment_id], "tags.`astune.role` = 'trial'")
    runs = {"stuck" if r.data.params["read_only"] == "True" else "ok": r for r in trials}
    assert runs["ok"].info.status == "FINISHED"
    failed = runs["stuck"]
    assert failed.info.status == "FAILED" and failed.data.tags["astune.retries"] == "1"
    reason = failed.data.tags["astune.error"]
    assert "\n" not in reason and reason.startswith("PermissionError: ")
    assert stuck.path in reason  # the folder it could not write
    shutil.rmtree(storage)  # nothing was left read-only
