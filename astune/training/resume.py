"""The exact-resume half of the training loop's :class:`~astune.training.Run`: its state for a
checkpoint, and the run put back where a checkpoint was written (model, optimizer, AS-Speed,
the batch source, position, best, history, RNG)."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

import torch
from torch import nn

from astune.config import TrainConfig
from astune.losses.delta import DeltaSchedule
from astune.speed.accumulation import ASSpeed
from astune.training import state as ckpt
from astune.training.batches import ShuffledBatches
from astune.training.checkpoints import Best, Checkpointer
from astune.training.optimizer_rows import pack_rows, unpack_rows
from astune.training.progress import LinearSchedule, Position, Window
from astune.training.records import RunLog


class Resumable:
    """What a checkpoint holds of a run, and restoring it; :class:`~astune.training.Run` sets
    the attributes below."""

    config: TrainConfig
    model: nn.Module
    optimizer: torch.optim.Optimizer
    lr_schedule: LinearSchedule
    speed: ASSpeed | None
    delta_schedule: DeltaSchedule | None
    batches: ShuffledBatches
    window: Window
    _in_flight: deque[Window]
    pos: Position
    best: Best
    history: list[dict[str, Any]]
    train_seconds: float
    checkpoints: Checkpointer
    log: RunLog

    def state_dict(self) -> dict[str, Any]:
        """What an exact resume needs (the checkpointer adds where the best weights are)."""
        return {
            "config": self.config.to_dict(),
            "model": ckpt.cpu_state(self.model),
            "optimizer": pack_rows(self.optimizer.state_dict()),
            "lr_schedule": self.lr_schedule.state_dict(),
            "speed": None if self.speed is None else self.speed.state_dict(),
            "delta": None if self.delta_schedule is None else self.delta_schedule.state_dict(),
            "skip": self.batches.state_dict(),
            "window_skipped": self.window.skipped_rows_so_far(),
            "position": vars(self.pos).copy(),
            **self.best.state_dict(),
            "history": self.history,
            "train_seconds": self.train_seconds,
            "rng": ckpt.rng_state(),
        }

    def restore(self, folder: Path, *, state: dict[str, Any] | None = None) -> None:
        """Continue from the checkpoint in ``folder`` exactly where it was written; ``state``:
        that checkpoint, already read by the caller (None: read here)."""
        if state is None:
            state = ckpt.read_checkpoint(folder)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(unpack_rows(state["optimizer"]))
        if self.speed is not None and state["speed"] is not None:
            self.speed.load_state_dict(state["speed"])
        # A checkpoint written before adaptive delta holds none: its delta was fixed.
        if self.delta_schedule is not None and state.get("delta") is not None:
            self.delta_schedule.load_state_dict(state["delta"])
        self.batches.load_state_dict(state.get("skip"))
        self.window = Window(skipped=state.get("window_skipped", 0))
        self._in_flight.clear()  # a checkpoint is written after every window was read
        self.pos = Position(**state["position"])
        self.history = state["history"]
        self.best = Best.from_state(state)
        self.checkpoints.restore(state, Path(folder), self.best)
        self.train_seconds = state["train_seconds"]
        self.log.rewrite(self.history)  # drops evaluations made after the checkpoint
        ckpt.set_rng_state(state["rng"])
