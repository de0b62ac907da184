"""A search whose object storage goes away while trials upload checkpoints, with real processes:
``astune search`` (its own local Ray) writing to ``s3://`` on a real ``moto_server`` through a
TCP proxy that the test kills and starts again on the same port.

- An outage shorter than ``--storage-timeout``, from the first trial's first checkpoint on: its
  uploads wait and go on, the trial is not failed, and its run says how long it waited.
- A longer one, from the second trial's first checkpoint on: the trial fails with one line
  naming the storage and the bound, and Ray's failure config retries it once the storage
  answers again. The search completes with both trials finished: 0 lost.

Every process is ended by its PID (its process group) when the test ends, passed or failed.
"""

from __future__ import annotations

import os
import sys
import time

import pytest
import yaml
from cluster_processes import S3_CREDENTIALS, Processes, await_s3, s3_keys, start_s3, wait_for
from mlflow import MlflowClient
from stores import count_rows, new_store
from test_object_storage import BUCKET, Network
from tiny import fifo_space, tiny_flags

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TRIALS, EVALUATIONS = 2, 3
# pyarrow alone gives up after 1-2 s. The network is cut as a checkpoint's first file arrives,
# so the rest of that upload meets the outage; a call is tried again 0.5, 1.5, 3.5 and 7.5 s
# after its first failure, the last try within the bound once the 4 s have passed.
TIMEOUT_S, SHORT_OUTAGE_S = 8, 4
NAME = "storage-outage"


def checkpoints(endpoint: str) -> set[str]:
    """``trial_<id>/checkpoint_<n>`` of every checkpoint uploaded so far, read from the server
    itself (not through the proxy)."""
    found = set()
    for key in s3_keys(endpoint, BUCKET, f"searches/{NAME}/"):
        parts = key.split("/")
        if len(parts) > 3 and parts[3].startswith("checkpoint_"):
            found.add(f"{parts[2]}/{parts[3]}")
    return found


def test_a_search_waits_out_a_storage_outage_and_retries_a_trial_past_the_bound(
    tmp_path, data_dir, monkeypatch
):
    for key, value in S3_CREDENTIALS.items():  # the search's, and this test's boto3 client
        monkeypatch.setenv(key, value)
    env = dict(os.environ, ASTUNE_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1")
    procs = Processes(tmp_path, env)
    network = Network(procs)
    procs.env["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{network.port}"  # the search's way in
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(fifo_space(trials=TRIALS, epochs=EVALUATIONS)))
    store = new_store(tmp_path / "mlflow")
    search = [sys.executable, "-m", "astune", "search", "--dataset", "sst5", "--space", str(space)]
    search += tiny_flags() + ["--max-concurrent", "1", "--name", NAME, "--tracking-uri", store]
    search += ["--storage-path", f"s3://{BUCKET}/searches", "--checkpoint-every", "eval"]
    search += ["--storage-timeout", str(TIMEOUT_S)]
    db = tmp_path / "mlflow" / "mlflow.db"
    retried = "SELECT count(*) FROM tags WHERE key = 'astune.retry_error'"
    log = tmp_path / "search.log"
    try:
        endpoint = start_s3(procs, network.server_port)
        network.mend()
        await_s3(endpoint, BUCKET)
        driver = procs.start("search", search)

        first = wait_for(lambda: checkpoints(endpoint), "a checkpoint", timeout=240, every=0.5)
        waited = next(iter(first)).split("/")[0].removeprefix("trial_")
        network.cut()  # a short outage: the trial's next uploads wait for the storage
        time.sleep(SHORT_OUTAGE_S)
        network.mend()

        second = wait_for(
            lambda: {c for c in checkpoints(endpoint) if not c.startswith(f"trial_{waited}")},
            "the second trial's checkpoint",
            timeout=240,
            every=0.5,
        )
        failed = next(iter(second)).split("/")[0].removeprefix("trial_")
        network.cut()  # past the bound: the trial fails, and is retried once storage is back
        wait_for(lambda: count_rows(db, retried), "the trial failing and Ray retrying it", 120)
        network.mend()

        code = driver.wait(timeout=400)
        out = log.read_text()
        assert code == 0, out[-3000:]
    finally:
        procs.end_all()

    assert f"{TRIALS} trials ({TRIALS} terminated)" in out, out[-2000:]
    client = MlflowClient(store)
    experiment = client.get_experiment_by_name(NAME)
    runs = client.search_runs([experiment.experiment_id], "tags.`astune.role` = 'trial'")
    assert len(runs) == TRIALS
    by_trial = {r.data.tags["astune.trial_id"]: r for r in runs}
    for run in by_trial.values():
        assert run.info.status == "FINISHED", run.info.run_name
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "objective")]
        assert sorted(steps) == list(range(EVALUATIONS)), (run.info.run_name, steps)
        assert "test_accuracy" in run.data.metrics
    # the short outage cost no retry, and the trial's run says it waited
    assert "astune.retries" not in by_trial[waited].data.tags
    assert by_trial[waited].data.metrics["storage_wait_seconds"] > 0
    # the long one cost one, its reason in one line
    retried = by_trial[failed]
    assert retried.data.tags["astune.retries"] == "1"
    reason = retried.data.tags["astune.retry_error"]
    assert "\n" not in reason
    assert reason.startswith(
        "astune.store.storage_retry.StorageUnreachableError: object storage "
        f"s3://{BUCKET}/searches unreachable for "
        f"{TIMEOUT_S} s (--storage-timeout) while "
    ), reason
