"""Batch sources of the training loop: the epoch's micro-batches, each with its :class:`Visit`.

:class:`ShuffledBatches` gives every sample of a seeded shuffled order; :class:`SkipBatches`
(AS-Skip) fills the micro-batches from the samples its plan keeps. The loop treats both alike:
``epoch(pos)`` yields ``(batch, visit)`` and advances ``pos.batch``; ``after_forward`` sees each
computed micro-batch's mask; ``skipped_rows`` gives the rows a visit left out (None: the source
never skips); ``record`` and ``counts`` add the source's figures to the evaluation and final
records.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from astune.config import SpeedSettings
from astune.data.encoding import EncodedSplit
from astune.losses.as_softmax import MaskStats
from astune.skip import ASSkip, Visit
from astune.training.buckets import group_by_length
from astune.training.progress import Position, Window

if TYPE_CHECKING:
    from astune.data.media_encoding import TrainData

ORDER_SEED_STRIDE = 1_000_003
"""Mixes the epoch into the seed of the epoch's order (a prime, so epochs do not collide)."""

Batch = dict[str, Tensor]
SKIP_RECORD_KEYS = ("skipped_ratio", "samples_rechecked", "rechecks_active")
"""What AS-Skip's source adds to the evaluation records (the last two to the final one too)."""
Probe = Callable[[Tensor], MaskStats]
"""The loss's mask of training samples ``index`` ``(B,)`` by a forward pass without gradient."""


def epoch_order(n: int, seed: int, epoch: int) -> Tensor:
    """The epoch's seeded permutation of ``range(n)``."""
    gen = torch.Generator().manual_seed(seed * ORDER_SEED_STRIDE + epoch)
    return torch.randperm(n, generator=gen)


class ShuffledBatches:
    """Every sample once per epoch, in a seeded shuffled order, ``batch_size`` at a time;
    with ``length_window`` > 0 grouped by length within that many micro-batches (text only)."""

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

    def after_forward(self, visit: Visit, stats: MaskStats | None, samples_seen: int) -> None:
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


class SkipBatches(ShuffledBatches):
    """AS-Skip: the epoch's order, planned by :class:`ASSkip`; micro-batches are filled from
    the kept samples (an epoch that keeps none yields one empty visit, batch None). ``probe``
    re-checks the samples due for it, ``batch_size`` at a time, when an epoch is planned (None:
    they are trained on directly)."""

    def __init__(
        self,
        data: TrainData,
        *,
        batch_size: int,
        seed: int,
        speed: SpeedSettings,
        total_samples: int,
        device: torch.device,
        probe: Probe | None = None,
        length_window: int = 0,
    ):
        super().__init__(data, batch_size=batch_size, seed=seed, length_window=length_window)
        self.skip = ASSkip(
            self.n,
            keep=speed.skip_keep,
            anneal=speed.skip_anneal,
            total_samples=total_samples,
            seed=seed,
            backoff=speed.skip_backoff,
            device=device,
        )
        self.probe = probe

    def epoch(self, pos: Position) -> Iterator[tuple[Batch | None, Visit]]:
        order = epoch_order(self.n, self.seed, pos.epoch)
        start = pos.epoch * self.n
        probe = self.probe
        recheck = None if probe is None else (lambda index: self.recheck(probe, index, pos, start))
        plan = self.skip.plan_for(pos.epoch, order, start, recheck=recheck)
        if self.lengths is not None:  # the kept samples regrouped among the kept positions
            kept_at = torch.nonzero(plan).flatten()
            order = order.clone()
            order[kept_at] = self.grouped(order[kept_at], pos.epoch)
        for visit in self.skip.visits(order, plan, batch_size=self.batch_size, first=pos.batch):
            pos.batch += 1
            batch = self.data.collate("train", visit.index) if len(visit.index) else None
            yield batch, visit

    def recheck(self, probe: Probe, index: Tensor, pos: Position, samples_seen: int) -> None:
        """Probe ``index`` ``(D,)`` in micro-batches and record what each found; count them."""
        if len(index) == 0:
            return
        for chunk in index.split(self.batch_size):
            self.record_stats(chunk, probe(chunk), samples_seen)
        pos.rechecked += len(index)
        pos.rechecks_active += int((~self.skip.zero[index.to(self.skip.device)]).sum())

    def after_forward(self, visit: Visit, stats: MaskStats | None, samples_seen: int) -> None:
        """Record which computed samples had zero loss (no device sync)."""
        if stats is not None:
            self.record_stats(visit.index, stats, samples_seen)

    def record_stats(self, index: Tensor, stats: MaskStats, samples_seen: int) -> None:
        self.skip.record(
            index, *stats.rows(), samples_seen=samples_seen, headroom=stats.headroom_rows()
        )

    def skipped_rows(self, visit: Visit) -> Tensor:
        return self.skip.skipped_rows(visit.skipped)

    def record(self, since_eval: Window) -> dict[str, float]:
        """``skipped_ratio``: the share of the samples visited since the last evaluation that
        were left out."""
        return {"skipped_ratio": 1.0 - since_eval.computed / max(1, since_eval.samples)}

    def counts(self, pos: Position) -> dict[str, int]:
        """``samples_rechecked``: zero-loss samples re-checked by a forward pass without
        gradient; ``rechecks_active``: of those, the ones found active (then trained on)."""
        return {"samples_rechecked": pos.rechecked, "rechecks_active": pos.rechecks_active}

    def state_dict(self) -> dict[str, Any]:
        return self.skip.state_dict()

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        if state is not None:
            self.skip.load_state_dict(state)


def batch_source(
    data: TrainData,
    *,
    batch_size: int,
    seed: int,
    speed: SpeedSettings,
    total_samples: int,
    device: torch.device,
    probe: Probe | None = None,
    length_window: int = 0,
) -> ShuffledBatches:
    """AS-Skip's source when ``speed.as_skip``, else the plain shuffled one. ``probe``: AS-Skip's
    re-check, used when ``speed.skip_probe``; ``length_window``: micro-batches grouped by
    length (0: none)."""
    if not speed.as_skip:
        return ShuffledBatches(data, batch_size=batch_size, seed=seed, length_window=length_window)
    return SkipBatches(
        data,
        batch_size=batch_size,
        seed=seed,
        speed=speed,
        total_samples=total_samples,
        device=device,
        probe=probe if speed.skip_probe else None,
        length_window=length_window,
    )


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
