"""Batch sources of the training loop: the epoch's micro-batches, each with its :class:`Visit`.

:class:`ShuffledBatches` gives every sample of a seeded shuffled order; the sources that leave
samples out (AS-Skip, InfoBatch: :mod:`astune.training.leave_out`) fill the micro-batches from
the samples their plan keeps. The loop treats all alike: ``epoch(pos)`` yields ``(batch,
visit)`` and advances ``pos.batch``; ``after_forward`` sees each computed micro-batch's loss and
mask; ``skipped_rows`` gives the zero-loss rows a visit left out (None: the source never skips
them); ``record`` and ``counts`` add the source's figures to the evaluation and final records.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from astune.data.encoding import EncodedSplit
from astune.speed.skip import Visit
from astune.training.buckets import group_by_length
from astune.training.compute import Computed
from astune.training.progress import Position, Window

if TYPE_CHECKING:
    from astune.data.media_encoding import TrainData

ORDER_SEED_STRIDE = 1_000_003
"""Mixes the epoch into the seed of the epoch's order (a prime, so epochs do not collide)."""

Batch = dict[str, Tensor]
SKIP_RECORD_KEYS = ("skipped_ratio", "samples_rechecked", "rechecks_active")
"""What AS-Skip's source adds to the evaluation records (the last two to the final one too)."""
Probe = Callable[[Tensor], Computed]
"""The loss and mask of training samples ``index`` ``(B,)`` by a forward pass without
gradient."""


def epoch_order(n: int, seed: int, epoch: int) -> Tensor:
    """The epoch's seeded permutation of ``range(n)``."""
    gen = torch.Generator().manual_seed(seed * ORDER_SEED_STRIDE + epoch)
    return torch.randperm(n, generator=gen)


class ShuffledBatches:
    """Every sample once per epoch, in a seeded shuffled order, ``batch_size`` at a time;
    with ``length_window`` > 0 grouped by length within that many micro-batches (text only)."""

    reads_rows = False
    """Whether :meth:`after_forward` reads each row's mask and headroom (``Computed.stats``)."""

    def __init__(self, data: TrainData, *, batch_size: int, seed: int, length_window: int = 0):
        self.data, self.batch_size, self.seed = data, batch_size, seed
        self.n = len(data.splits["train"])
        self.length_window = length_window
        self.lengths = train_lengths(data) if length_window else None

    def grouped(self, samples: Tensor, epoch: int) -> Tensor:
        """``samples`` in batching order, grouped by length when ``length_window`` asks."""
        if self.lengths is None:
            return samples
        return group_by_length(
            samples,
            self.lengths,
            batch_size=self.batch_size,
            window=self.length_window,
            seed=self.seed,
            epoch=epoch,
        )

    def epoch(self, pos: Position) -> Iterator[tuple[Batch | None, Visit]]:
        """The micro-batches of ``pos.epoch`` from ``pos.batch`` on."""
        order = self.grouped(epoch_order(self.n, self.seed, pos.epoch), pos.epoch)
        size = self.batch_size
        for b in range(pos.batch, math.ceil(self.n / size)):
            pos.batch = b + 1
            index = order[b * size : (b + 1) * size]
            yield self.data.collate("train", index), Visit(index, len(index), order[:0])

    def after_forward(self, visit: Visit, computed: Computed, samples_seen: int) -> None:
        """Nothing to learn: every sample is computed every epoch."""

    def skipped_rows(self, visit: Visit) -> Tensor | None:
        return None

    def record(self, since_eval: Window) -> dict[str, float]:
        return {}

    def counts(self, pos: Position) -> dict[str, int]:
        """The source's own counts so far, for the evaluation and final records."""
        return {}

    def state_dict(self) -> dict[str, Any] | None:
        return None

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """The order is a function of seed and epoch: nothing to restore."""


def train_lengths(data: TrainData) -> Tensor:
    """Tokens of every training sample ``(N,)``; ValueError for data without lengths (images
    and audio, whose batches do not pad to a longest sample the same way)."""
    split = data.splits["train"]
    if not isinstance(split, EncodedSplit):
        raise ValueError(
            f"length_window groups text by length, but {data.spec.name!r} is "
            f"{data.spec.task} data; use length_window 0."
        )
    return split.lengths()
