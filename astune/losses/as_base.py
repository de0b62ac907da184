"""What the two AS losses (single-label and multi-label) share: the counts one call gives
AS-Speed and AS-Skip (:class:`MaskStats`), the headroom past the threshold, and the module
form's delta and reduction (:class:`ASLossModule`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from astune._checks import REDUCTIONS, check_choice
from astune.losses.catalogue import DELTA


class MaskStats:
    """Counts of one loss call, in rows (a token is a row at token level).

    ``n_active`` rows are not ``ignore_index``; ``n_masked`` of them have every non-target class
    masked (zero loss). The counts are reduced on first read, so a loss call that nobody asks
    for its counts pays nothing and a GPU syncs only when they are read. ``headroom``, when the
    loss gives one, computes how far past its masking threshold each fully masked row is (see
    :meth:`headroom_rows`), also only when asked; ``margins``, when the loss computed them in its
    pass, the p-margin of every row with the rows its criterion decides, ``(values, valid)``
    (:meth:`active_margins`, :meth:`margin_sums`).
    """

    def __init__(
        self,
        inactive: Tensor,
        fully_masked: Callable[[], Tensor] | None = None,
        headroom: Callable[[], Tensor] | None = None,
        margins: Callable[[], tuple[Tensor, Tensor]] | None = None,
    ):
        self._inactive = inactive
        self._fully_masked = fully_masked
        self._headroom = headroom
        self._margins = margins

    @property
    def n_active(self) -> int:
        return self._inactive.numel() - int(self._inactive.sum())

    @property
    def n_masked(self) -> int:
        return 0 if self._fully_masked is None else int(self._fully_masked().sum())

    def rows(self) -> tuple[Tensor, Tensor]:
        """Per-row bools ``(active, masked)``, flat ``(M,)``, on the loss's device (no sync)."""
        active = ~self._inactive.reshape(-1)
        if self._fully_masked is None:
            return active, torch.zeros_like(active)
        return active, self._fully_masked().reshape(-1)

    def headroom_rows(self) -> Tensor | None:
        """Per row, flat ``(M,)`` float32: how far a fully masked row is past the masking
        threshold, in units of delta (single-label: ``(p_t - max_{i != t} p_i - delta) / delta``);
        0 for a row that is not fully masked. None: the loss gives no headroom."""
        return None if self._headroom is None else self._headroom().reshape(-1)

    def active_margins(self) -> Tensor | None:
        """The p-margins the loss's own pass computed, flat float32, exactly the rows and
        values :func:`astune.training.evaluate.p_margins` gives from the logits (single-label:
        ``p_t - max_{i != t} p_i`` of each active row; multi-label: ``p_t^min - p_i^max`` of the
        rows with a positive and a negative class); None: the loss does not give them."""
        if self._margins is None:
            return None
        values, valid = self._margins()
        return values.reshape(-1)[valid.reshape(-1)]  # boolean indexing: syncs a GPU

    def margin_sums(self) -> tuple[Tensor, Tensor] | None:
        """The sum and the count of :meth:`active_margins`, 0-dim float32 device tensors,
        without a sync (a masked sum, no boolean indexing); None: the loss gives no margins."""
        if self._margins is None:
            return None
        values, valid = self._margins()
        return masked_sums(values.reshape(-1), valid.reshape(-1))

    def counts(self) -> Tensor:
        """``[n_active, n_masked]`` as a 0-sync int64 device tensor ``(2,)``."""
        active, masked = self.rows()
        return torch.stack([active.sum(), masked.sum()])

    def __repr__(self) -> str:
        return f"MaskStats(n_active={self.n_active}, n_masked={self.n_masked})"


def masked_sums(values: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
    """The sum of float32 ``values`` ``(M,)`` where ``valid`` (bool ``(M,)``) and how many,
    0-dim float32 tensors on their device (no sync)."""
    return torch.where(valid, values, 0.0).sum(), valid.sum(dtype=torch.float32)


def past_threshold(gap: Tensor, threshold: float | Tensor, fully_masked: Tensor) -> Tensor:
    """``(gap - threshold) / threshold`` where ``fully_masked``, else 0, float32 ``(M,)``: the
    headroom of rows whose smallest target-over-rest ``gap`` ``(M,)`` passed ``threshold``."""
    headroom = (gap - threshold) / threshold
    return headroom.clamp_(min=0.0).masked_fill_(~fully_masked.reshape(-1), 0.0)


class ASLossModule(nn.Module):
    """The module form of an AS loss: ``delta`` (the catalogue's default, checked), changed
    between calls by :meth:`set_delta` (the warm-up of :class:`DeltaSchedule` does), the
    ``reduction``, and ``last_stats``, the :class:`MaskStats` of the last call."""

    def __init__(self, delta: float = DELTA.default, *, reduction: str = "mean"):
        super().__init__()
        # The same delta as a 0-dim tensor that a compiled graph reads as an input: a Python
        # float would be a constant of the graph, traced again at every change of delta.
        self.register_buffer("delta_tensor", torch.tensor(1.0), persistent=False)
        self.set_delta(delta)
        self.reduction = check_choice("reduction", reduction, REDUCTIONS)
        self.last_stats: MaskStats | None = None

    def set_delta(self, delta: float) -> None:
        """Use ``delta`` (in ``(0, 1]``) from the next call on; ValueError outside that range.
        Nothing waits for the device: the tensor form is filled in place."""
        self.delta = DELTA.check(delta)
        self.delta_tensor.fill_(self.delta)

    def delta_arg(self) -> float | Tensor:
        """The delta a call passes on: :attr:`delta_tensor` while ``torch.compile`` traces (the
        graph then serves every delta), else the float (the fused kernels take a scalar)."""
        return self.delta_tensor if torch.compiler.is_compiling() else self.delta

    def extra_repr(self) -> str:
        return f"delta={self.delta}, reduction={self.reduction!r}"
