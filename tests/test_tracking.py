"""The MLflow tracking layer of a search, on a real local Ray (2 CPUs) and a real SQLite MLflow."""

from __future__ import annotations

import http.server
import os
import pickle
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("MLFLOW_ENABLE_TELEMETRY", "false")

import ray  # noqa: E402
from mlflow import MlflowClient  # noqa: E402
from ports import free_port  # noqa: E402
from ray import tune  # noqa: E402
from ray.tune.search import Searcher  # noqa: E402
from stores import new_store, open_store_together  # noqa: E402

from astune.config import TrainConfig  # noqa: E402
from astune.store.artifacts import best_config_mapping, log_search_artifacts  # noqa: E402
from astune.store.conventions import CONVENTION_PARAMS, TrackingError  # noqa: E402
from astune.store.reconcile import finish_completed_trials, forget_lost_trials  # noqa: E402
from astune.store.uri import (  # noqa: E402
    check_tracking_uri,
    default_tracking_uri,
    mlflow_ui_command,
    resolve_tracking_uri,
)
from astune.store.writer import SearchTracker  # noqa: E402
from astune.tuning.callbacks import (  # noqa: E402
    CheckpointRecovery,
    MLflowTrialCallback,
    attach_tracker,
)
from astune.tuning.outcome import best_finished  # noqa: E402

METRICS = ("objective", "val_accuracy", "val_loss", "masked_ratio", "accum_steps", "delta_now")
POINTS = [  # what Optuna's define-by-run space proposes: conditional keys only where they apply
    {
        "loss": "as_softmax",
        "lr": 2e-5,
        "delta": 0.3,
        "warmup_ratio": 0.0,
        "as_speed": True,
        "lam": 1.0,
        "max_accum_steps": 4,
    },
    {"loss": "as_softmax", "lr": 3e-5, "delta": 0.2, "warmup_ratio": 0.1, "as_speed": False},
    {"loss": "softmax", "lr": 2e-5},
]


def tiny_trainable(config: dict, fail_marker: str | None = None) -> None:
    """Reports 3 evaluations with a checkpoint each, resuming after its checkpoint; raises at
    ``fail_at`` unless the marker file exists (so that a restored search can succeed)."""
    checkpoint = tune.get_checkpoint()
    first = 0
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            first = int(Path(folder, "state.txt").read_text()) + 1
    for i in range(first, 3):
        if config.get("fail_at") == i and not (fail_marker and Path(fail_marker).exists()):
            raise RuntimeError(f"boom at evaluation {i}\nsecond line")
        metrics = {
            "objective": 0.5 + 0.1 * i + config.get("delta", 0.0),
            "val_accuracy": 0.5 + 0.1 * i,
            "val_loss": 1.0 / (i + 1),
            "masked_ratio": 0.2 * i,
            "accum_steps": 1 + i,
            "delta_now": config.get("delta", 1.0),
            "train_loss": 2.0 / (i + 1),
            "epoch": i + 1,
            "evaluation": i,
        }
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "state.txt").write_text(str(i))
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(folder))


class ListSearcher(Searcher):
    """Suggests the given configs in order, then finishes."""

    def __init__(self, points: list[dict]):
        super().__init__()
        self.points = [dict(p) for p in points]

    def suggest(self, trial_id: str) -> dict | None:
        return self.points.pop(0) if self.points else Searcher.FINISHED

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False):
        pass


@pytest.fixture(scope="module")
def ray_local(request: pytest.FixtureRequest) -> None:
    # Ray workers cannot import this test module: ship its functions by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    request.addfinalizer(ray.shutdown)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One SQLite store for the module (creating its tables takes seconds)."""
    uri = resolve_tracking_uri(new_store(tmp_path_factory.mktemp("mlflow")))
    return uri


def make_tracker(store: str, name: str, **kwargs) -> SearchTracker:
    params = {"dataset": "sst5", "space": "sst5.yaml", "num_samples": 3, "losses": "as_softmax"}
    return SearchTracker(
        store, name, dataset="sst5", task="single_label", search_params=params, **kwargs
    )


def run_tuner(
    tmp_path: Path,
    callback: MLflowTrialCallback,
    trainable,
    *,
    param_space: dict | None = None,
    stop: dict | None = None,
    **tune_kwargs,
) -> tune.ResultGrid:
    tuner = tune.Tuner(
        trainable,
        param_space=param_space or {},
        tune_config=tune.TuneConfig(max_concurrent_trials=2, **tune_kwargs),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path / "ray"),
            name="search",
            callbacks=[callback],
            verbose=0,
            stop=stop,
        ),
    )
    return tuner.fit()


def runs_by_role(client: MlflowClient, experiment: str, role: str) -> list:
    exp = client.get_experiment_by_name(experiment)
    return client.search_runs([exp.experiment_id], filter_string=f"tags.`astune.role` = '{role}'")


def steps(client: MlflowClient, run_id: str, key: str) -> list[int]:
    return sorted(m.step for m in client.get_metric_history(run_id, key))


# ------------------------------------------------------------------------------ search runs
@pytest.mark.ray
def test_search_logs_parent_and_one_child_per_trial(ray_local, store, tmp_path):
    tracker = make_tracker(store, "three-trials")
    parent_id = tracker.start()
    batches = []
    log_batch = tracker.client.log_batch
    tracker.client.log_batch = lambda run_id, **kw: (batches.append(kw), log_batch(run_id, **kw))[1]

    run_tuner(
        tmp_path,
        MLflowTrialCallback(tracker),
        tiny_trainable,
        search_alg=ListSearcher(POINTS),
        num_samples=-1,
    )
    tracker.finish("FINISHED")

    client = MlflowClient(store)
    parents = runs_by_role(client, "three-trials", "search")
    children = runs_by_role(client, "three-trials", "trial")
    assert [p.info.run_id for p in parents] == [parent_id]
    assert parents[0].info.status == "FINISHED"
    assert parents[0].data.params["num_samples"] == "3"
    assert parents[0].data.tags["astune.dataset"] == "sst5"
    assert len(children) == 3
    by_loss_lr = {(c.data.params["loss"], c.data.params["lr"]): c for c in children}
    for child in children:
        assert child.info.status == "FINISHED"
        assert child.data.tags["mlflow.parentRunId"] == parent_id
        assert child.data.tags["astune.task"] == "single_label"
        assert "astune.stopped_early" not in child.data.tags
        assert set(CONVENTION_PARAMS) <= set(child.data.params)
        assert set(METRICS) <= set(child.data.metrics)
        ray_keys = {"time_this_iter_s", "training_iteration", "pid", "evaluation"}
        assert not ray_keys & set(child.data.metrics)
        for key in METRICS:
            assert steps(client, child.info.run_id, key) == [0, 1, 2]
    softmax = by_loss_lr[("softmax", "2e-05")]
    assert softmax.data.params["delta"] == "None" and softmax.data.params["lam"] == "None"
    assert softmax.info.run_name.startswith("softmax-")
    assert by_loss_lr[("as_softmax", "2e-05")].data.params["lam"] == "1.0"
    assert by_loss_lr[("as_softmax", "3e-05")].data.params["max_accum_steps"] == "None"
    assert by_loss_lr[("as_softmax", "3e-05")].data.metrics["objective"] == pytest.approx(0.9)
    metric_batches = [b for b in batches if b.get("metrics")]
    assert len(metric_batches) == 9  # one log_batch per result, not one call per metric


@pytest.mark.ray
def test_failed_trial_is_failed_with_its_error(ray_local, store, tmp_path):
    tracker = make_tracker(store, "one-fails")
    tracker.start()
    points = [{"loss": "as_softmax", "lr": 2e-5, "delta": 0.3, "fail_at": 1}, POINTS[2]]
    results = run_tuner(
        tmp_path,
        MLflowTrialCallback(tracker),
        tiny_trainable,
        search_alg=ListSearcher(points),
        num_samples=-1,
    )
    tracker.finish("FINISHED")

    # the failed trial scored 0.8 before it raised, the finished one 0.7 at best: the best
    # config is the finished one's (Ray's scope="all" would pick the failed one)
    assert results.get_best_result("objective", "max", scope="all").error is not None
    best, value = best_finished(results, "objective", "max")
    assert best.error is None and best.config["loss"] == "softmax"
    assert value == pytest.approx(0.7)

    client = MlflowClient(store)
    children = {c.data.params["loss"]: c for c in runs_by_role(client, "one-fails", "trial")}
    failed, ok = children["as_softmax"], children["softmax"]
    assert failed.info.status == "FAILED"
    assert failed.data.tags["astune.error"] == "RuntimeError: boom at evaluation 1"
    assert steps(client, failed.info.run_id, "objective") == [0]
    assert ok.info.status == "FINISHED" and "astune.error" not in ok.data.tags


@pytest.mark.ray
def test_trial_stopped_by_tune_is_tagged_stopped_early(ray_local, store, tmp_path):
    tracker = make_tracker(store, "stopped")
    tracker.start()
    callback = MLflowTrialCallback(tracker)
    run_tuner(
        tmp_path,
        callback,
        tiny_trainable,
        search_alg=ListSearcher(POINTS[:1]),
        num_samples=-1,
        stop={"training_iteration": 2},
    )
    tracker.finish("FINISHED")

    (child,) = runs_by_role(MlflowClient(store), "stopped", "trial")
    assert child.info.status == "FINISHED"
    assert child.data.tags["astune.stopped_early"] == "true"
    assert steps(MlflowClient(store), child.info.run_id, "objective") == [0, 1]


# ------------------------------------------------------------------------------ resume
def fake_trial(
    trial_id: str, config: dict, status: str = "RUNNING", checkpoint: Path | None = None
) -> SimpleNamespace:
    """A Tune trial as the callback sees it, with Ray's own checkpoint bookkeeping."""
    from ray.train._internal.checkpoint_manager import _CheckpointManager, _TrainingResult

    manager = _CheckpointManager(tune.CheckpointConfig(num_to_keep=2))
    if checkpoint is not None:
        manager.register_checkpoint(
            _TrainingResult(checkpoint=tune.Checkpoint(str(checkpoint)), metrics={})
        )
    return SimpleNamespace(
        trial_id=trial_id,
        config=config,
        status=status,
        error_file=None,
        pickled_error_file=None,
        run_metadata=SimpleNamespace(checkpoint_manager=manager),
    )


def test_resumed_driver_reuses_runs(store):
    first = make_tracker(store, "resume-direct")
    parent_id = first.start()
    callback = MLflowTrialCallback(first)
    a, b = fake_trial("t_a", POINTS[0]), fake_trial("t_b", POINTS[2])
    for trial in (a, b):
        callback.on_trial_start(iteration=0, trials=[a, b], trial=trial)
        callback.on_trial_result(0, [a, b], trial, {"objective": 0.5, "evaluation": 0})
    # the driver dies here: both runs stay RUNNING

    second = make_tracker(store, "resume-direct", tags={"restart": "1"})
    assert second.start(resume=True) == parent_id
    restored = pickle.loads(pickle.dumps(MLflowTrialCallback(second)))  # Ray pickles callbacks
    changed = fake_trial("t_a", {**POINTS[0], "lr": 9e-5})  # a param value MLflow cannot change
    restored.on_trial_start(iteration=0, trials=[changed], trial=changed)
    restored.on_trial_result(0, [changed], changed, {"objective": 0.7, "evaluation": 1})
    restored.on_trial_complete(iteration=0, trials=[changed], trial=changed)
    second.finish("FINISHED")  # t_b never came back

    client = MlflowClient(store)
    runs = runs_by_role(client, "resume-direct", "trial")
    children = {c.data.tags["astune.trial_id"]: c for c in runs}
    assert sorted(children) == ["t_a", "t_b"]  # no duplicate
    assert len(runs_by_role(client, "resume-direct", "search")) == 1
    assert children["t_a"].info.status == "FINISHED"
    assert children["t_a"].data.params["lr"] == "2e-05"
    assert children["t_a"].data.tags["astune.changed_on_resume.lr"] == "9e-05"
    assert steps(client, children["t_a"].info.run_id, "objective") == [0, 1]
    assert children["t_b"].info.status == "KILLED"
    assert client.get_run(parent_id).info.status == "FINISHED"


def test_a_retried_trial_keeps_one_point_per_evaluation_and_says_why_it_restarted(store, tmp_path):
    tracker = make_tracker(store, "retried")
    tracker.start()
    callback = MLflowTrialCallback(tracker)
    trial = fake_trial("t_r", POINTS[0])
    callback.on_trial_start(iteration=0, trials=[trial], trial=trial)
    for evaluation in (0, 1, 2):
        callback.on_trial_result(
            0, [trial], trial, {"objective": 0.1 * evaluation, "evaluation": evaluation}
        )
    error = tmp_path / "error.txt"
    error.write_text("Traceback ...\nray.exceptions.ActorDiedError: The actor died: node lost\n")
    trial.error_file = str(error)
    callback.on_trial_recover(iteration=0, trials=[trial], trial=trial)
    # Ray restarts it from its checkpoint of evaluation 0: evaluations 1 and 2 come again
    callback.on_trial_start(iteration=0, trials=[trial], trial=trial)
    for evaluation in (1, 2, 3):
        callback.on_trial_result(0, [trial], trial, {"objective": 0.9, "evaluation": evaluation})
    callback.on_trial_complete(iteration=0, trials=[trial], trial=trial)

    client = MlflowClient(store)
    (run,) = runs_by_role(client, "retried", "trial")
    history = client.get_metric_history(run.info.run_id, "objective")
    assert sorted((m.step, m.value) for m in history) == [(0, 0.0), (1, 0.1), (2, 0.2), (3, 0.9)]
    assert run.data.tags["astune.retries"] == "1"
    assert (
        run.data.tags["astune.retry_error"]
        == "ray.exceptions.ActorDiedError: The actor died: node lost"
    )
    assert run.info.status == "FINISHED"
    assert "astune.restarted_from_start" not in run.data.tags  # it had no checkpoint to lose


def test_a_trial_whose_checkpoint_is_gone_restarts_from_its_start(store, tmp_path):
    tracker = make_tracker(store, "gone")
    tracker.start()
    recovery = CheckpointRecovery()
    callbacks = (recovery, MLflowTrialCallback(tracker, recovery))  # in the Tuner's order
    kept, gone = tmp_path / "checkpoint_000002", tmp_path / "checkpoint_000001"
    kept.mkdir()
    present = fake_trial("t_kept", POINTS[0], checkpoint=kept)
    missing = fake_trial("t_gone", POINTS[0], checkpoint=gone)  # deleted by Ray, still named
    for trial in (present, missing):
        callbacks[1].on_trial_start(iteration=0, trials=[trial], trial=trial)
        for callback in callbacks:
            callback.on_trial_recover(iteration=0, trials=[trial], trial=trial)
    assert not recovery.restarted_from_start("t_gone")  # told once, to the tracking callback
    latest = present.run_metadata.checkpoint_manager.latest_checkpoint_result
    assert latest is not None and latest.checkpoint.path == str(kept)
    assert missing.run_metadata.checkpoint_manager.latest_checkpoint_result is None
    client = MlflowClient(store)
    runs = runs_by_role(client, "gone", "trial")
    tags = {r.data.tags["astune.trial_id"]: r.data.tags for r in runs}
    assert tags["t_gone"]["astune.restarted_from_start"] == "true"
    assert "astune.restarted_from_start" not in tags["t_kept"]


def test_a_checkpoint_recovery_failure_is_reported_as_one_not_as_tracking(caplog, tmp_path):
    trial = fake_trial("t_odd", POINTS[0], checkpoint=tmp_path)
    trial.run_metadata = SimpleNamespace()  # no checkpoint manager: what Ray's API lost
    recovery = CheckpointRecovery()
    with caplog.at_level("WARNING", logger="astune.tuning.callbacks"):
        recovery.on_trial_recover(iteration=0, trials=[trial], trial=trial)
    assert "checkpoint recovery of trial t_odd failed (AttributeError" in caplog.text
    assert "MLflow" not in caplog.text
    assert not recovery.restarted_from_start("t_odd")


def test_resume_with_explicit_parent_and_a_wrong_one(store):
    tracker = make_tracker(store, "resume-explicit")
    parent_id = tracker.start()
    tracker.finish("KILLED")
    again = make_tracker(store, "resume-explicit")
    assert again.start(resume=True, parent_run_id=parent_id) == parent_id
    assert again.client.get_run(parent_id).info.status == "RUNNING"
    again.finish("FINISHED")
    with pytest.raises(TrackingError, match="deadbeef"):
        make_tracker(store, "resume-explicit").start(resume=True, parent_run_id="deadbeef")


@pytest.mark.ray
def test_tuner_restore_reuses_the_pickled_callback(ray_local, store, tmp_path):
    """Tuner.restore unpickles the RunConfig (callbacks included) saved by the first Tuner."""
    tracker = make_tracker(store, "restore")
    parent_id = tracker.start()
    marker = tmp_path / "fixed"
    trainable = tune.with_parameters(tiny_trainable, fail_marker=str(marker))
    space = {"loss": "as_softmax", "lr": 2e-5, "delta": 0.3, "fail_at": tune.grid_search([None, 1])}
    original = MLflowTrialCallback(tracker)
    run_tuner(tmp_path, original, trainable, param_space=space)
    tracker.finish("FAILED")
    client = MlflowClient(store)
    statuses = sorted(c.info.status for c in runs_by_role(client, "restore", "trial"))
    assert statuses == ["FAILED", "FINISHED"]

    marker.touch()
    resumed = make_tracker(store, "restore")
    assert resumed.start(resume=True) == parent_id
    # resume_errored keeps the trial id (restart_errored would make a new trial, so a new run)
    restored = tune.Tuner.restore(str(tmp_path / "ray" / "search"), trainable, resume_errored=True)
    callback = attach_tracker(restored, resumed)  # the unpickled copy of `original`
    assert isinstance(callback, MLflowTrialCallback) and callback is not original
    assert callback.tracker is resumed
    restored.fit()
    resumed.finish("FINISHED")

    children = runs_by_role(client, "restore", "trial")
    assert len(children) == 2
    assert [c.info.status for c in children] == ["FINISHED", "FINISHED"]
    assert all("astune.error" not in c.data.tags for c in children)
    retried = next(c for c in children if c.data.params["fail_at"] == "1")
    assert steps(client, retried.info.run_id, "objective") == [0, 1, 2]  # resumed after step 0
    assert client.get_run(parent_id).info.status == "FINISHED"


def trainable_with_best_weights(config: dict) -> None:
    """:func:`tiny_trainable`, with a ``best/`` folder in the trial folder as astune's trainable
    writes one (best weights that are not the current ones)."""
    from astune._private import trial_storage

    filesystem, folder = trial_storage()
    filesystem.create_dir(f"{folder}/best")
    with filesystem.open_output_stream(f"{folder}/best/model.pt") as out:
        out.write(b"weights")
    tiny_trainable(config)


@pytest.mark.ray
def test_a_finished_trial_leaves_no_checkpoint_on_the_storage_path_a_failed_one_keeps_them(
    ray_local, tmp_path
):
    from astune.tuning.callbacks import DropFinishedCheckpoints

    space = {"delta": 0.3, "fail_at": tune.grid_search([None, 2])}
    tuner = tune.Tuner(
        trainable_with_best_weights,
        param_space=space,
        tune_config=tune.TuneConfig(max_concurrent_trials=2),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path / "ray"),
            name="search",
            callbacks=[DropFinishedCheckpoints()],
            checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
            verbose=0,
        ),
    )
    results = tuner.fit()
    left = {}
    for result in results:
        folder = Path(result.path)
        kept = [p.name for p in folder.iterdir() if p.name.startswith("checkpoint_")]
        left[result.config["fail_at"]] = (sorted(kept), (folder / "best").exists())
        assert (folder / "result.json").is_file()  # the trial's record stays
    # the finished trial's 3 checkpoints and best weights went; the failed one (an evaluation
    # short) keeps the 2 that Ray's num_to_keep leaves and its best weights, for a resume
    assert left[None] == ([], False)
    assert left[2] == (["checkpoint_000000", "checkpoint_000001"], True)


# ------------------------------------------------------------------------------ URIs
def test_check_fails_fast_for_an_unreachable_server():
    uri = f"http://127.0.0.1:{free_port()}"
    start = time.monotonic()
    with pytest.raises(TrackingError, match=f"{uri} is unreachable"):
        check_tracking_uri(uri)
    assert time.monotonic() - start < 10


def test_check_times_out_on_a_silent_server():
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        start = time.monotonic()
        with pytest.raises(TrackingError, match="timeout 1 s"):
            check_tracking_uri(uri, timeout=1.0)
        assert time.monotonic() - start < 5


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        ok = self.path.startswith("/api/2.0/mlflow/experiments/search")
        self.send_response(200 if ok else 404)
        self.end_headers()
        self.wfile.write(b'{"experiments": []}' if ok else b"")

    def log_message(self, *args):
        pass


def test_check_passes_for_a_server_that_answers():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        check_tracking_uri(f"http://127.0.0.1:{server.server_port}/")
        with pytest.raises(TrackingError, match="not an MLflow tracking server"):
            check_tracking_uri(f"http://127.0.0.1:{server.server_port}/prefix")
    finally:
        server.shutdown()
        server.server_close()


def test_local_uris_become_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert default_tracking_uri() == f"sqlite:///{tmp_path}/astune-runs/mlflow.db"
    assert (tmp_path / "astune-runs").is_dir()
    assert resolve_tracking_uri(None) == default_tracking_uri()
    assert resolve_tracking_uri("sqlite:///runs/m.db") == f"sqlite:///{tmp_path}/runs/m.db"
    assert resolve_tracking_uri(f"sqlite:///{tmp_path}/x.db") == f"sqlite:///{tmp_path}/x.db"
    assert resolve_tracking_uri("runs/m.db") == f"sqlite:///{tmp_path}/runs/m.db"
    assert resolve_tracking_uri("mlruns") == f"file://{tmp_path}/mlruns"
    assert resolve_tracking_uri("file:./mlruns") == f"file://{tmp_path}/mlruns"
    assert resolve_tracking_uri("https://mlflow.example.org/") == "https://mlflow.example.org"
    with pytest.raises(TrackingError, match="sqlite://"):
        resolve_tracking_uri("sqlite://")
    check_tracking_uri("sqlite:///new/dir/m.db")  # creates the folder
    assert (tmp_path / "new" / "dir").is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(TrackingError, match="cannot create"):
        check_tracking_uri(f"sqlite:///{blocker}/m.db")
    expected = f"mlflow ui --backend-store-uri sqlite:///{tmp_path}/m.db"
    assert mlflow_ui_command("sqlite:///m.db") == expected
    assert mlflow_ui_command("http://h:5000") == "python -m webbrowser http://h:5000"


# ------------------------------------------------------------------------------ artifacts
def test_search_artifacts_on_the_parent_run(store, tmp_path):
    tracker = make_tracker(store, "artifacts")
    parent_id = tracker.start()
    trials = pd.DataFrame(
        {
            "trial_id": ["a", "b", "c", "d", "e"],
            "objective": [0.61, 0.64, 0.58, 0.60, float("nan")],  # e failed before reporting
            "config/loss": ["as_softmax", "as_softmax", "as_softmax", "softmax", "as_softmax"],
            "config/delta": [0.1, 0.3, 0.5, float("nan"), 0.2],
            "config/lr": [2e-5] * 5,
        }
    )
    best = {
        "loss": "as_softmax",
        "lr": 2e-5,
        "delta": 0.3,
        "warmup_ratio": 0.0,
        "as_speed": False,
        "batch_size": 32,
    }
    base = {"backbone": "minilm", "epochs": 1.0, "search_only": 1}  # search_only: not a field
    logged = log_search_artifacts(tracker, best_config=best, trials_df=trials, base_config=base)
    tracker.finish("FINISHED")

    assert logged["plot"]["points"] == {"as_softmax": [(0.1, 0.61), (0.3, 0.64), (0.5, 0.58)]}
    assert logged["plot"]["lines"] == {"softmax": 0.60}
    client = MlflowClient(store)
    files = {f.path: f.file_size for f in client.list_artifacts(parent_id)}
    assert set(files) == {"best_config.yaml", "trials.csv", "objective_vs_delta.png"}
    assert files["objective_vs_delta.png"] > 5000
    folder = Path(client.download_artifacts(parent_id, "", str(tmp_path)))
    assert (folder / "objective_vs_delta.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    config = TrainConfig.from_yaml(folder / "best_config.yaml")
    assert (config.dataset, config.loss, config.delta, config.backbone, config.batch_size) == (
        "sst5",
        "as_softmax",
        0.3,
        "minilm",
        32,
    )
    assert len(pd.read_csv(folder / "trials.csv")) == 5
    parent = client.get_run(parent_id)
    assert parent.data.metrics["best_objective"] == pytest.approx(0.64)
    assert parent.data.tags["astune.best.delta"] == "0.3"
    db_folder = Path(store[len("sqlite:///") :]).parent  # artifacts sit next to the database
    assert parent.info.artifact_uri.startswith((db_folder / "artifacts" / "artifacts").as_uri())


def test_best_config_of_a_baseline_loss_runs_with_its_parameter():
    mapping = best_config_mapping({"loss": "t_softmax", "tau": 2.0, "lr": 3e-5}, dataset="sst5")
    config = TrainConfig.from_dict(mapping)
    assert (config.loss, config.loss_params) == ("t_softmax", {"tau": 2.0})


def test_a_tracking_failure_is_logged_not_raised(store, caplog):
    tracker = make_tracker(store, "flaky")
    tracker.start()
    callback = MLflowTrialCallback(tracker)
    trial = fake_trial("t_x", POINTS[1])
    callback.on_trial_start(iteration=0, trials=[trial], trial=trial)
    callback.on_trial_result(0, [trial], trial, {"val_f1(macro)": 0.5, "evaluation": 0})
    log_batch = tracker.client.log_batch
    tracker.client.log_batch = lambda *a, **k: (_ for _ in ()).throw(OSError("store went away"))
    with caplog.at_level("WARNING", logger="astune.store.outbox"):
        callback.on_trial_result(0, [trial], trial, {"objective": 0.5, "evaluation": 1})
    assert "a result of trial t_x failed (OSError: store went away)" in caplog.text
    assert tracker.outbox.behind == 0  # a refused write is dropped, not held
    tracker.client.log_batch = log_batch
    callback.on_trial_complete(iteration=0, trials=[trial], trial=trial)
    tracker.finish("FINISHED")
    (run,) = tracker.trial_runs()
    assert run.info.status == "FINISHED"
    assert run.data.metrics == {"val_f1_macro_": 0.5}  # renamed: MLflow refuses "(" in names


def test_resume_forgets_runs_of_trials_the_restored_experiment_lost(store):
    tracker = make_tracker(store, "lost")
    tracker.start()
    kept = tracker.open_trial_run("t-kept", {"loss": "softmax"})
    reported = tracker.open_trial_run("t-reported", {"loss": "softmax"})
    empty = tracker.open_trial_run("t-empty", {"loss": "softmax"})
    tracker.log_result(reported, {"objective": 0.4, "evaluation": 0})

    handled = forget_lost_trials(tracker, {"t-kept"})

    client = MlflowClient(store)
    assert sorted(handled) == sorted([reported, empty])
    assert client.get_run(empty).info.lifecycle_stage == "deleted"
    lost = client.get_run(reported)
    assert lost.info.status == "KILLED" and lost.data.tags["astune.lost"] == "true"
    assert client.get_run(kept).info.status == "RUNNING"
    tracker.finish("FINISHED")
    assert [r.info.run_id for r in runs_by_role(client, "lost", "trial")] in (
        [kept, reported],
        [reported, kept],
    )


def test_resume_finishes_runs_of_trials_the_restored_experiment_completed(store):
    """The driver died after a trial's last report, before its run was closed: Ray will not
    run it again, so its run ends FINISHED; a trial still to continue keeps its run open."""
    tracker = make_tracker(store, "completed")
    tracker.start()
    done = tracker.open_trial_run("t-done", {"loss": "softmax"})
    going = tracker.open_trial_run("t-going", {"loss": "softmax"})
    tracker.log_result(done, {"objective": 0.4, "evaluation": 0})

    assert finish_completed_trials(tracker, {"t-done"}) == [done]

    client = MlflowClient(store)
    assert client.get_run(done).info.status == "FINISHED"
    assert client.get_run(going).info.status == "RUNNING"
    assert finish_completed_trials(tracker, {"t-done"}) == []  # closed runs are left alone
    tracker.finish("FINISHED")
    assert client.get_run(going).info.status == "KILLED"


class _Payload:
    """Unpickling this runs code: what a writer of the storage path could plant."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (Path(self.marker).write_text, ("unpickled",))


def test_trial_error_is_read_from_text_never_unpickled(tmp_path):
    from astune.tuning.lifecycle.trial_errors import trial_error_message

    marker = tmp_path / "marker"
    (tmp_path / "error.pkl").write_bytes(pickle.dumps(_Payload(str(marker))))
    (tmp_path / "error.txt").write_text(
        "Failure # 1\nTraceback (most recent call last):\n  File x\n"
        "FloatingPointError: loss is inf at epoch 0\nsecond line\n"
    )
    trial = SimpleNamespace(
        error_file=str(tmp_path / "error.txt"), pickled_error_file=str(tmp_path / "error.pkl")
    )
    assert trial_error_message(trial) == "FloatingPointError: loss is inf at epoch 0"
    assert not marker.exists()


@pytest.mark.slow
def test_two_processes_creating_one_fresh_store_both_succeed(tmp_path):
    import multiprocessing

    uri = resolve_tracking_uri(f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}")
    (tmp_path / "fresh").mkdir()
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    # every process reaches the fresh store at the same moment
    processes = [context.Process(target=open_store_together, args=(uri, barrier)) for _ in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=300)
    assert [p.exitcode for p in processes] == [0, 0]
    assert MlflowClient(uri).get_experiment_by_name("Default") is not None
