"""The watch over a fit whose Ray dies with the job (astune/tuning/lifecycle/ray_watch.py),
without Ray: a real child process stands for the GCS, and the driver is a real process that
must exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap

DRIVER = textwrap.dedent(
    """
    import signal, subprocess, sys, threading, time
    from types import SimpleNamespace
    from astune.tuning.lifecycle.ray_watch import RayWatch

    gcs = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stop = SimpleNamespace(received=None, exit_code=143)
    ended = []

    def end_without_ray():
        ended.append(True)
        return "search 'x' stopped by SIGTERM (the runs are KILLED)"

    watch = RayWatch(stop, command="search", end_without_ray=end_without_ray, head=[gcs])
    threading.Thread(target=watch.run, daemon=True).start()
    time.sleep(0.5)
    print("alive", flush=True)  # Ray alive, no signal: the watch waits
    stop.received = signal.SIGTERM if sys.argv[1] == "signal" else None
    gcs.kill()  # the job's SIGTERM reached Ray's processes too
    time.sleep(10)
    print("the watch did not end the process", flush=True)
    """
)


def run_driver(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", DRIVER, mode], capture_output=True, text=True, timeout=60
    )


def test_ray_lost_under_a_stop_signal_ends_the_runs_and_exits_with_the_signals_code():
    done = run_driver("signal")
    assert done.returncode == 143, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["alive"]
    assert done.stderr.strip().splitlines()[-1] == (
        "astune search: search 'x' stopped by SIGTERM (the runs are KILLED)"
    )


def test_ray_lost_without_a_signal_ends_the_runs_after_the_grace_and_exits_1():
    done = run_driver("no-signal")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "the watch did not end the process" not in done.stdout
    assert done.stderr.strip().splitlines()[-1].startswith("astune search: search 'x' stopped")
