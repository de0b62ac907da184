"""A driver that outlives the Ray it started: the stop when Ray's own processes are gone.

Slurm's ``scancel``, a job's time limit and a cgroup-wide kill (``systemctl stop``, a container
runtime) send SIGTERM to every process of the job at once: the local GCS and raylet die with
the trials while the driver begins its graceful stop. Tune's stop then waits on the dead GCS,
and after a minute Ray's core worker ends the process (exit 1), leaving the runs RUNNING.

While a fit runs, :class:`RayWatch` polls the GCS server and raylet that this driver started.
Once they are gone it ends the search without Ray: the given ending writes MLflow (the runs
KILLED, the claim released) and returns the one line, which is printed before the process
exits with the stop's code, 128 + the signal (1 when no stop signal came: Ray died by itself).
Ray's saved experiment is whatever Tune last wrote, which ``--resume`` continues.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from subprocess import Popen


class StopState(Protocol):
    """What the watch reads of :class:`.stop.StopSignals` (which imports this)."""

    received: int | None

    @property
    def exit_code(self) -> int: ...


POLL_SECONDS = 0.25
SIGNAL_GRACE_SECONDS = 3.0  # a stop signal and Ray's death come together; wait for its note


class RayWatch:
    """The watch over one fit (see the module); ``end_without_ray()`` returns the one line."""

    def __init__(
        self,
        stop: StopState,
        *,
        command: str,
        end_without_ray: Callable[[], str],
        head: list[Popen],
    ):
        self.stop, self.command, self.head = stop, command, head
        self.end_without_ray = end_without_ray
        self.fit_over = threading.Event()
        self.ending = threading.Lock()  # held by whoever ends the search: the watch, or the fit

    def head_lost(self) -> bool:
        return any(process.poll() is not None for process in self.head)

    def run(self) -> None:
        lost_at = None
        while not self.fit_over.wait(POLL_SECONDS):
            if lost_at is None and self.head_lost():
                lost_at = time.monotonic()
            waited = lost_at is not None and time.monotonic() - lost_at >= SIGNAL_GRACE_SECONDS
            if lost_at is not None and (self.stop.received or waited):
                if self.ending.acquire(blocking=False):
                    self._end()
                return

    def _end(self) -> None:
        from astune._private import local_ray_processes

        try:
            line = self.end_without_ray()
        except BaseException as err:  # the line still says what happened, and the exit code
            line = f"stopped, but its runs could not be closed: {type(err).__name__}: {err}"
        print(f"astune {self.command}: {line}", file=sys.stderr, flush=True)
        for process in local_ray_processes():  # what the kill spared (log monitor, agents)
            if process.poll() is None:
                process.kill()
        sys.stdout.flush()
        os._exit(self.stop.exit_code if self.stop.received else 1)


@contextmanager
def watching_ray(
    stop: StopState, *, command: str, end_without_ray: Callable[[], str]
) -> Iterator[None]:
    """The block (a fit) under a :class:`RayWatch`, when this driver started Ray; on the way
    out the watch ends, or, when it has begun ending the search, the block's thread waits for
    the process to exit."""
    from astune._private import local_ray_processes

    head = local_ray_processes(head_only=True)
    if not head:  # joined a cluster: its head is not this job's to lose
        yield
        return
    watch = RayWatch(stop, command=command, end_without_ray=end_without_ray, head=head)
    thread = threading.Thread(target=watch.run, name="astune-ray-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        watch.fit_over.set()
        watch.ending.acquire()  # blocks for good while the watch ends the search and exits
        thread.join()
