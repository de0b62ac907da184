"""Length grouping of an epoch's micro-batches (``length_window``).

A micro-batch is padded to its longest sample, so a batch of one long and fifteen short sentences
costs what sixteen long ones cost. Grouping by length sorts the samples of every ``window``
consecutive micro-batches by length and cuts them into micro-batches again; the order of those
micro-batches within the window is shuffled (seeded by seed and epoch), so the epoch still mixes
lengths across steps. The micro-batch boundaries stay where they were: AS-Skip's spans, the
samples each step covers and a resume mid-epoch are unchanged.
"""

from __future__ import annotations

import torch
from torch import Tensor

from astune._checks import check_int

LENGTH_SEED_STRIDE = 999_983
"""Mixes the epoch into the seed of the shuffle of grouped micro-batches (a prime)."""


def group_by_length(
    samples: Tensor,
    lengths: Tensor,
    *,
    batch_size: int,
    window: int,
    seed: int,
    epoch: int,
) -> Tensor:
    """``samples`` ``(K,)`` (dataset indices, in the order they would be batched), regrouped.

    Args:
        samples: the epoch's samples in batching order; micro-batch ``b`` is
            ``samples[b * batch_size : (b + 1) * batch_size]``, before and after.
        lengths: ``(N,)`` tokens of every dataset sample.
        batch_size: samples per micro-batch.
        window: micro-batches grouped together; 0 leaves ``samples`` as they are.
        seed, epoch: the seed of the shuffle of micro-batches within each window.

    Returns:
        ``(K,)``, the same samples; a short last micro-batch stays last.
    """
    check_int("length_window", window, 0)
    if window == 0 or len(samples) <= batch_size:
        return samples
    gen = torch.Generator().manual_seed(seed * LENGTH_SEED_STRIDE + epoch)
    out: list[Tensor] = []
    for chunk in samples.split(window * batch_size):
        ranked = chunk[torch.sort(lengths[chunk], stable=True).indices]
        batches = ranked.split(batch_size)
        full = [b for b in batches if len(b) == batch_size]
        out.extend(full[i] for i in torch.randperm(len(full), generator=gen).tolist())
        out.extend(batches[len(full) :])
    return torch.cat(out)
