"""One driver per search and one confirm per search (astune/store/driver_lock.py), on a real
SQLite MLflow store: the claim, its heartbeat, a dead driver's claim, a race between two
processes, and the one-line refusals of `astune search` and `astune confirm` (as a user runs
them, before Ray starts)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from hand_store import write_search
from mlflow import MlflowClient
from stores import new_store

from astune.store import driver_lock
from astune.store.driver_lock import STALE_SECONDS, DriverLock, Holder, holder_of

HOST = socket.gethostname()


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_claim_is_alive_while_its_heartbeat_is_fresh_and_on_this_host_its_pid_lives():
    now = time.time()
    assert Holder(HOST, os.getpid(), now, now).alive()
    assert not Holder(HOST, dead_pid(), now, now).alive()  # freed at once on its own host
    assert Holder("elsewhere", 1, now, now - STALE_SECONDS + 5).alive(now)
    assert not Holder("elsewhere", 1, now, now - STALE_SECONDS - 5).alive(now)
    assert not Holder(HOST, os.getpid(), now, now - STALE_SECONDS - 5).alive(now)


def search_run(tmp_path: Path, name: str = "held") -> tuple[MlflowClient, str, str]:
    """A store with the RUNNING parent run of search ``name``: (client, its URI, the run)."""
    uri = new_store(tmp_path / "store")
    client = MlflowClient(uri)
    experiment = client.create_experiment(name)
    tags = {"astune.role": "search", "astune.search_id": name}
    return client, uri, client.create_run(experiment, tags=tags).info.run_id


def lock_of(client: MlflowClient, run_id: str, what: str = "search 'held'") -> DriverLock:
    return DriverLock(
        client, run_id, role="search", what=what, rivals=lambda: [client.get_run(run_id)]
    )


def test_the_holder_beats_and_a_release_frees_the_claim(tmp_path, monkeypatch):
    monkeypatch.setattr(driver_lock, "HEARTBEAT_SECONDS", 0.2)
    client, _, run_id = search_run(tmp_path)
    lock = lock_of(client, run_id)
    lock.acquire(settle=0.0)
    first = holder_of(client.get_run(run_id), "search")
    assert first is not None and (first.host, first.pid) == (HOST, os.getpid())
    time.sleep(1.0)
    later = holder_of(client.get_run(run_id), "search")
    assert later.heartbeat > first.heartbeat and later.claimed == first.claimed
    lock.release()
    released = holder_of(client.get_run(run_id), "search")
    assert released.heartbeat == 0.0 and not released.alive()


def test_a_dead_drivers_claim_holds_nothing(tmp_path):
    client, _, run_id = search_run(tmp_path)
    stale = {"host": HOST, "pid": str(dead_pid()), "claimed": "1", "heartbeat": f"{time.time()}"}
    for key, value in stale.items():
        client.set_tag(run_id, f"astune.search_driver.{key}", value)
    lock = lock_of(client, run_id)
    lock.acquire(settle=0.0)  # no DriverBusy
    assert holder_of(client.get_run(run_id), "search").pid == os.getpid()
    lock.release()


CLAIM = textwrap.dedent(
    """
    import sys, time
    from mlflow import MlflowClient
    from astune.store.driver_lock import DriverBusy, DriverLock
    uri, run_id, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    client = MlflowClient(uri)
    lock = DriverLock(client, run_id, role="search", what="search 'held'",
                      rivals=lambda: [client.get_run(run_id)])
    time.sleep(max(0.0, start - time.time()))
    try:
        lock.acquire(settle=2.0)
    except DriverBusy as err:
        print("BUSY", err)
    else:
        print("HELD")
    """
)


def test_of_two_drivers_claiming_at_once_exactly_one_holds_the_search(tmp_path):
    client, uri, run_id = search_run(tmp_path)
    start = time.time() + 6  # both processes have imported MLflow by then
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIM, uri, run_id, str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=60)[0].strip() for p in processes]
    assert sorted(o.split()[0] for o in outputs) == ["BUSY", "HELD"], outputs
    busy = next(o for o in outputs if o.startswith("BUSY"))
    assert "search 'held' is running: its driver " in busy


def cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "astune", *argv], capture_output=True, text=True, timeout=120
    )


def test_a_search_resumed_while_its_driver_runs_refuses_in_one_line(tmp_path):
    """(`test_search.py` starts a second driver of a running search's --name.)"""
    client, uri, run_id = search_run(tmp_path)
    lock = lock_of(client, run_id)
    lock.acquire(settle=0.0)
    try:
        result = cli(
            "search", "--dataset", "sst5", "--name", "held", "--tracking-uri", uri, "--resume"
        )
    finally:
        lock.release()
    err = result.stderr.strip()
    assert result.returncode == 2 and len(err.splitlines()) == 1, err
    assert f"search 'held' is running: its driver {HOST}:{os.getpid()} gave" in err


def test_a_second_confirm_of_a_search_refuses_in_one_line(tmp_path, data_dir):
    uri = new_store(tmp_path / "store")
    client = MlflowClient(uri)
    write_search(client, "cf", None)
    parent = client.search_runs(
        [client.get_experiment_by_name("cf").experiment_id], "tags.`astune.role` = 'search'"
    )[0]
    lock = DriverLock(
        client,
        parent.info.run_id,
        role="confirm",
        what="a confirm of 'cf'",
        rivals=lambda: [client.get_run(parent.info.run_id)],
    )
    lock.acquire(settle=0.0)
    try:
        result = cli("confirm", "--experiment", "cf", "--tracking-uri", uri)
    finally:
        lock.release()
    err = result.stderr.strip()
    assert result.returncode == 2 and len(err.splitlines()) == 1, err
    assert f"a confirm of 'cf' is running: its driver {HOST}:{os.getpid()}" in err
