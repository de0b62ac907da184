"""A search whose MLflow tracking server goes away, with real processes: a real ``mlflow
server`` (SQLite backend) killed while trials train and started again on the same port and
store once the driver has said it is unreachable and the trials have reported more (any outage
longer than a call's few seconds of retries takes this path), then killed for good before the
search ends; the search finishes its trials, says that tracking is behind, and ``--resume``
writes what is missing once the server is back.

Every process is ended by its PID (its process group) when the test ends, passed or failed.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil
import pytest
import yaml
from cluster_processes import Processes, await_mlflow, start_mlflow, wait_for
from mlflow import MlflowClient
from ports import free_port
from stores import count_rows
from tiny import fifo_space, tiny_flags

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TRIALS, EVALUATIONS = 4, 3
SPACE = fifo_space(trials=TRIALS, epochs=EVALUATIONS)
EVALUATION_LINE = re.compile(r"^\[\w+\] .* eval \d+: objective ", re.MULTILINE)


def reported(log: Path) -> int:
    """Evaluations the trials reported to the driver so far: the console's lines of them (Ray
    writes its ``result.json`` to the storage path at its own pace)."""
    return len(EVALUATION_LINE.findall(log.read_text(errors="replace"))) if log.exists() else 0


def logged(db: Path) -> int:
    """Points of ``objective`` the MLflow store holds (read from the file: the server may be
    down)."""
    return count_rows(db, "SELECT count(*) FROM metrics WHERE key = 'objective' AND step >= 0")


def trial_processes(driver: int) -> list[psutil.Process]:
    """The Ray workers running a trial of the search whose driver is ``driver`` (its
    descendants: the driver started that Ray)."""
    found = []
    for proc in psutil.Process(driver).children(recursive=True):
        try:
            if "ImplicitFunc" in proc.name() + " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            continue
    assert found, "no trial process under the driver"
    return found


@contextmanager
def paused(processes: list[psutil.Process]) -> Iterator[None]:
    for proc in processes:
        proc.suspend()
    try:
        yield
    finally:
        for proc in processes:
            with suppress(psutil.Error):
                proc.resume()


def test_a_search_outlives_its_tracking_server_and_resume_writes_what_it_missed(tmp_path, data_dir):
    env = dict(os.environ, ASTUNE_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1")
    procs = Processes(tmp_path, env)
    port = free_port()
    uri, db, storage = f"http://127.0.0.1:{port}", tmp_path / "mlflow.db", tmp_path / "ray"
    log = tmp_path / "search.log"  # the driver's output
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(SPACE))
    search = [sys.executable, "-m", "astune", "search", "--dataset", "sst5", "--space", str(space)]
    search += tiny_flags() + ["--max-concurrent", "1", "--name", "outage"]
    search += ["--tracking-uri", uri, "--storage-path", str(storage)]
    try:
        start_mlflow(procs, port)  # its store is tmp_path/mlflow.db
        await_mlflow(uri)
        driver = procs.start("search", search)
        wait_for(lambda: logged(db) >= 1, "a first evaluation logged", timeout=240)

        procs.end_group(procs.named["mlflow"])  # an upgrade, a crash: gone mid-search
        before = reported(log)
        wait_for(lambda: "server unreachable" in log.read_text(), "the driver noticing", 120)
        wait_for(lambda: reported(log) > before, "an evaluation while the server is away", 120)
        assert logged(db) < reported(log)  # the trials go on, their results held
        # MLflow's server takes 20 s or more to start here: the trials pause (SIGSTOP) from now
        # until it is gone again, so that a short search outlasts the outage and still has
        # evaluations to make once the server is gone for good
        with paused(trial_processes(driver.pid)):
            start_mlflow(procs, port)  # the same port and store
            await_mlflow(uri)
            # the held evaluations reach the store once it answers again, the search running
            held = reported(log)
            back = lambda: "tracking server back after" in log.read_text()  # noqa: E731
            wait_for(lambda: back() and logged(db) >= held, "the held evaluations written", 120)
            assert driver.poll() is None, procs.tail("search")
            assert held < TRIALS * EVALUATIONS
            procs.end_group(procs.named["mlflow"])  # gone for good: the search ends without it
        code = driver.wait(timeout=400)
        out = log.read_text()
        assert code == 75, out[-3000:]
        last = out.strip().splitlines()[-1]
        assert last.startswith("astune search: search 'outage': its trials ended, but "), last
        assert last.endswith("--resume to write them") and "Traceback" not in out
        resume = shlex.split(last.split("answers, run ", 1)[1].removesuffix(" to write them"))
        assert resume[resume.index("--name") + 1] == "outage" and "--tracking-uri" in resume
        assert logged(db) < reported(log) == TRIALS * EVALUATIONS

        start_mlflow(procs, port)
        await_mlflow(uri)
        resumed = procs.start("resume", [*search, "--resume"])
        assert resumed.wait(timeout=400) == 0, procs.tail("resume", 40)
        assert "tracking caught up from Ray's records" in (tmp_path / "resume.log").read_text()
        assert_complete(MlflowClient(uri))
    finally:
        procs.end_all()


def assert_complete(client: MlflowClient) -> None:
    """One parent FINISHED, one FINISHED run per trial, each with one objective point per
    evaluation and its final metrics: nothing missing, nothing twice."""
    experiment = client.get_experiment_by_name("outage")
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    parents = [r for r in runs if r.data.tags["astune.role"] == "search"]
    trials = [r for r in runs if r.data.tags["astune.role"] == "trial"]
    assert [p.info.status for p in parents] == ["FINISHED"]
    assert len(trials) == TRIALS == len({t.data.tags["astune.trial_id"] for t in trials})
    for run in trials:
        assert run.info.status == "FINISHED", run.info.run_name
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "objective")]
        assert sorted(steps) == list(range(EVALUATIONS)), (run.info.run_name, steps)
        assert "best_objective" in run.data.metrics and "test_accuracy" in run.data.metrics
        assert "astune.stopped_early" not in run.data.tags
    assert "best_config.yaml" in {a.path for a in client.list_artifacts(parents[0].info.run_id)}
