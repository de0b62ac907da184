"""A search stopped the way batch schedulers stop a job (a real driver process, its own Ray):
SIGTERM to its process group (``kill -TERM -- -PGID``, GNU ``timeout``), then, resumed, SIGTERM
to every process of the job at once, Ray's included (Slurm's ``scancel``, a cgroup-wide kill).
Each stop is graceful, and the last resume loses and repeats no trial."""

from __future__ import annotations

import signal
import subprocess

import pytest
from mlflow import MlflowClient
from search_processes import (
    assert_stopped,
    count_finished,
    running_trials,
    runs,
    search_command,
    stop_command,
    write_space,
)
from stores import count_rows

from astune.store.conventions import LOST_TAG

pytestmark = [pytest.mark.ray, pytest.mark.slow]

RAY_GONE = "Ray's processes ended with it"


def evaluations(db) -> int:
    """Every evaluation MLflow holds (the objective's points of all trial runs)."""
    return count_rows(db, "SELECT count(*) FROM metrics WHERE key = 'objective'")


def test_a_search_stopped_as_schedulers_stop_jobs_exits_143_and_resumes_whole(workdir):
    space = write_space(
        workdir,
        seed_points=[],
        losses=["as_softmax"],
        params={"lr": {"type": "fixed", "value": 1.0e-3}, "batch_size": 16},
    )
    db = workdir / "astune-runs" / "mlflow.db"
    command = search_command("killed", space, "--checkpoint-every", "eval")

    # the driver's group: Ray's processes lead groups of their own, so the driver alone gets
    # it, stops its trials through Tune and shuts Ray down itself
    code, err, seconds = stop_command(
        command, [signal.SIGTERM], lambda: running_trials(db) >= 1, to="group"
    )
    assert_stopped(db, code, err, seconds, signal.SIGTERM)
    assert RAY_GONE not in err

    # every process of the job: the GCS and raylet die with the trials while the driver stops;
    # it ends the runs without Ray instead of waiting a minute on the dead GCS
    before = evaluations(db)
    resume = search_command("killed", space, "--checkpoint-every", "eval", "--resume")
    code, err, seconds = stop_command(
        resume, [signal.SIGTERM], lambda: evaluations(db) > before, to="job"
    )
    assert_stopped(db, code, err, seconds, signal.SIGTERM)
    assert RAY_GONE in err.strip().splitlines()[-1]

    resumed = subprocess.run(resume, capture_output=True, text=True, timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    client = MlflowClient(f"sqlite:///{db}")
    (parent,) = runs(client, "killed", "search")
    trials = runs(client, "killed", "trial")
    assert parent.info.status == "FINISHED"
    assert len(trials) == 3 and count_finished(db) == 3
    assert len({t.data.tags["astune.trial_id"] for t in trials}) == 3  # none twice
    assert not [t for t in trials if LOST_TAG in t.data.tags]  # none lost
