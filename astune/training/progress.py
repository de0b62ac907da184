"""Where a run is and what it summed: the position, the accumulation windows, the LR schedule."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from astune._device import HostCopy


@dataclass
class Position:
    """Where training is, in units that survive a change of accumulation steps."""

    epoch: int = 0
    batch: int = 0  # the next micro-batch of ``epoch``
    samples: int = 0  # training examples seen (visited: AS-Skip's skipped ones count)
    computed: int = 0  # training examples that went through the model
    rechecked: int = 0  # AS-Skip: zero-loss examples re-checked by a forward pass without gradient
    rechecks_active: int = 0  # of those, the ones found active again (then trained on)
    steps: int = 0  # optimizer steps taken
    evaluations: int = 0


WINDOW_SUMS = ("loss", "active", "masked", "skipped", "margin_sum", "margin_rows")
"""What a :class:`Window` sums on the device, in the order of its ``pending`` tensor."""


@dataclass
class Window:
    """Sums over micro-batches: of an accumulation window, or since the last evaluation.

    An accumulation window sums on the device (``pending``: loss, active, masked and skipped
    rows, and the sum and count of an AS loss's margins) and the host reads them in
    :meth:`settle`, from the copy :meth:`start_read` began at its optimizer step (the loop reads
    it one step later, so nothing waits); ``samples`` (visited) and ``computed`` are host
    counts, kept per visit by the loop; ``step``, ``epoch_at_step`` and ``samples_at_step``: the
    optimizer step the window fed, and the epoch and samples seen then.
    """

    batches: int = 0
    loss: float = 0.0
    active: int = 0
    masked: int = 0
    skipped: int = 0  # rows of AS-Skip's skipped samples (counted as masked by AS-Speed)
    margin_sum: float = 0.0  # p_t - max p_i summed over the rows measured (AS losses)
    margin_rows: int = 0
    samples: int = 0
    computed: int = 0
    step: int = 0
    epoch_at_step: int = 0
    samples_at_step: int = 0
    pending: Tensor | None = None  # float64 (len(WINDOW_SUMS),) on the run's device
    _copy: HostCopy | None = None

    def add(
        self,
        loss: Tensor,
        counts: Tensor,
        skipped: Tensor | None,
        margins: tuple[Tensor, Tensor] | None = None,
    ) -> None:
        """Fold in one micro-batch: summed ``loss`` (0-dim), ``counts`` ``[active, masked]``,
        the ``skipped`` rows of its visit and the sum and count of its rows' ``margins``
        (0-dim each: :meth:`~astune.losses.as_base.MaskStats.margin_sums`)."""
        zero = torch.zeros((), dtype=torch.float64, device=counts.device)
        skipped = zero if skipped is None else skipped.double()
        margin_sum, margin_rows = (zero, zero) if margins is None else margins
        values = torch.stack(
            [loss.double(), *counts.double(), skipped, margin_sum.double(), margin_rows.double()]
        )
        self.pending = values if self.pending is None else self.pending + values
        self.batches += 1

    def add_skipped(self, skipped: Tensor) -> None:
        """Fold in the skipped rows of a visit that computed nothing."""
        values = torch.zeros(len(WINDOW_SUMS), dtype=torch.float64, device=skipped.device)
        values[WINDOW_SUMS.index("skipped")] = skipped
        self.pending = values if self.pending is None else self.pending + values

    def device_sum(self, name: str) -> Tensor:
        """One of the window's :data:`WINDOW_SUMS` as summed so far on the device, a 0-dim
        float64 tensor (no sync); zero before the first micro-batch."""
        if self.pending is None:
            return torch.zeros((), dtype=torch.float64)
        return self.pending[WINDOW_SUMS.index(name)]

    def start_read(self) -> None:
        """Start copying the device sums to the host, without waiting."""
        if self.pending is not None and self._copy is None:
            self._copy = HostCopy(self.pending)

    def settle(self) -> None:
        """Fold the device sums into the host fields: from the copy :meth:`start_read` began,
        else read now, which waits for the device (only in a
        :data:`~astune._device.SYNC_PLACES` place)."""
        if self.pending is None:
            return
        values = self.pending.tolist() if self._copy is None else self._copy.values()
        loss, active, masked, skipped, margin_sum, margin_rows = values
        self.loss += loss
        self.active += round(active)
        self.masked += round(masked)
        self.skipped += round(skipped)
        self.margin_sum += margin_sum
        self.margin_rows += round(margin_rows)
        self.pending, self._copy = None, None

    def masked_ratio(self) -> float:
        """The share of the window's rows with no gradient: fully masked, or skipped by AS-Skip
        (a skipped sample had zero loss when last computed, as AS-Speed counts it)."""
        return (self.masked + self.skipped) / max(1, self.active + self.skipped)

    def mean_margin(self) -> float | None:
        """The mean margin of the rows measured (None: none were)."""
        return self.margin_sum / self.margin_rows if self.margin_rows else None

    def skipped_rows_so_far(self) -> int:
        """The skipped rows of an open window, read for a checkpoint (one sync). A checkpoint
        follows an optimizer step or an epoch's end, so a window is open then only after an
        epoch whose every sample was skipped: its rows still go to the next AS-Speed update."""
        self.settle()
        return self.skipped

    def merge(self, other: "Window") -> None:
        """Add a settled window's row sums (samples are counted per visit)."""
        self.loss += other.loss
        self.active += other.active
        self.masked += other.masked
        self.skipped += other.skipped
        self.margin_sum += other.margin_sum
        self.margin_rows += other.margin_rows


class LinearSchedule:
    """Linear warm-up then linear decay of the learning rate, driven by samples seen.

    ``factor(samples)`` rises from ``1 / (warmup + 1)`` to 1 over the first ``warmup`` samples and
    falls to 0 at ``total`` samples (the number of optimizer steps is not known in advance under
    AS-Speed). A step uses the factor of the samples seen when its window started: the first step
    gets the full (or warm-up start) rate, the last one a positive rate.
    """

    def __init__(self, total: int, warmup_ratio: float):
        self.total = max(1, total)
        self.warmup = warmup_ratio * self.total

    def factor(self, samples: int) -> float:
        if samples < self.warmup:
            return (samples + 1) / (self.warmup + 1)
        return max(0.0, (self.total - samples) / max(1.0, self.total - self.warmup))

    def state_dict(self) -> dict[str, float]:
        return {"total": self.total, "warmup": self.warmup}
