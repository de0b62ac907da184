"""A search's (or confirm's) driver told to stop: SIGTERM (what Slurm and Kubernetes send) or
Ctrl-C (SIGINT).

The handlers hold from before Ray starts to the driver's end. A signal during the start-up (the
runs reopened, the Tuner built or restored from storage) is noted, and the driver stops at the
next step's end: a KeyboardInterrupt raised in the middle of an MLflow or Optuna
write would leave it half done. Once Tune's loop runs, the first signal becomes Ray Tune's own
graceful stop: Tune's loop answers SIGUSR1 by ending its trials, saving the experiment for
``--resume`` and returning from ``Tuner.fit``. Later signals wait for the stop under way instead
of cutting it short (a second Ctrl-C would otherwise leave Python's KeyboardInterrupt in the
middle of Ray's shutdown, and SIGTERM Ray's own handler, which exits mid-call and dumps a C++
stack). The search then ends its runs KILLED and exits with 128 + the signal's number (143,
130), saying in one line how to resume (or, stopped before any trial ran, how to start again).

While ``ray.init`` runs, Ray's own SIGTERM handler holds (it stops Ray's processes and exits 1);
the driver installs these handlers again once it returns.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from astune._signals import in_main_thread, install, stop_signals_to
from astune._text import plural

TUNE_SIGINT_VARIABLE = "TUNE_DISABLE_SIGINT_HANDLER"  # set: Ray Tune leaves SIGINT alone


class SearchStopped(Exception):
    """The search stopped on a signal; its message is the one line the CLI prints.
    ``resumable``: False when the search stopped before Ray Tune saved anything of it."""

    def __init__(self, message: str, *, signal_name: str, exit_code: int, resumable: bool = True):
        super().__init__(message)
        self.signal_name, self.exit_code = signal_name, exit_code
        self.resumable = resumable


class StopSignals:
    """The stop signal a search received, if any (``received``: the first one's number).
    ``deferred``: the driver is between start-up steps, which :meth:`check` ends."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.deferred = True

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
        if self.deferred:
            return  # the start-up step in progress ends first: see check()
        if not callable(signal.getsignal(signal.SIGUSR1)):  # Tune's loop is not running yet
            raise KeyboardInterrupt  # inside fit_unless_stopped, which ends the fit
        os.kill(os.getpid(), signal.SIGUSR1)  # Tune's handler: a graceful stop

    def install(self) -> None:
        """Handle SIGTERM and SIGINT here (again: ``ray.init`` sets its own SIGTERM handler)."""
        install(self.handle)

    def check(self, *, experiment: str, resume: str, resumable: bool) -> None:
        """Between start-up steps: :class:`SearchStopped` when a stop signal came meanwhile.
        ``resumable``: Ray Tune saved the search (``resume``, the command, continues it; else
        nothing ran and the same command starts it anew)."""
        if self.received is None:
            return
        if resumable:
            what = (
                "before its trials ran in this driver; its runs are KILLED in MLflow); resume "
                f"it with: {resume}"
            )
        else:
            what = "before its first trial started; nothing ran); start it again with the same "
            what += "command"
        raise SearchStopped(
            f"search {experiment!r} stopped by {self.name} ({what}",
            signal_name=self.name,
            exit_code=self.exit_code,
            resumable=resumable,
        )


def finished_trials(results: Any) -> int:
    """The trials of a ``ResultGrid`` (None: none) that ran to their end."""
    return sum(1 for r in results or () if _ended(r))


def _ended(result: Any) -> bool:
    """Tune's ``done``, or the trial's ``final`` report (a restored trial's may lack ``done``)."""
    return bool(result.metrics and (result.metrics.get("done") or result.metrics.get("final")))


# What resumes an unfinished trial when the driver cannot tell whether it has a checkpoint.
RESUMES_IF_SAVED = "resume from their last checkpoint, or from scratch without one"


def trials_stopped(results: Any) -> str:
    """What a stop left of the trials of a ``ResultGrid`` (None: ``fit`` ended before Tune's
    loop ran), in words: how many finished, and how each unfinished one resumes, from its
    latest checkpoint (Ray's ``Result.checkpoint``) or from scratch. Errored trials are
    left out: their own lines said so."""
    finished = finished_trials(results)
    head = f"{finished} {plural(finished, 'trial')} finished"
    if results is None:  # nothing known of the others here
        return f"{head}; the others are KILLED in MLflow and {RESUMES_IF_SAVED}"
    unfinished = [r for r in results if not _ended(r) and r.error is None]
    if not unfinished:
        return head
    saved = sum(1 for r in unfinished if r.checkpoint is not None)
    fresh, how = len(unfinished) - saved, []
    if saved:
        how.append(f"{saved} with a checkpoint {plural(saved, 'resume', verb=True)} from it")
    if fresh:
        how.append(f"{fresh} without one yet {plural(fresh, 'restart', verb=True)} from scratch")
    return f"{head}; {len(unfinished)} unfinished, KILLED in MLflow: {', '.join(how)}"


RAY_TUNE_LOGGER = "ray.tune.tune"  # the module whose lines advise on stopping and resuming
RAY_ADVICE = ("Tuner.restore(", "Press CTRL+C")


class _RayStopAdvice(logging.Filter):
    """Drops Ray Tune's lines that contradict astune's: how to resume (``Tuner.restore``, which
    is not how a search resumes) and how to skip the graceful stop (a second signal waits)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(advice in message for advice in RAY_ADVICE)


@contextmanager
def ray_stop_advice_off() -> Iterator[None]:
    """Ray Tune's advice on stopping and resuming kept off the console for the block."""
    logger, advice = logging.getLogger(RAY_TUNE_LOGGER), _RayStopAdvice()
    logger.addFilter(advice)
    try:
        yield
    finally:
        logger.removeFilter(advice)


@contextmanager
def stop_on_signals() -> Iterator[StopSignals]:
    """Within the block, SIGTERM and SIGINT stop the search as described above; the handlers
    that were there before come back on the way out. Outside the main thread (where Python
    cannot set handlers) the block runs with the handlers as they are."""
    stop = StopSignals()
    if not in_main_thread():
        yield stop
        return
    tune_sigint = os.environ.get(TUNE_SIGINT_VARIABLE)
    os.environ[TUNE_SIGINT_VARIABLE] = "1"  # Tune would take SIGINT from this handler
    try:
        with stop_signals_to(stop.handle), ray_stop_advice_off():
            yield stop
    finally:
        if tune_sigint is None:
            os.environ.pop(TUNE_SIGINT_VARIABLE, None)
        else:
            os.environ[TUNE_SIGINT_VARIABLE] = tune_sigint


def fit_unless_stopped(
    tuner: Any, stop: StopSignals, *, command: str, end_without_ray: Callable[[], str]
) -> Any:
    """``tuner.fit()`` (its ``ResultGrid``) with ``stop``'s signals turned into Tune's graceful
    stop; ``stop.received`` tells whether one came. None when one came during the start-up
    (``fit`` is not called) or ended ``fit`` before Tune's loop ran. When the Ray this driver
    started dies meanwhile (a job-wide SIGTERM), ``end_without_ray`` closes the runs and gives
    the one line, and the process exits (:mod:`.ray_watch`, ``command`` names it).
    """
    from astune.tuning.lifecycle.ray_watch import watching_ray

    results = None
    try:
        stop.deferred = False  # from here a signal is Tune's stop, or ends fit() at once
        if stop.received is None:
            with watching_ray(stop, command=command, end_without_ray=end_without_ray):
                results = tuner.fit()
    except (KeyboardInterrupt, Exception):  # Ray may wrap the interrupt in a TuneError
        if not stop.received:
            raise
    finally:
        stop.deferred = True  # what follows (the runs' end) is written whole
    return results


def fit_or_stop(
    tuner: Any,
    stop: StopSignals,
    *,
    experiment: str,
    resume: str,
    resumable: bool,
    close_killed: Callable[[], None],
    saved: Callable[[], bool] | None = None,
) -> Any:
    """A search's :func:`fit_unless_stopped`; SearchStopped once a stop signal has ended it, or
    came during the start-up (then ``resumable`` as :meth:`StopSignals.check` takes it). A
    signal that ends ``fit`` before Tune's loop runs leaves a new search resumable only if
    ``saved()`` (None: it is). ``close_killed`` ends the runs KILLED when Ray's processes died
    under the driver (then the process exits here). ``resume``: the command that resumes it."""
    stop.check(experiment=experiment, resume=resume, resumable=resumable)

    def end_without_ray() -> str:
        close_killed()
        what = "Ray's processes ended with it; the unfinished trials are KILLED in MLflow and "
        return stopped_line(experiment, resume, stop.name, what + RESUMES_IF_SAVED)

    results = fit_unless_stopped(tuner, stop, command="search", end_without_ray=end_without_ray)
    if not stop.received:
        return results
    if results is None and not resumable and saved is not None and not saved():
        stop.check(experiment=experiment, resume=resume, resumable=False)  # nothing ran
    message = stopped_line(experiment, resume, stop.name, trials_stopped(results))
    raise SearchStopped(message, signal_name=stop.name, exit_code=stop.exit_code)


def stopped_line(experiment: str, resume: str, signal_name: str, what: str) -> str:
    """The one line of a stopped search: by ``signal_name`` ("": Ray's processes ended by
    themselves), ``what``: how its trials ended and resume, and ``resume``, the command."""
    by = f"stopped by {signal_name}" if signal_name else "stopped"
    return f"search {experiment!r} {by} ({what}); resume it with: {resume}"
