"""On ``--resume``: what a search's trials reported that MLflow lacks, written from Ray's record.

Ray keeps every result a trial reported (``result.json`` in the trial's folder on the storage
path) whether or not the tracking server took it: a server that was away while trials ran, or
a driver killed with writes still held (:mod:`astune.store.outbox`), leaves runs without some
evaluations, without their final metrics, still RUNNING, or missing altogether. Resuming the
search writes each of those once: an evaluation whose step the run already has is not written
again, so there are no duplicate points or runs. A missed result that said its trial restarted
from its start (an unreadable checkpoint) tags the run as the live driver would have.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from astune.store.conventions import STOPPED_EARLY_TAG
from astune.store.values import result_metrics
from astune.store.writer import SearchTracker


@dataclass(frozen=True)
class TrialRecord:
    """One trial as Ray holds it: its results in the order reported (dicts as the trainable
    reported them, Ray's keys included; the last of a finished trial has ``final``)."""

    trial_id: str
    config: Mapping[str, Any]
    name: str
    results: list[dict[str, Any]]
    completed: bool  # Ray holds it as TERMINATED: it will not run again


@dataclass
class Backfilled:
    """What :func:`backfill_trials` wrote: runs created, evaluations logged, final metrics
    logged, runs set FINISHED."""

    runs: int = 0
    evaluations: int = 0
    finals: int = 0
    finished: list[str] = field(default_factory=list)

    @property
    def anything(self) -> bool:
        return bool(self.runs or self.evaluations or self.finals or self.finished)


def backfill_trials(tracker: SearchTracker, records: Iterable[TrialRecord]) -> Backfilled:
    """Write, for each trial that reported anything, what its run lacks (see the module)."""
    done = Backfilled()
    for record in records:
        if record.results:
            _backfill(tracker, record, done)
    return done


def _backfill(tracker: SearchTracker, record: TrialRecord, done: Backfilled) -> None:
    run_id = tracker.find_trial_run(record.trial_id)
    if run_id is None:
        run_id = tracker.open_trial_run(record.trial_id, record.config, record.name)
        done.runs += 1
    logged = {m.step for m in tracker.client.get_metric_history(run_id, "objective")}
    final = None
    for result in record.results:
        if result.get("final"):
            final = result
            continue
        step = result_metrics(result)[1]
        # a step MLflow holds is not logged again, but its tags are (a restart's first report)
        if tracker.log_result(run_id, result, after=step if step in logged else -1):
            logged.add(step)
            done.evaluations += 1
    if not record.completed:
        return  # Ray runs it again: the live search logs the rest
    run = tracker.client.get_run(run_id)
    if final is not None and "best_objective" not in run.data.metrics:
        tracker.log_final(run_id, final)
        done.finals += 1
    if run.info.status != "FINISHED":
        tags = None if final is not None else {STOPPED_EARLY_TAG: "true"}
        tracker.close_trial_run(run_id, "FINISHED", tags)
        done.finished.append(run_id)
