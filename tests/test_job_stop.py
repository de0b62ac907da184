"""A search stopped the way Slurm stops a job (``scancel``, a time limit) and a cgroup-wide stop
does: SIGTERM to every process of the job at once, its Ray's included (a real driver process,
its own Ray). The GCS and the raylet hold SIGTERM off, so the driver stops its trials through
Tune as when it alone is signalled: exit 143 within 30 s, the runs KILLED, and the resume loses
and repeats no trial. (SIGTERM and Ctrl-C to the driver's process group: test_search's signal
test; the driver whose Ray dies outright: test_ray_watch.)"""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys

import pytest
from mlflow import MlflowClient
from ray.tune import ExperimentAnalysis
from search_processes import (
    assert_stopped,
    count_finished,
    runs,
    search_command,
    stop_command,
    write_space,
)
from stores import count_rows

from astune.store.conventions import LOST_TAG

pytestmark = [pytest.mark.ray, pytest.mark.slow]

RAY_GONE = "Ray's processes ended with it"
# What Ray and MLflow print unless --verbose (issue 60): Ray's notice that a local Ray enabled
# token authentication, Tune's experiment box, results path and TensorBoard hint, MLflow's INFO.
LIBRARY_NOTICES = (
    "token authentication is enabled",
    "configuration for experiment",
    "view detailed results",
    "tensorboard",
    " info mlflow",
    "╭",
)


def library_notices(output: str) -> list[str]:
    return [line for line in output.lower().splitlines() if any(n in line for n in LIBRARY_NOTICES)]


def evaluations(db) -> int:
    """Every evaluation MLflow holds (the objective's points of all trial runs)."""
    return count_rows(db, "SELECT count(*) FROM metrics WHERE key = 'objective'")


def test_a_search_stopped_with_every_process_of_its_job_exits_143_and_resumes_whole(workdir):
    space = write_space(
        workdir,
        seed_points=[],
        losses=["as_softmax"],
        params={"lr": {"type": "fixed", "value": 1.0e-3}, "batch_size": 16},
    )
    db = workdir / "astune-runs" / "mlflow.db"
    command = search_command("killed", space, "--checkpoint-every", "eval", samples=1)
    code, err, seconds = stop_command(
        command, [signal.SIGTERM], lambda: evaluations(db) >= 1, to="job"
    )
    assert_stopped(db, code, err, seconds, signal.SIGTERM)
    line = err.strip().splitlines()[-1]
    assert "0 trials finished" in line  # Tune's own graceful stop
    assert RAY_GONE not in err
    (trial,) = ExperimentAnalysis(str(workdir / "astune-runs" / "ray" / "killed")).trials
    # Under load the stop can land after the evaluation's MLflow row and before its checkpoint.
    how = "with a checkpoint resumes from it" if trial.checkpoint else "without one yet restarts"
    assert f"1 unfinished, KILLED in MLflow: 1 {how}" in line  # what Ray saved of it
    assert not library_notices(err)  # the driver started its own Ray: its notices stay off

    # the command the line gives, pasted: --checkpoint-every eval and the rest are the search's
    resume = [sys.executable, *shlex.split(line.split("resume it with: ")[1])[1:]]
    assert "--checkpoint-every" not in resume
    resumed = subprocess.run(resume, capture_output=True, text=True, timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "best objective: " in resumed.stdout and "review:  mlflow ui" in resumed.stdout
    assert not library_notices(resumed.stdout + resumed.stderr)  # astune's lines alone
    client = MlflowClient(f"sqlite:///{db}")
    (parent,) = runs(client, "killed", "search")
    trials = runs(client, "killed", "trial")
    assert parent.info.status == "FINISHED"
    assert len(trials) == 1 and count_finished(db) == 1  # the stopped trial, not run twice
    steps = [m.step for m in client.get_metric_history(trials[0].info.run_id, "objective")]
    assert steps == list(range(len(steps))) and len(steps) >= 2  # one point per evaluation
    assert trials[0].data.metrics["checkpoints"] >= 1  # each evaluation's, as it started
    assert not [t for t in trials if LOST_TAG in t.data.tags]  # none lost
