"""A training run (`astune train`, ``astune.train``) told to stop: SIGTERM (what Slurm and
Kubernetes send) or Ctrl-C (SIGINT).

The first signal is noted, and the run stops after the optimizer step under way (a hook of the
loop), so that no checkpoint or record is cut in half: :class:`TrainingStopped` says in one line
where the run stopped and what its folder keeps; the command prints it and exits with 128 + the
signal's number (143, 130);
``astune train --output-dir DIR --resume`` goes on from the last checkpoint. A second signal
stops it at once (Python's KeyboardInterrupt), for a step that does not end.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

from astune._signals import stop_signals_to
from astune.training.hooks import LoopHooks


class TrainingStopped(Exception):
    """The run stopped on a signal; its message is the one line the CLI prints."""

    def __init__(self, message: str, *, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class StopAfterStep(LoopHooks):
    """Ends the run with :class:`TrainingStopped` after the optimizer step during which a stop
    signal came (``received``: its number); a second signal raises KeyboardInterrupt."""

    def __init__(self) -> None:
        self.received: int | None = None

    def handle(self, signum: int, frame: object) -> None:
        if self.received is not None:
            raise KeyboardInterrupt  # asked twice: now
        self.received = signum

    def on_optimizer_step_end(self, run) -> None:
        if self.received is None:
            return
        name = signal.Signals(self.received).name
        raise TrainingStopped(
            f"stopped by {name} after optimizer step {run.pos.steps} (epoch {run.pos.epoch + 1}, "
            f"{run.pos.samples} samples seen); {run.out} keeps metrics.jsonl and the checkpoints "
            "written so far (--resume goes on from the last)",
            exit_code=128 + self.received,
        )


@contextmanager
def stop_after_step() -> Iterator[StopAfterStep]:
    """Within the block, SIGTERM and SIGINT go to the hook yielded (pass it to the run)."""
    hook = StopAfterStep()
    with stop_signals_to(hook.handle):
        yield hook
