"""Long benchmark runs in resumable pieces: a claim, so that any number of processes can share a
study's runs, and a pause at the first checkpoint past a deadline, so that a process ends near
its time and the run resumes from there next time (``fit(..., resume_from=...)``)."""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from astune.training.hooks import LoopHooks

if TYPE_CHECKING:
    from astune.training import Run


@contextlib.contextmanager
def claim(path: Path) -> Iterator[bool]:
    """Whether this process holds ``path``: an exclusive ``fcntl.flock`` on it, held for the
    block and let go when the process ends, however it ends (so a claim never outlives a crash)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True


class Paused(Exception):
    """A run stopped right after a checkpoint because its deadline had passed."""


class PauseAfter(LoopHooks):
    """Raise :class:`Paused` after the first evaluation that ends past ``deadline``
    (``time.monotonic()`` seconds), except the run's last, which its test split follows.

    For runs that write a checkpoint at every evaluation (``checkpoint_every="eval"``): the hook
    runs after the checkpoint is written, so a pause loses no training.
    """

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def on_evaluate_end(self, run: Run) -> None:
        if time.monotonic() > self.deadline and run.pos.samples < run.total_samples:
            raise Paused(f"past its deadline: paused after evaluation {run.pos.evaluations}")
