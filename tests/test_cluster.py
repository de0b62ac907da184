"""A search on a real two-node Ray cluster, with an MLflow tracking server over HTTP and trial
storage on a local S3-compatible server, under faults: a worker node's raylet SIGKILLed after
the first evaluation, then the driver SIGKILLed and the search resumed as a Ray job. It searches
a user's own loss (a plugin only the driver can import) beside AS-Softmax.

Everything runs as separate processes on this machine (README, "Clusters", gives the same
recipe by hand); every process is ended by its PID when the module ends, passed or failed.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cluster_processes import (
    BIN,
    S3_CREDENTIALS,
    Processes,
    await_mlflow,
    await_s3,
    raylet_of,
    s3_keys,
    start_head,
    start_mlflow,
    start_s3,
    start_worker,
    wait_for,
)
from mlflow import MlflowClient
from ports import free_port
from tiny import fifo_space, tiny_flags

from astune.cli import main

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

BUCKET = "astune-test"
EVALUATIONS = 4  # one per epoch: a kill after the first leaves three to resume (four: the
# window in which both trials run is wide enough on a busy machine, where a trial's first
# worker on a node starts cold with the plugins' runtime environment)
TRIALS = 2  # one per node: the worker's is retried on the head, then resumed
SPACE = fifo_space(trials=4, epochs=EVALUATIONS)
PLUGIN = Path(__file__).parent / "plugins" / "focal_losses.py"
SHIPPED = "focal_shipped"  # the plugin's module name where only the driver can import it


class Cluster:
    def __init__(self, procs: Processes, port: int, dashboard: int, tracking: str, s3: str):
        self.procs, self.port, self.dashboard = procs, port, dashboard
        self.tracking_uri, self.s3_endpoint = tracking, s3
        self.client = MlflowClient(tracking)

    def search_argv(self, name: str, space: Path, *extra: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "astune",
            "search",
            "--dataset",
            "sst5",
            "--space",
            str(space),
            *tiny_flags(max_train_samples=192),
            "--max-concurrent",
            "2",
            "--address",
            f"127.0.0.1:{self.port}",
            "--tracking-uri",
            self.tracking_uri,
            "--storage-path",
            f"s3://{BUCKET}/searches",
            "--checkpoint-every",
            "eval",
            "--name",
            name,
            *extra,
        ]

    def runs(self, name: str, role: str) -> list:
        experiment = self.client.get_experiment_by_name(name)
        if experiment is None:
            return []
        return self.client.search_runs(
            [experiment.experiment_id], f"tags.`astune.role` = '{role}'", max_results=100
        )

    def evaluated(self, name: str) -> list:
        """RUNNING trial runs with at least one evaluation logged."""
        return [
            r for r in self.runs(name, "trial") if r.info.status == "RUNNING" and r.data.metrics
        ]

    def checkpoint_keys(self, name: str, run) -> list[str]:
        """The keys of the checkpoints and best weights of ``run``'s trial in the bucket."""
        folder = f"searches/{name}/trial_{run.data.tags['astune.trial_id']}/"
        return [
            k for k in self.s3_keys(folder) if k[len(folder) :].startswith(("checkpoint_", "best/"))
        ]

    def s3_keys(self, prefix: str) -> list[str]:
        return s3_keys(self.s3_endpoint, BUCKET, prefix)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, data_dir):
    root = Path(tmp_path_factory.mktemp("cluster"))
    env = dict(
        os.environ,
        RAY_AUTH_MODE="token",  # Ray 2.60: every node and driver of a cluster shares the token
        RAY_AUTH_TOKEN=secrets.token_hex(32),
        ASTUNE_DATA_DIR=str(data_dir),
        HF_HUB_OFFLINE="1",
        **S3_CREDENTIALS,
        RAY_USAGE_STATS_ENABLED="0",
        # A dead node is declared after 3 failed health checks 1 s apart (Ray's defaults: 5,
        # 3 s apart); each check still waits up to 10 s for an answer on this busy machine.
        RAY_health_check_period_ms="1000",
        RAY_health_check_failure_threshold="3",
    )
    s3_port = free_port()
    env["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{s3_port}"  # read by pyarrow and boto3
    procs = Processes(root, env)
    with pytest.MonkeyPatch.context() as patch:
        for key, value in S3_CREDENTIALS.items():  # this test's boto3 client
            patch.setenv(key, value)
        try:
            # the servers start while `ray start` brings the head up
            s3, tracking = start_s3(procs, s3_port), start_mlflow(procs, free_port())
            port, dashboard = free_port(), free_port()
            start_head(procs, port, dashboard)
            await_s3(s3, BUCKET)
            await_mlflow(tracking)
            yield Cluster(procs, port, dashboard, tracking, s3)
        finally:
            procs.end_all()


@pytest.fixture
def worker(cluster):
    """A worker node joined for one test (its raylet may be killed by the test)."""
    group = start_worker(cluster.procs, cluster.port, f"ray-worker-{free_port()}")
    yield group
    cluster.procs.end_group(group)


def write_space(folder: Path, **changes) -> Path:
    path = folder / "space.yaml"
    path.write_text(yaml.safe_dump({**SPACE, **changes}))
    return path


def assert_complete(cluster: Cluster, name: str, trials: int) -> list:
    parents, children = cluster.runs(name, "search"), cluster.runs(name, "trial")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(children) == trials
    assert len({c.data.tags["astune.trial_id"] for c in children}) == trials
    assert [c.info.status for c in children] == ["FINISHED"] * trials
    for child in children:  # one point per evaluation: no gap, no repeat
        history = cluster.client.get_metric_history(child.info.run_id, "objective")
        assert sorted(m.step for m in history) == list(range(EVALUATIONS)), child.info.run_name
    return children


def test_a_worker_node_lost_then_the_driver_killed_the_search_resumes_as_a_ray_job(
    cluster, worker, tmp_path, registry, monkeypatch
):
    """One search under both faults, one after the other: the raylet of the worker node
    SIGKILLed after the first evaluation (its trial retried on the head), then the driver
    SIGKILLed with a trial finished and one unfinished, and the search resumed by a Ray job
    (`ray job submit`: its driver runs on the head node and joins the cluster, --address auto)."""
    name = "faults"
    # A user's loss beside AS-Softmax, from a module on the driver's PYTHONPATH only: a trial
    # on either node imports it from the copy Ray's runtime environment shipped there.
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    shutil.copy(PLUGIN, plugins / f"{SHIPPED}.py")
    space = write_space(
        tmp_path,
        num_samples=TRIALS,
        losses=["focal", "as_softmax"],
        loss_params={"focal": {"gamma": {"type": "float", "low": 0.5, "high": 3.0}}},
        seed_points=[{"loss": "focal", "gamma": 2.0}, {"loss": "as_softmax", "delta": 0.3}],
    )
    search = cluster.search_argv(name, space, "--plugin", SHIPPED)
    driver = cluster.procs.start(name, search, env={"PYTHONPATH": str(plugins)})
    # both slots busy, each trial evaluated once: one of them runs on the worker node
    wait_for(lambda: len(cluster.evaluated(name)) == 2, "two trials evaluated", timeout=180)
    raylet_of(cluster.procs, worker).kill()  # SIGKILL
    retried = wait_for(lambda: retried_runs(cluster, name), "a trial retried", timeout=180)
    assert len(retried) == 1 and retried[0].data.tags["astune.retries"] == "1"
    assert retried[0].data.tags["astune.retry_error"]  # the failure Ray reported, one line

    finished = lambda: [r for r in cluster.runs(name, "trial") if r.info.status == "FINISHED"]  # noqa: E731
    wait_for(lambda: finished() and cluster.evaluated(name), "a finished and a running trial", 240)
    assert driver.poll() is None, cluster.procs.tail(name)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    # the unfinished trial's checkpoints are in the bucket for its resume; the finished one's
    # were deleted when it ended
    (done,), (running,) = finished(), cluster.evaluated(name)
    assert not cluster.checkpoint_keys(name, done) and cluster.checkpoint_keys(name, running)
    resume = cluster.search_argv(name, space, "--plugin", SHIPPED, "--resume", "--address", "auto")
    submit = [str(BIN / "ray"), "job", "submit", "--address"]
    submit += [f"http://127.0.0.1:{cluster.dashboard}"]
    submit += ["--runtime-env-json", json.dumps({"env_vars": {"PYTHONPATH": str(plugins)}})]
    submit += ["--", *resume]
    resumed = subprocess.run(
        submit, env=cluster.procs.env, capture_output=True, text=True, timeout=400
    )
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]
    assert "succeeded" in resumed.stdout and "best objective" in resumed.stdout
    children = assert_complete(cluster, name, trials=TRIALS)  # no run twice, none lost

    keys = cluster.s3_keys(f"searches/{name}/")
    for child in children:  # every trial's record stays; no finished trial keeps a checkpoint
        folder = f"searches/{name}/trial_{child.data.tags['astune.trial_id']}/"
        assert any(k.startswith(folder) and k.endswith("result.json") for k in keys), folder
        assert not cluster.checkpoint_keys(name, child), folder

    exported = tmp_path / "best.yaml"  # in this process: a second interpreter costs 10 CPU-s
    monkeypatch.syspath_prepend(str(plugins))  # the config names the plugin: export imports it
    argv = ["export", "--experiment", name, "--tracking-uri", cluster.tracking_uri]
    assert main([*argv, "-o", str(exported)]) == 0
    config = yaml.safe_load(exported.read_text())
    config = config.get("config", config)
    assert config["dataset"] == "sst5" and config["num_layers"] == 1
    assert config["loss"] in ("focal", "as_softmax") and config["plugins"] == [SHIPPED]
    assert sorted(c.data.params["loss"] for c in children) == ["as_softmax", "focal"]


def retried_runs(cluster: Cluster, name: str) -> list:
    return [r for r in cluster.runs(name, "trial") if "astune.retries" in r.data.tags]
