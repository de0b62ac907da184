"""Iterating over a split in batches: shared by tokenized text and per-batch decoded media."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from astune._checks import check_int


class Batching:
    """Mixin: ``batches`` and ``num_batches`` over ``self.splits`` through ``self.collate``."""

    splits: dict

    def collate(self, split: str, indices: torch.Tensor | Sequence[int]) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def batches(
        self,
        split: str,
        batch_size: int,
        *,
        shuffle: bool = False,
        generator: torch.Generator | None = None,
        drop_last: bool = False,
        order: torch.Tensor | None = None,
    ) -> Iterator[dict[str, torch.Tensor]]:
        """Yield the batches of ``split`` (see ``collate``), in a ``generator``-seeded order if
        ``shuffle``, or in ``order`` (row indices, e.g. by length so that batches pad little)."""
        check_int("batch_size", batch_size, 1)
        n = len(self.splits[split])
        if order is not None and shuffle:
            raise ValueError("batches: give shuffle or an order, not both")
        if order is None:
            order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
        for start in range(0, n, batch_size):
            chunk = order[start : start + batch_size]
            if drop_last and len(chunk) < batch_size:
                return
            yield self.collate(split, chunk)

    def num_batches(self, split: str, batch_size: int, *, drop_last: bool = False) -> int:
        n = len(self.splits[split])
        return n // batch_size if drop_last else -(-n // batch_size)
