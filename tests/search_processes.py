"""Searches run as processes, as a user runs them, and stopped the ways jobs are stopped: the
helpers test_search's and test_job_stop's signal tests share."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import yaml
from mlflow import MlflowClient
from stores import count_rows
from tiny import tiny_flags

SPACES = Path(__file__).parent / "spaces"


def runs(client: MlflowClient, experiment: str, role: str) -> list:
    exp = client.get_experiment_by_name(experiment)
    found = client.search_runs(
        [exp.experiment_id], f"tags.`astune.role` = '{role}'", max_results=500
    )
    return sorted(found, key=lambda r: r.info.start_time)


def write_space(folder: Path, **changes) -> Path:
    space = yaml.safe_load((SPACES / "tiny.yaml").read_text())
    space["extends"] = "default"
    space.update(changes)
    path = folder / "space.yaml"
    path.write_text(yaml.safe_dump(space))
    return path


def search_argv(name: str, space: Path, *extra: str, samples: int = 3) -> list[str]:
    """``astune search`` arguments of a tiny search (1-layer MiniLM, 64 training samples)."""
    return [
        *("search", "--dataset", "sst5", "--space", str(space), *tiny_flags()),
        *("--num-samples", str(samples), "--name", name, *extra),
    ]


def search_command(name: str, space: Path, *extra: str, samples: int = 3) -> list[str]:
    """``python -m astune search ...`` of a tiny search, one trial at a time."""
    return [
        sys.executable,
        "-m",
        "astune",
        *search_argv(name, space, "--max-concurrent", "1", *extra, samples=samples),
    ]


def count_finished(db: Path) -> int:
    """FINISHED trial runs."""
    return count_rows(
        db,
        "SELECT count(*) FROM runs JOIN tags ON tags.run_uuid = runs.run_uuid "
        "WHERE runs.status = 'FINISHED' AND tags.key = 'astune.role' AND tags.value = 'trial'",
    )


STOP_TARGETS = ("driver", "group", "job")
"""Who a stop signal reaches: the driver's PID alone (Kubernetes, a user's ``kill``), its process
group (``kill -- -PGID``, GNU ``timeout``, a terminal's Ctrl-C), or every process of the job at
once, Ray's own included (Slurm's ``scancel`` and time limit, a cgroup-wide kill)."""


def send_stop(driver: subprocess.Popen, sig: int, to: str) -> None:
    """``sig`` to ``to`` (one of :data:`STOP_TARGETS`) of the search ``driver``."""
    if to == "driver":
        driver.send_signal(sig)
    elif to == "group":
        os.killpg(os.getpgid(driver.pid), sig)
    else:
        job = [driver.pid, *(p.pid for p in psutil.Process(driver.pid).children(recursive=True))]
        for pid in job:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


def stop_command(
    command: list[str],
    signals: list[int],
    ready: Callable[[], bool],
    *,
    to: str = "driver",
    left: list[int] | None = None,
) -> tuple[int, str, float]:
    """Run ``command`` (a search or a confirm) in a session of its own, send it ``signals`` (to
    ``to``, one of :data:`STOP_TARGETS`) once ``ready()``; its exit code, stderr and the seconds
    from the first signal to its exit. ``left``: filled with the PIDs of its processes still
    alive 30 s after it exited. Whatever of its processes outlived it is SIGKILLed by PID."""
    assert to in STOP_TARGETS, to
    driver = subprocess.Popen(
        command,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=os.environ,
        text=True,
    )
    seen: dict[int, psutil.Process] = {}
    try:
        deadline = time.monotonic() + 240
        while not ready() and driver.poll() is None and time.monotonic() < deadline:
            seen.update((p.pid, p) for p in psutil.Process(driver.pid).children(recursive=True))
            time.sleep(0.5)
        assert driver.poll() is None, "the search ended before it could be stopped"
        seen.update((p.pid, p) for p in psutil.Process(driver.pid).children(recursive=True))
        sent = time.monotonic()
        for sig in signals:
            send_stop(driver, sig, to)
            time.sleep(0.5)
        _, err = driver.communicate(timeout=120)
        seconds = time.monotonic() - sent
        if left is not None:
            until = time.monotonic() + 30
            while any(_alive(p) for p in seen.values()) and time.monotonic() < until:
                time.sleep(0.5)
            left.extend(pid for pid, p in seen.items() if _alive(p))
        return driver.returncode, err, seconds
    finally:
        driver.kill()
        driver.wait()
        for process in seen.values():  # the same process still (psutil checks its start time)
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass


def _alive(process: psutil.Process) -> bool:
    """Whether ``process`` (the same one: psutil checks its start time) runs, not a zombie."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_stopped(db: Path, code: int, err: str, seconds: float, sig: signal.Signals) -> None:
    """Exit 128 + the signal, within 30 s, one line saying so and how to resume, no stack
    dump; the parent and every trial run not finished end KILLED with a note, none RUNNING."""
    assert code == 128 + sig and seconds < 30, (code, seconds, err[-2000:])
    assert "Traceback" not in err and "SIGABRT" not in err and "*** " not in err, err[-3000:]
    assert "Tuner.restore" not in err and "Press CTRL+C" not in err, err[-3000:]  # Ray's advice
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"astune search: search 'killed' stopped by {sig.name} ("), last
    assert last.endswith("python -m astune search --dataset sst5 --name killed --resume"), last
    client = MlflowClient(f"sqlite:///{db}")
    (parent,) = runs(client, "killed", "search")
    stopped = [parent] + [r for r in runs(client, "killed", "trial") if r.info.status != "FINISHED"]
    assert {r.info.status for r in stopped} == {"KILLED"}
    for run in stopped:
        assert run.data.tags["astune.stopped_by"] == sig.name
        assert run.data.tags["mlflow.note.content"].startswith(f"Stopped by {sig.name}")


def driver_claims(db: Path) -> int:
    """Search runs whose driver claimed them (astune/store/driver_lock.py's tags)."""
    return count_rows(db, "SELECT count(*) FROM tags WHERE key = 'astune.search_driver.pid'")


def running_trials(db: Path, evaluations: int = 1) -> int:
    """Trial runs RUNNING with at least ``evaluations`` steps of the objective."""
    return count_rows(
        db,
        "SELECT count(*) FROM (SELECT runs.run_uuid FROM runs JOIN tags ON tags.run_uuid = "
        "runs.run_uuid JOIN metrics ON metrics.run_uuid = runs.run_uuid WHERE runs.status = "
        "'RUNNING' AND tags.key = 'astune.role' AND tags.value = 'trial' AND metrics.key = "
        f"'objective' GROUP BY runs.run_uuid HAVING count(DISTINCT metrics.step) >= {evaluations})",
    )
