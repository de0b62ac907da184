"""The stop signals a long command answers, SIGTERM (what Slurm and Kubernetes send) and Ctrl-C
(SIGINT), handed to a handler for the length of a block."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

Handler = Callable[[int, object], None]


def in_main_thread() -> bool:
    """Whether this thread may set signal handlers (Python's main thread alone may)."""
    return threading.current_thread() is threading.main_thread()


def install(handler: Handler) -> None:
    """SIGTERM and SIGINT to ``handler`` from now on (nothing outside the main thread)."""
    if in_main_thread():
        for sig in STOP_SIGNALS:
            signal.signal(sig, handler)


@contextmanager
def stop_signals_to(handler: Handler) -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT call ``handler``; the handlers that were there before
    come back on the way out. Outside the main thread the block runs with the handlers as they
    are."""
    if not in_main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    install(handler)
    try:
        yield
    finally:
        for sig, before in previous.items():  # None: set outside Python, so the default
            signal.signal(sig, signal.SIG_DFL if before is None else before)
