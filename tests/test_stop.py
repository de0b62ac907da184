"""A search's driver told to stop (astune/tuning/lifecycle/stop.py), signal by signal, in this
process: a signal during the start-up is held to the end of the step under way, one during
``fit`` becomes Tune's graceful stop (or ends ``fit`` before Tune's loop runs), later ones wait.
The whole path, with Ray, MLflow and a driver process, is test_search's SIGTERM test."""

from __future__ import annotations

import json
import logging
import os
import signal
from pathlib import Path

import pytest

from astune.tuning.lifecycle.stop import (
    RAY_TUNE_LOGGER,
    TUNE_SIGINT_VARIABLE,
    SearchStopped,
    fit_or_stop,
    stop_on_signals,
    trials_stopped,
)

RESUME = "python -m astune search --dataset sst5 --name exp --resume"
WHERE = dict(experiment="exp", resume=RESUME)  # the command: tests/test_resume_settings.py
FIT = dict(WHERE, close_killed=lambda: None)  # no Ray started here: nothing to lose


class SignalledTuner:
    """Stands in for ``ray.tune.Tuner`` (whose loop is test_search's): ``fit`` sends this
    process ``signals`` and returns ``results`` (None: what a fit cut short hands back)."""

    def __init__(self, *signals: int, results: list | None = None):
        self.signals, self.results, self.fitted = signals, results, False

    def fit(self) -> list | None:
        self.fitted = True
        for sig in self.signals:
            os.kill(os.getpid(), sig)
        return self.results


def test_a_signal_during_the_start_up_waits_for_the_step_under_way():
    with stop_on_signals() as stop:
        os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt in the middle of a write
        os.kill(os.getpid(), signal.SIGTERM)  # later ones: the stop is under way
        assert (stop.received, stop.exit_code) == (signal.SIGINT, 130)
        with pytest.raises(SearchStopped) as resumed:
            stop.check(**WHERE, resumable=True)
        with pytest.raises(SearchStopped) as new:
            stop.check(**WHERE, resumable=False)
    assert str(resumed.value).startswith("search 'exp' stopped by SIGINT (before its trials")
    assert str(resumed.value).endswith(RESUME)
    assert str(new.value) == (
        "search 'exp' stopped by SIGINT (before its first trial started; nothing ran); start it "
        "again with the same command"
    )
    assert resumed.value.resumable and not new.value.resumable
    assert resumed.value.exit_code == 130


def test_a_signal_noted_before_fit_stops_the_search_without_fitting():
    tuner = SignalledTuner()
    with stop_on_signals() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(SearchStopped) as stopped:
            fit_or_stop(tuner, stop, **FIT, resumable=True)
    assert not tuner.fitted and stopped.value.signal_name == "SIGTERM"
    assert stopped.value.exit_code == 143 and str(stopped.value).endswith(RESUME)


def test_a_signal_before_tunes_loop_runs_ends_fit_and_the_search_says_how_to_resume():
    tuner = SignalledTuner(signal.SIGINT)  # Tune's SIGUSR1 handler is not installed
    with stop_on_signals() as stop:
        with pytest.raises(SearchStopped) as stopped:
            fit_or_stop(tuner, stop, **FIT, resumable=True)
        assert stop.deferred  # the search's end is written whole
    assert tuner.fitted
    assert str(stopped.value).startswith("search 'exp' stopped by SIGINT (0 trials finished;")
    assert str(stopped.value).endswith(RESUME)


def test_a_new_search_whose_fit_ended_before_tune_saved_it_has_nothing_to_resume():
    tuner = SignalledTuner(signal.SIGTERM)
    with stop_on_signals() as stop:
        with pytest.raises(SearchStopped) as stopped:
            fit_or_stop(tuner, stop, **FIT, resumable=False, saved=lambda: False)
    assert not stopped.value.resumable and "nothing ran" in str(stopped.value)
    with stop_on_signals() as stop:  # saved: the resume line, as when Tune's loop stopped it
        with pytest.raises(SearchStopped) as stopped:
            fit_or_stop(tuner, stop, **FIT, resumable=False, saved=lambda: True)
    assert stopped.value.resumable and str(stopped.value).endswith(RESUME)


def trial_result(
    folder: Path, *, done: bool = False, checkpoint: bool = False, error: bool = False
):
    """Ray's ``Result`` of a trial folder as Tune writes one (``Result.from_path``): its record,
    its checkpoint folder if ``checkpoint``, its pickled error if ``error``."""
    import pickle

    from ray.tune import Result

    folder.mkdir()
    name = "checkpoint_000000" if checkpoint else None
    record = {"objective": 0.5, "training_iteration": 1, "done": done, "checkpoint_dir_name": name}
    (folder / "result.json").write_text(json.dumps(record) + "\n")
    if checkpoint:
        (folder / name).mkdir()
    if error:
        (folder / "error.pkl").write_bytes(pickle.dumps(RuntimeError("boom")))
    return Result.from_path(folder)


@pytest.mark.parametrize(
    "checkpoints, how",
    [
        ((), "2 without one yet restart from scratch"),
        ((1,), "1 with a checkpoint resumes from it, 1 without one yet restarts from scratch"),
        ((1, 2), "2 with a checkpoint resume from it"),
    ],
)
def test_the_stop_line_says_which_stopped_trials_resume_from_a_checkpoint(
    tmp_path, checkpoints, how
):
    """A finished trial, an errored one (its own line said so), and two stopped trials, with a
    checkpoint or not (the search's default writes one after 10 minutes)."""
    results = [trial_result(tmp_path / "done", done=True, checkpoint=True)]
    results.append(trial_result(tmp_path / "failed", checkpoint=True, error=True))
    for i in (1, 2):
        results.append(trial_result(tmp_path / f"stopped{i}", checkpoint=i in checkpoints))
    assert [r.checkpoint is not None for r in results[2:]] == [i in checkpoints for i in (1, 2)]
    assert trials_stopped(results) == f"1 trial finished; 2 unfinished, KILLED in MLflow: {how}"
    assert trials_stopped(None) == (  # fit ended before Tune's loop: nothing known of them
        "0 trials finished; the others are KILLED in MLflow and resume from their last "
        "checkpoint, or from scratch without one"
    )
    assert trials_stopped(results[:1]) == "1 trial finished"


def test_during_tunes_loop_the_first_signal_is_tunes_graceful_stop_and_later_ones_wait():
    asked: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: asked.append(signum))
    try:  # as Tune's loop does: a handler of SIGUSR1 that ends the trials and returns
        tuner = SignalledTuner(signal.SIGTERM, signal.SIGINT, results=[])
        with stop_on_signals() as stop:
            with pytest.raises(SearchStopped) as stopped:
                fit_or_stop(tuner, stop, **FIT, resumable=True)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert asked == [signal.SIGUSR1]
    assert stopped.value.signal_name == "SIGTERM" and stopped.value.exit_code == 143


def test_a_fit_without_a_signal_hands_back_its_results_and_the_handlers_come_back():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    variable = os.environ.get(TUNE_SIGINT_VARIABLE)
    with stop_on_signals() as stop:
        assert os.environ[TUNE_SIGINT_VARIABLE] == "1"  # Tune leaves SIGINT to the handler
        assert fit_or_stop(SignalledTuner(results=["r"]), stop, **FIT, resumable=True) == ["r"]
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert os.environ.get(TUNE_SIGINT_VARIABLE) == variable


def test_ray_tunes_advice_on_resuming_and_skipping_the_stop_is_kept_off_the_console(caplog):
    """Ray Tune names Tuner.restore (not how a search resumes) and a second signal to skip the
    graceful stop (here it waits): within the stop's block neither line is logged."""
    tune_logger = logging.getLogger(RAY_TUNE_LOGGER)
    with caplog.at_level(logging.WARNING, logger=RAY_TUNE_LOGGER):  # whatever Ray set it to
        with stop_on_signals():
            tune_logger.warning(
                "Experiment has been interrupted.\nResume experiment with: "
                'Tuner.restore(path="/x", trainable=...)'
            )
            tune_logger.warning("Stop signal received, ending Ray Tune run. Press CTRL+C to skip.")
            tune_logger.warning("Trials did not complete: [t1]")
        tune_logger.warning('after the block: Tuner.restore(path="/x")')
    assert [r.getMessage() for r in caplog.records] == [
        "Trials did not complete: [t1]",
        'after the block: Tuner.restore(path="/x")',
    ]
