"""Every private third-party API of ``astune/_private.py`` exists in the installed versions.

An upgrade of Ray, Optuna or torch that renames one of them fails here, by name, instead of deep
inside a search.
"""

from pathlib import Path

import optuna
import pytest
import torch
from ray.tune.search.optuna import OptunaSearch

from astune import _private


def test_optuna_search_internals() -> None:
    searcher = OptunaSearch(
        space=lambda trial: {"x": trial.suggest_float("x", 0.0, 1.0)},
        metric="objective",
        mode="max",
        seed=0,
    )
    config = searcher.suggest("t1")
    assert 0.0 <= config["x"] <= 1.0
    assert isinstance(_private.optuna_study(searcher), optuna.Study)
    trials = _private.optuna_trials(searcher)
    assert list(trials) == ["t1"] and trials["t1"].params["x"] == config["x"]
    searcher.on_trial_complete("t1", {"objective": 0.5})
    assert _private.told_trials(searcher) == {"t1"}


def test_optuna_enqueued_trials() -> None:
    study = optuna.create_study()
    study.enqueue_trial({"x": 0.5})
    enqueued, sampled = study.ask(), study.ask()
    frozen = {t.number: t for t in study.get_trials(deepcopy=False)}
    assert _private.optuna_enqueued(frozen[enqueued.number])
    assert not _private.optuna_enqueued(frozen[sampled.number])


def test_tuner_local_run_config(tmp_path) -> None:
    from ray import tune

    def trainable(config):  # never run: a Tuner is only built
        return None

    tuner = tune.Tuner(trainable, run_config=tune.RunConfig(name="x", storage_path=str(tmp_path)))
    run_config = _private.restored_run_config(tuner)
    assert run_config is not None and run_config.name == "x"


def test_tuner_local_scheduler(tmp_path) -> None:
    from ray import tune
    from ray.tune.schedulers import FIFOScheduler

    def trainable(config):  # never run: a Tuner is only built
        return None

    scheduler = FIFOScheduler()
    tuner = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(scheduler=scheduler),
        run_config=tune.RunConfig(name="x", storage_path=str(tmp_path)),
    )
    assert _private.restored_scheduler(tuner) is scheduler


def test_a_saved_search_generator_restores_the_grown_total(tmp_path) -> None:
    """Ray's own SearchGenerator saves its state, astune raises its total, and a generator
    restored from the folder runs to the new total (what `--resume --num-samples` relies on)."""
    from pyarrow import fs
    from ray.tune.experiment import Experiment
    from ray.tune.search import SearchGenerator

    def generator() -> SearchGenerator:
        searcher = OptunaSearch(space={"x": optuna.distributions.FloatDistribution(0, 1)})
        searcher.set_search_properties("objective", "max", {})
        made = SearchGenerator(searcher)
        made.add_configurations([Experiment("x", lambda config: None, num_samples=2)])
        return made

    generator().save_to_dir(str(tmp_path), "2026-12-03_10-00-00")
    assert _private.grow_saved_samples(fs.LocalFileSystem(), str(tmp_path), 5) == 2
    restored = generator()
    restored.restore_from_dir(str(tmp_path))
    assert restored.total_samples == 5
    assert _private.grow_saved_samples(fs.LocalFileSystem(), str(tmp_path), 3) == 5  # no lower
    with pytest.raises(_private.PrivateAPIError, match="no search_gen_state-"):
        _private.grow_saved_samples(fs.LocalFileSystem(), str(tmp_path / "nothing"), 3)


@pytest.mark.ray
def test_trial_storage_is_the_trial_folder_on_the_storage_path(tmp_path) -> None:
    """Seen from the trial (``trial_storage``) and from the driver (``trial_folder``)."""
    import ray
    from ray import tune

    def trainable(config):
        filesystem, path = _private.trial_storage()
        tune.report({"path": path, "fs": filesystem.type_name})

    class Driver(tune.Callback):
        seen: list[tuple[str, str]] = []

        def on_trial_complete(self, iteration, trials, trial, **info):
            filesystem, path = _private.trial_folder(trial)
            self.seen.append((filesystem.type_name, path))

    ray.init(num_cpus=1, include_dashboard=False, configure_logging=False)
    try:
        tuner = tune.Tuner(
            trainable,
            run_config=tune.RunConfig(
                name="x", storage_path=str(tmp_path), verbose=0, callbacks=[Driver()]
            ),
        )
        results = tuner.fit()
    finally:
        ray.shutdown()
    (result,) = results
    assert _private.trial_statuses(results) == ["TERMINATED"]
    assert result.error is None
    assert result.metrics["fs"] == "local"
    assert result.metrics["path"] == result.path == str(tmp_path / "x" / Path(result.path).name)
    assert Driver.seen == [("local", result.path)]


def test_torch_keep_graph_flag() -> None:
    seen: list[bool] = []

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            seen.append(_private.autograd_graph_is_kept())
            return grad * 2

    x = torch.ones(2, requires_grad=True)
    Probe.apply(x).sum().backward(retain_graph=True)
    Probe.apply(x).sum().backward()
    assert seen == [True, False]


def test_torch_dispatch_helpers() -> None:
    assert _private.parse_to("cpu", non_blocking=True)[::2] == (torch.device("cpu"), True)
    assert _private.parse_to(torch.float64)[:2] == (None, torch.float64)
    assert _private.tree_leaves(([1, {"a": 2}], (3,))) == [1, 2, 3]
    seen = []

    class Mode(_private.torch_dispatch_mode()):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    with Mode():
        torch.ones(2).sum()
    assert torch.ops.aten.sum.default in seen


def test_transformers_bar_flag() -> None:
    from huggingface_hub.utils import are_progress_bars_disabled
    from transformers.utils import logging as hf_logging

    before = hf_logging.is_progress_bar_enabled()
    hub_before = are_progress_bars_disabled()
    with _private.transformers_bars_off():
        assert not hf_logging.is_progress_bar_enabled()
        assert are_progress_bars_disabled() == hub_before  # download bars untouched
    assert hf_logging.is_progress_bar_enabled() == before


def test_ray_token_notice_filter(caplog) -> None:
    """Ray's notice that token authentication is enabled comes from the logger of its private
    ``authentication_token_setup`` with the text the filter drops; the block drops it and keeps
    the warning that authentication is disabled."""
    import logging

    from ray._private.authentication import authentication_token_setup as setup

    assert setup.logger.name == _private.RAY_TOKEN_SETUP_LOGGER
    with caplog.at_level(logging.WARNING, logger=_private.RAY_TOKEN_SETUP_LOGGER):
        setup._warn_token_auth_enabled()
        assert caplog.records[-1].getMessage().startswith(_private.RAY_TOKEN_NOTICE)
        caplog.clear()
        with _private.ray_token_notice_off():
            setup._warn_token_auth_enabled()
            setup._warn_token_auth_disabled()
        assert [r.getMessage()[:40] for r in caplog.records] == [
            "Token authentication is disabled for thi"
        ]
        caplog.clear()
        setup._warn_token_auth_enabled()  # the filter is gone after the block
        assert len(caplog.records) == 1


def test_missing_private_api_names_the_attribute() -> None:
    with pytest.raises(_private.PrivateAPIError, match="'_ot_study'"):
        _private.optuna_study(object())


def test_s3_filesystem_options() -> None:
    from pyarrow import fs

    made = fs.S3FileSystem(endpoint_override="http://127.0.0.1:9", scheme="http", region="x")
    options = _private.s3_options(made)
    assert options["endpoint_override"] == "http://127.0.0.1:9" and options["region"] == "x"
    again = fs.S3FileSystem(**{**options, "background_writes": False})
    assert _private.s3_options(again)["background_writes"] is False


LOCAL_RAY = """
import json, os, signal
import ray
from astune import _private
from astune.tuning.execution import init_ray
from astune.tuning.settings import SearchSettings

init_ray(SearchSettings(dataset="sst5"))
head = _private.local_ray_processes(head_only=True)
every = _private.local_ray_processes()


def blocked(pid):
    with open(f"/proc/{pid}/status") as status:
        mask = next(int(line.split()[1], 16) for line in status if line.startswith("SigBlk"))
    return bool(mask & (1 << (signal.SIGTERM - 1)))


print(json.dumps({
    "driver_group": os.getpgid(0),
    "head": [[os.path.basename(p.args[0]), os.getpgid(p.pid), blocked(p.pid)] for p in head],
    "groups": sorted({os.getpgid(p.pid) == p.pid for p in every if p.poll() is None}),
}))
ray.shutdown()
"""


@pytest.mark.ray
def test_a_local_rays_processes_lead_their_own_groups_and_its_head_holds_sigterm_off() -> None:
    """``ray_processes_apart_from_job_signals`` (Ray's private ``ConsolePopen`` swapped during
    ``ray.init``) and ``local_ray_processes`` (its ``_global_node.all_processes``), read from
    /proc in a real driver process: a signal to the driver's group or job stops the driver alone."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", LOCAL_RAY], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    names = sorted(name for name, _, _ in seen["head"])
    assert names == ["gcs_server", "raylet"]
    assert all(group != seen["driver_group"] for _, group, _ in seen["head"])
    assert all(sigterm_blocked for _, _, sigterm_blocked in seen["head"])
    assert seen["groups"] == [True]  # every live process Ray started leads its own group


def test_ray_internal_kv_names() -> None:
    """The KV calls trial progress travels by (tuning/progress.py); outside Ray, nothing."""
    from ray.experimental import internal_kv

    for name in ("_internal_kv_put", "_internal_kv_get", "_internal_kv_initialized"):
        assert callable(getattr(internal_kv, name)), name
    assert _private.kv_get("progress/none") is None  # no Ray joined in this process


def test_mlflow_latest_metric_steps(tmp_path) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = client.create_run(client.create_experiment("steps")).info.run_id
    for step in (0, 2, 1):  # logged out of order: the latest is the highest step's
        client.log_metric(run_id, "objective", 0.1 * step, step=step)
    (run,) = client.search_runs([client.get_run(run_id).info.experiment_id])
    assert _private.latest_step(run, "objective") == 2
    assert _private.latest_step(run, "absent") is None
