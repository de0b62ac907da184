"""Progress inside trials, between their evaluations (issue 72): each trial publishes how far it
is (samples seen of its total, its rate) to Ray's key-value store at most once a second from the
loop's optimizer-step hook, host counters only (no device sync, no report: Ray Tune's schedulers
read the evaluations alone); the driver reads it for the live table, the heartbeat lines and
MLflow's ``progress`` metric, and estimates what remains of the search."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from astune.store.estimate import duration_text, search_seconds_left
from astune.training.hooks import LoopHooks

PUBLISH_EVERY_S = 1.0
"""How often a trial publishes its progress, at most (seconds)."""


def progress_key(trial_id: str) -> str:
    return f"progress/{trial_id}"


@dataclass(frozen=True)
class TrialProgress:
    """One trial's progress: ``samples`` seen of ``total`` (its budget), at ``rate`` samples a
    second over this process's training so far, published at ``at`` (Unix seconds)."""

    samples: int
    total: int
    rate: float
    at: float

    @property
    def fraction(self) -> float:
        return min(1.0, self.samples / self.total) if self.total else 0.0

    def seconds_left(self) -> float | None:
        """Training seconds to the trial's end at its rate (None: no rate yet); evaluations
        and the test split come on top."""
        return (self.total - self.samples) / self.rate if self.rate > 0 else None

    def to_bytes(self) -> bytes:
        return json.dumps(self.__dict__).encode()

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> TrialProgress | None:
        if not raw:
            return None
        try:
            return cls(**json.loads(raw))
        except (ValueError, TypeError):
            return None


class PublishProgress(LoopHooks):
    """The trial's side: after an optimizer step (at most every :data:`PUBLISH_EVERY_S`) and
    after each evaluation, its :class:`TrialProgress` under :func:`progress_key`."""

    def __init__(self, trial_id: str, *, every: float = PUBLISH_EVERY_S):
        self.key, self.every = progress_key(trial_id), every
        self._last = 0.0
        self._start: tuple[float, int] | None = None  # (time, samples) of the first step here

    def on_optimizer_step_end(self, run: Any) -> None:
        if time.monotonic() - self._last >= self.every:
            self.publish(run)

    def on_evaluate_end(self, run: Any) -> None:
        self.publish(run)

    def publish(self, run: Any) -> None:
        from astune._private import kv_put

        now = time.monotonic()
        samples = int(run.pos.samples)
        if self._start is None:
            self._start = (now, samples)
        seconds = now - self._start[0]
        rate = (samples - self._start[1]) / seconds if seconds > 0 else 0.0
        kv_put(
            self.key, TrialProgress(samples, int(run.total_samples), rate, time.time()).to_bytes()
        )
        self._last = now


def read_progress(trial_id: str) -> TrialProgress | None:
    """What trial ``trial_id`` last published (None: nothing yet, or no Ray joined)."""
    from astune._private import kv_get

    return TrialProgress.from_bytes(kv_get(progress_key(trial_id)))


class SearchProgress:
    """The driver's view of how far a search is: when each trial started and ended, and what
    the running ones last published; :meth:`poll` reads them, :meth:`line` says it in one line
    and :meth:`remaining` estimates what is left."""

    def __init__(self, total: int | None):
        self.total = total
        self.began = time.monotonic()
        self.started: dict[str, float] = {}
        self.finished: dict[str, float] = {}  # trial id -> its seconds
        self.latest: dict[str, TrialProgress] = {}
        self.most_running = 1

    def start(self, trial_id: str) -> None:
        self.started.setdefault(trial_id, time.monotonic())

    def ran_before(self, seconds: dict[str, float]) -> None:
        """Count the trials that ended before a resume as finished, each in its ``seconds``."""
        for trial_id, took in seconds.items():
            self.started.setdefault(trial_id, self.began)
            self.finished.setdefault(trial_id, took)

    def end(self, trial_id: str) -> None:
        began = self.started.get(trial_id)
        if began is not None and trial_id not in self.finished:
            self.finished[trial_id] = time.monotonic() - began

    def running(self) -> list[str]:
        return [t for t in self.started if t not in self.finished]

    def poll(self) -> None:
        """Read what each running trial last published."""
        running = self.running()
        self.most_running = max(self.most_running, len(running))
        for trial_id in running:
            found = read_progress(trial_id)
            if found is not None:
                self.latest[trial_id] = found

    def of(self, trial_id: str) -> tuple[str, str]:
        """A running trial's cells: its share done (``"37%"``) and its time left."""
        found = self.latest.get(trial_id)
        if trial_id in self.finished or found is None:
            return "-", "-"
        return f"{100 * found.fraction:.0f}%", duration_text(found.seconds_left())

    def remaining(self) -> float | None:
        now = time.monotonic()
        running = [(now - self.started[t], self._fraction(t)) for t in self.running()]
        pending = max(0, (self.total or 0) - len(self.started))
        return search_seconds_left(
            running=running,
            finished_seconds=list(self.finished.values()),
            pending=pending,
            concurrency=self.most_running,
        )

    def _fraction(self, trial_id: str) -> float | None:
        found = self.latest.get(trial_id)
        return None if found is None else found.fraction

    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def line(self, command: str = "search") -> str:
        """One line: elapsed, trials finished and running (each with its share done, rate and
        time left), and about what remains."""
        total = f"/{self.total}" if self.total else ""
        parts = []
        for trial_id in self.running():
            done, left = self.of(trial_id)
            found = self.latest.get(trial_id)
            rate = f" {found.rate:.0f} samples/s" if found is not None else ""
            parts.append(f"{trial_id} {done}{rate} ~{left} left")
        running = f", {len(parts)} running ({'; '.join(parts)})" if parts else ""
        return (
            f"astune {command}: {duration_text(self.elapsed())} in, {len(self.finished)}{total} "
            f"finished{running}; about {duration_text(self.remaining())} left if none stops early"
        )
