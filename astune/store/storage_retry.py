"""Waiting out object storage that cannot be reached: which errors are worth waiting for, the
retry loop with its time bound, and the seconds a process spent waiting.

pyarrow's own S3 retries give up within seconds (three attempts) and cannot be bounded in time:
a storage endpoint restarted for an upgrade, or a network blip, would fail every trial that
uploads a checkpoint meanwhile. Ray-free and torch-free.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_STORAGE_TIMEOUT = 300.0  # seconds a storage call is retried: a restart or a blip
# The AWS SDK's names of the errors worth waiting out (the others will not go away).
_TRANSIENT_AWS_ERRORS = (
    "NETWORK_CONNECTION",
    "SERVICE_UNAVAILABLE",
    "SLOW_DOWN",
    "THROTTLING",
    "REQUEST_TIMEOUT",
    "INTERNAL_FAILURE",
)
_FIRST_WAIT_S, _LONGEST_WAIT_S = 0.5, 8.0

_waited_s = [0.0]  # this process's seconds spent waiting for storage, every handler together
_waited_lock = threading.Lock()


class StorageUnreachableError(OSError):
    """Object storage did not answer within the bound."""


def is_transient(err: BaseException) -> bool:
    """Whether ``err`` is an S3 error that waiting may cure (the service unreachable, slow or
    overloaded), from the AWS SDK's error name in pyarrow's message."""
    text = str(err)
    return isinstance(err, OSError) and any(f"AWS Error {n}" in text for n in _TRANSIENT_AWS_ERRORS)


def waited_seconds() -> float:
    """Seconds this process has spent waiting for object storage to answer again (a trial
    reports the difference over its run)."""
    with _waited_lock:
        return _waited_s[0]


def _add_waited(seconds: float) -> None:
    with _waited_lock:
        _waited_s[0] += seconds


def retried(call: Callable[[], T], *, what: str, where: str, timeout_s: float) -> T:
    """``call()``, tried again with doubling waits (0.5 s to 8 s) while its error is transient,
    until ``timeout_s`` after its first failure; then StorageUnreachableError, one line naming
    ``where`` (the storage), ``what`` was being done and the bound. Other errors at once."""
    first_failure: float | None = None  # time.monotonic() of the first transient error
    wait = _FIRST_WAIT_S
    while True:
        try:
            found = call()
        except OSError as err:
            if not is_transient(err):
                raise
            now, reason = time.monotonic(), str(err).splitlines()[0]
            if first_failure is None:
                first_failure = now
                logger.warning(
                    "object storage %s unreachable while %s; retrying for up to %.0f s (%s)",
                    where, what, timeout_s, reason,
                )  # fmt: skip
            left = first_failure + timeout_s - now
            if left <= 0:
                _add_waited(now - first_failure)
                raise StorageUnreachableError(
                    f"object storage {where} unreachable for {timeout_s:.0f} s "
                    f"(--storage-timeout) while {what}: {reason}"
                ) from None
            time.sleep(min(wait, left))
            wait = min(2 * wait, _LONGEST_WAIT_S)
            continue
        if first_failure is not None:
            _add_waited(time.monotonic() - first_failure)
            logger.warning("object storage %s reachable again (%s)", where, what)
        return found
