"""One driver at a time per search (and one ``confirm`` at a time per search), held on the
search's parent run in MLflow, where every driver of the search looks, on any host.

The holder tags the run with who it is (``host:pid``) and refreshes a heartbeat every
:data:`HEARTBEAT_SECONDS`; a driver that died holds nothing: on its own host its PID is gone,
elsewhere its heartbeat stops and is stale after :data:`STALE_SECONDS`. Two drivers that claim
at the same moment both read the claims back after :data:`SETTLE_SECONDS`: on one run the claim
the run shows wins (the last written); on two parent runs of one search the earlier claim wins.
The other steps back with a one-line error.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from astune.store.conventions import IDLE_SECONDS_TAG, TrackingError

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Run

logger = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 30.0
STALE_SECONDS = 3 * HEARTBEAT_SECONDS  # a heartbeat this old: its driver is gone
SETTLE_SECONDS = 1.0  # between a claim and reading the claims back
LOCK_ROLES = ("search", "confirm")


class DriverBusy(TrackingError):
    """Another live driver holds the search (one line naming it)."""


@dataclass(frozen=True)
class Holder:
    """A driver's claim on a run: who (``host``, ``pid``), since when and its last heartbeat
    (seconds since the epoch)."""

    host: str
    pid: int
    claimed: float
    heartbeat: float

    @property
    def name(self) -> str:
        return f"{self.host}:{self.pid}"

    def alive(self, now: float | None = None) -> bool:
        """A fresh heartbeat, and on this host a live PID."""
        age = (time.time() if now is None else now) - self.heartbeat
        if age > STALE_SECONDS:
            return False
        return self.host != socket.gethostname() or _pid_alive(self.pid)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _tag(role: str, what: str) -> str:
    return f"astune.{role}_driver.{what}"


def holder_of(run: Run, role: str) -> Holder | None:
    """The claim of ``role`` (``search`` or ``confirm``) on ``run``, if any."""
    tags = run.data.tags
    try:
        return Holder(
            host=tags[_tag(role, "host")],
            pid=int(tags[_tag(role, "pid")]),
            claimed=float(tags[_tag(role, "claimed")]),
            heartbeat=float(tags[_tag(role, "heartbeat")]),
        )
    except (KeyError, ValueError):
        return None


def last_alive(run: Run, role: str) -> float | None:
    """When a driver of ``role`` last showed life on ``run``: the later of the run's end and its
    driver's last heartbeat (seconds since the epoch); None for neither."""
    ends = [run.info.end_time / 1000] if run.info.end_time else []
    holder = holder_of(run, role)
    if holder is not None:
        ends.append(holder.heartbeat)
    return max(ends, default=None)


def idle_seconds(run: Run, role: str, now: float) -> float:
    """The time ``run`` sat with no driver of ``role``, for a driver that takes it up at
    ``now``: what :data:`IDLE_SECONDS_TAG` holds plus the time since one last showed life."""
    last = last_alive(run, role)
    return recorded_idle(run) + (max(0.0, now - last) if last is not None else 0.0)


def recorded_idle(run: Run) -> float:
    """The seconds :data:`IDLE_SECONDS_TAG` holds (0 for none, or a value that is no number)."""
    try:
        return max(0.0, float(run.data.tags.get(IDLE_SECONDS_TAG, 0.0)))
    except ValueError:
        return 0.0


def busy_message(what: str, holder: Holder, now: float | None = None) -> str:
    age = (time.time() if now is None else now) - holder.heartbeat
    return (
        f"{what} is running: its driver {holder.name} gave a heartbeat {age:.0f} s ago; wait for "
        f"it, stop it (SIGTERM), or use another --name (a driver that died frees it at once on "
        f"its own host, elsewhere after {STALE_SECONDS:.0f} s)"
    )


def live_claims(
    runs: list[Run], role: str, *, besides: str | None = None
) -> Iterator[tuple[Run, Holder]]:
    """Each of ``runs`` that a live driver of ``role`` holds, with its claim; ``besides``: a
    driver (``host:pid``) whose claims do not count."""
    for run in runs:
        other = holder_of(run, role)
        if other is not None and other.name != besides and other.alive():
            yield run, other


def check_free(runs: list[Run], *, role: str, what: str) -> None:
    """DriverBusy (one line) if a live driver of ``role`` holds one of ``runs`` still RUNNING."""
    for run, other in live_claims(runs, role):
        if run.info.status == "RUNNING":
            raise DriverBusy(busy_message(what, other))


class DriverLock:
    """This process's claim of ``role`` on the run ``run_id``, among the runs ``rivals()``
    returns (the search's parent runs; for a confirm, the one it confirms). ``acquire`` raises
    DriverBusy when a live driver holds one of them; ``release`` gives the claim up (a process
    that ends without it stops its heartbeat, which frees it too)."""

    def __init__(
        self,
        client: MlflowClient,
        run_id: str,
        *,
        role: str,
        what: str,
        rivals: Callable[[], list[Run]],
    ):
        if role not in LOCK_ROLES:
            raise ValueError(f"role must be one of {', '.join(LOCK_ROLES)}, got {role!r}")
        self.client, self.run_id, self.role, self.what = client, run_id, role, what
        self.rivals = rivals
        self.me = Holder(socket.gethostname(), os.getpid(), time.time(), time.time())
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self, *, settle: float = SETTLE_SECONDS) -> None:
        self._refuse_if_held(claimed=False)
        self._write(claimed=True)
        time.sleep(settle)  # a driver claiming at the same moment has written by now
        self._refuse_if_held(claimed=True)
        self._thread = threading.Thread(target=self._beat, name="astune-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the heartbeat without writing (the tracking server may be away): the claim ages,
        and ends with this process on its own host."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def release(self) -> None:
        self.stop()
        current = holder_of(self.client.get_run(self.run_id), self.role)
        if current is not None and current.name == self.me.name:
            self.client.set_tag(self.run_id, _tag(self.role, "heartbeat"), "0")

    def _refuse_if_held(self, *, claimed: bool) -> None:
        """DriverBusy if another live driver holds a rival run: before my claim, any; after
        it, one that overwrote my claim on my run, or claimed another run earlier than I did."""
        for run, other in live_claims(self.rivals(), self.role, besides=self.me.name):
            mine = run.info.run_id == self.run_id
            earlier = (other.claimed, run.info.run_id) < (self.me.claimed, self.run_id)
            if not claimed or mine or earlier:
                raise DriverBusy(busy_message(self.what, other))

    def _write(self, *, claimed: bool) -> None:
        from mlflow.entities import RunTag

        tags = {_tag(self.role, "heartbeat"): f"{time.time():.3f}"}
        if claimed:
            tags.update(
                {
                    _tag(self.role, "host"): self.me.host,
                    _tag(self.role, "pid"): str(self.me.pid),
                    _tag(self.role, "claimed"): f"{self.me.claimed:.3f}",
                }
            )
        self.client.log_batch(self.run_id, tags=[RunTag(k, v) for k, v in tags.items()])

    def _beat(self) -> None:
        warned = False
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                self._write(claimed=False)
            except Exception as err:  # the tracking server away: the claim only ages
                if not warned:
                    logger.warning("driver heartbeat not written (%s); retrying", err)
                    warned = True
