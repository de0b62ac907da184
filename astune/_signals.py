"""The stop signals a long command answers, SIGTERM (what Slurm and Kubernetes send), Ctrl-C
(SIGINT) and a closed terminal or dropped SSH session (SIGHUP), handed to a handler for the
length of a block. After a hangup the terminal is gone: what the command still prints there
goes nowhere instead of failing (a file or pipe it writes to is kept)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

Handler = Callable[[int, object], None]


def in_main_thread() -> bool:
    """Whether this thread may set signal handlers (Python's main thread alone may)."""
    return threading.current_thread() is threading.main_thread()


def install(handler: Handler) -> None:
    """The stop signals to ``handler`` from now on (nothing outside the main thread)."""
    if in_main_thread():
        for sig in STOP_SIGNALS:
            signal.signal(sig, _after_hangup(handler) if sig == signal.SIGHUP else handler)


def _after_hangup(handler: Handler) -> Handler:
    """``handler``, once the closed terminal is let go of (:func:`leave_closed_terminal`)."""

    def on_hangup(signum: int, frame: object) -> None:
        leave_closed_terminal()
        handler(signum, frame)

    return on_hangup


def leave_closed_terminal() -> None:
    """Point standard output and error at ``/dev/null`` where they are a terminal: after a
    hangup a write there fails (EIO) and would cut the graceful stop short."""
    for fd in (1, 2):
        try:
            if os.isatty(fd):
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, fd)
                os.close(null)
        except OSError:
            pass


@contextmanager
def stop_signals_to(handler: Handler) -> Iterator[None]:
    """Within the block, the stop signals call ``handler``; the handlers that were there before
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
