"""A search's driver told to stop: SIGTERM (what Slurm and Kubernetes send) or Ctrl-C (SIGINT).

The first signal becomes Ray Tune's own graceful stop: Tune's loop answers SIGUSR1 by ending
its trials, saving the experiment for ``--resume`` and returning from ``Tuner.fit``. Later
signals wait for that stop instead of cutting it short (a second Ctrl-C would otherwise leave
Python's KeyboardInterrupt in the middle of Ray's shutdown, and SIGTERM Ray's own handler, which
exits mid-call and dumps a C++ stack). The search then ends its runs KILLED and exits with
128 + the signal's number (143, 130), saying in one line how to resume.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
TUNE_SIGINT_VARIABLE = "TUNE_DISABLE_SIGINT_HANDLER"  # set: Ray Tune leaves SIGINT alone


class SearchStopped(Exception):
    """The search stopped on a signal; its message is the one line the CLI prints."""

    def __init__(self, message: str, *, signal_name: str, exit_code: int):
        super().__init__(message)
        self.signal_name, self.exit_code = signal_name, exit_code


class StopSignals:
    """The stop signal a search received, if any (``received``: the first one's number)."""

    def __init__(self) -> None:
        self.received: int | None = None

    @property
    def name(self) -> str:
        return signal.Signals(self.received).name if self.received else ""

    @property
    def exit_code(self) -> int:
        return 128 + (self.received or 0)

    def handle(self, signum: int, frame: object) -> None:
        if self.received is not None:
            return  # the stop is under way
        self.received = signum
        if not callable(signal.getsignal(signal.SIGUSR1)):  # Tune's loop is not running
            raise KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGUSR1)  # Tune's handler: a graceful stop


@contextmanager
def stop_on_signals() -> Iterator[StopSignals]:
    """Within the block, SIGTERM and SIGINT stop the search as described above; the handlers
    that were there before (Ray's) come back on the way out. Outside the main thread (where
    Python cannot set handlers) the block runs with the handlers as they are."""
    stop = StopSignals()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    tune_sigint = os.environ.get(TUNE_SIGINT_VARIABLE)
    os.environ[TUNE_SIGINT_VARIABLE] = "1"  # Tune would take SIGINT from this handler
    for sig in STOP_SIGNALS:
        signal.signal(sig, stop.handle)
    try:
        yield stop
    finally:
        for sig, handler in previous.items():  # None: set outside Python, so the default
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        if tune_sigint is None:
            os.environ.pop(TUNE_SIGINT_VARIABLE, None)
        else:
            os.environ[TUNE_SIGINT_VARIABLE] = tune_sigint


def fit_or_stop(tuner: Any, *, experiment: str, dataset: str) -> Any:
    """``tuner.fit()`` (its ``ResultGrid``) under :func:`stop_on_signals`; SearchStopped once a
    stop signal has ended it."""
    results = None
    with stop_on_signals() as stop:
        try:
            results = tuner.fit()
        except (KeyboardInterrupt, Exception):  # Ray may wrap the interrupt in a TuneError
            if not stop.received:
                raise
    if not stop.received:
        return results
    finished = sum(1 for r in results or () if r.metrics and r.metrics.get("done"))
    message = (
        f"search {experiment!r} stopped by {stop.name} ({finished} trials finished; the others "
        f"are KILLED in MLflow and resume from their last checkpoint); resume it with: "
        f"python -m astune search --dataset {dataset} --name {experiment} --resume"
    )
    raise SearchStopped(message, signal_name=stop.name, exit_code=stop.exit_code)
