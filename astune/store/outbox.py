"""Writes to a tracking server that may be away: held in order while it is unreachable, written
when it answers again.

A search's trials keep training while the MLflow server restarts or its network is down; what
the driver would have logged meanwhile waits here, first in first out, and is written as soon as
a later attempt reaches the server. A write that fails for another reason (the server answered
with an error) is dropped with one warning, as before: the search goes on. What is still held
when the search ends is not lost: Ray keeps every trial's results on the storage path, and
``search --resume`` writes what MLflow lacks (:mod:`astune.store.backfill`).
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

logger = logging.getLogger(__name__)

FIRST_RETRY_SECONDS = 2.0
"""After a write found the server unreachable, the next attempt waits this long, doubling up
to :data:`LAST_RETRY_SECONDS`; writes submitted meanwhile join the queue without a call."""
LAST_RETRY_SECONDS = 10.0

RETRIES_VARIABLE = "MLFLOW_HTTP_REQUEST_MAX_RETRIES"
TIMEOUT_VARIABLE = "MLFLOW_HTTP_REQUEST_TIMEOUT"
FAST_HTTP = {
    RETRIES_VARIABLE: "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    TIMEOUT_VARIABLE: "10",
}
"""MLflow's HTTP retry settings while trials run. Its defaults (7 retries, backoff factor 2,
120 s timeout: minutes per call) suit a script that must not lose a call; here the queue
retries, so a call to a server that is away gives up in seconds. A value the user set stays."""
PROBE_HTTP = {RETRIES_VARIABLE: "0", TIMEOUT_VARIABLE: "3"}
"""A probe of a server that was away: one attempt, at most 3 s even where packets vanish."""


def unreachable(err: BaseException) -> bool:
    """True when ``err`` (or an exception it was raised from or during) is a failure to reach
    the server: a refused or dropped connection, a timeout, retries used up on 5xx answers.
    MLflow raises these as ``MlflowException`` with the ``requests`` error as its context."""
    import requests

    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        if isinstance(current, (requests.exceptions.RequestException, ConnectionError)):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


@contextmanager
def single_attempts() -> Iterator[None]:
    """Within the block, an MLflow HTTP call is :data:`PROBE_HTTP`: a retry of held writes while
    the server is away probes it once (the outbox's schedule is the retry), so that the driver's
    loop is not held for seconds at each probe."""
    before = {key: os.environ.get(key) for key in PROBE_HTTP}
    os.environ.update(PROBE_HTTP)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def fast_failing_http() -> Iterator[None]:
    """Within the block, MLflow's HTTP calls give up after :data:`FAST_HTTP` (unless the user set
    those variables); the environment as it was comes back on the way out."""
    added = {key: value for key, value in FAST_HTTP.items() if key not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


@dataclass
class _Write:
    label: str  # what the write is, for the warning when it fails: "result of trial 3ab4"
    write: Callable[[], object]


class Outbox:
    """Writes to the tracking store, in order, held while the store is unreachable.

    ``submit(label, write)`` queues ``write`` (a call without arguments) and writes the queue
    unless a retry is not due yet. ``flush(force=True)`` tries now. ``behind`` counts the
    writes held. ``clock`` is for tests (seconds, monotonic).
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._queue: deque[_Write] = deque()
        self._clock = clock
        self._retry_at = 0.0
        self._wait = FIRST_RETRY_SECONDS
        self._away_since: float | None = None
        self.failure = ""  # the last unreachable error, one line

    @property
    def behind(self) -> int:
        """How many writes are held."""
        return len(self._queue)

    def submit(self, label: str, write: Callable[[], object]) -> None:
        self._queue.append(_Write(label, write))
        self.flush()

    def flush(self, *, force: bool = False) -> int:
        """Write what is queued, in order, until the queue is empty or the store is found
        unreachable (the rest waits for the next attempt); returns how many were written."""
        away = self._away_since is not None
        if away and not force and self._clock() < self._retry_at:
            return 0
        with single_attempts() if away else nullcontext():
            return self._write_queued()

    def _write_queued(self) -> int:
        written = 0
        while self._queue:
            item = self._queue[0]
            try:
                item.write()
            except Exception as err:
                if unreachable(err):
                    self._away(err)
                    return written
                self._queue.popleft()
                logger.warning(
                    "MLflow tracking: %s failed (%s: %s); the search goes on",
                    item.label,
                    type(err).__name__,
                    first_line(err),
                )
                continue
            self._queue.popleft()
            written += 1
        self._back(written)
        return written

    def _away(self, err: BaseException) -> None:
        now = self._clock()
        self.failure = f"{type(err).__name__}: {first_line(err)}"
        if self._away_since is None:
            self._away_since = now
            logger.warning(
                "MLflow tracking server unreachable (%s); the trials go on, their writes are "
                "held until it answers",
                self.failure,
            )
        else:
            self._wait = min(self._wait * 2, LAST_RETRY_SECONDS)
        self._retry_at = now + self._wait

    def _back(self, written: int) -> None:
        if self._away_since is not None:
            logger.warning(
                "MLflow tracking server back after %.0f s: %d held writes written",
                self._clock() - self._away_since,
                written,
            )
        self._away_since, self._wait = None, FIRST_RETRY_SECONDS


def first_line(err: BaseException) -> str:
    message = str(err).strip().splitlines()
    return message[0] if message else ""
