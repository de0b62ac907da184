"""Public hooks around the phases of the training loop, for timing and watching a run.

Subclass :class:`LoopHooks` and pass instances in ``fit(..., hooks=[...])`` or
``Run(..., hooks=[...])``: each method is called with the run, hooks in the order given, before
and after the phase it names. The loop computes the same
with or without hooks; a hook that wants device time synchronises itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import Tensor

if TYPE_CHECKING:
    from astune.speed.skip import Visit


class LoopHooks:
    """No-op hooks; override what you need. ``run`` is the :class:`~astune.training.Run`."""

    def on_micro_step_start(self, run, batch: dict[str, Tensor] | None, visit: Visit) -> None:
        """Before a micro-batch's forward and backward (``batch`` None: all skipped)."""

    def on_micro_step_end(self, run, batch: dict[str, Tensor] | None, visit: Visit) -> None:
        """After it; ``run.loss_fn.last_stats`` holds its mask counts when it computed."""

    def on_recheck_start(self, run, index: Tensor) -> None:
        """Before AS-Skip re-checks training samples ``index`` by a forward pass without
        gradient (part of planning an epoch; counted in ``train_seconds``)."""

    def on_recheck_end(self, run, index: Tensor) -> None:
        """After it."""

    def on_optimizer_step_start(self, run) -> None:
        """Before an optimizer step; ``run.window`` holds the accumulated window."""

    def on_optimizer_step_end(self, run) -> None:
        """After it (and after AS-Speed's update)."""

    def on_evaluate_start(self, run) -> None:
        """Before a validation evaluation (with its checkpoint and callback)."""

    def on_evaluate_end(self, run) -> None:
        """After it."""

    def on_test_start(self, run) -> None:
        """Before the best weights are scored on the test split, at the end of the run."""

    def on_test_end(self, run) -> None:
        """After it."""


class ProgressBar(LoopHooks):
    """A tqdm bar on stderr, in samples visited (opened at the run's first micro-batch)."""

    def __init__(self) -> None:
        self.bar = None

    def on_micro_step_end(self, run, batch: dict[str, Tensor] | None, visit: Visit) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=run.total_samples,
                initial=run.pos.samples - visit.visited,
                unit="sample",
                desc=f"train {run.spec.name}",
            )
        self.bar.update(visit.visited)

    def on_test_start(self, run) -> None:
        self.close()

    def close(self) -> None:
        """Close the bar (also when the run raised before its test split); idempotent."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
