"""The compiled step of ``--compile``: the model's forward and the loss through ``torch.compile``
as one graph, with the counts the loop sums (the backward is compiled by AOTAutograd with it).

On a CUDA card the model runs as CUDA graphs (``mode="reduce-overhead"``): a 6-layer MiniLM
step at batch 16 is bound by the host's kernel launches, and a graph launches them all at once.
A graph has fixed shapes, so each micro-batch is padded to the run's batch size and its length
to one of a few buckets (:func:`length_bucket`), and a handful of graphs serve a whole run; a
padded row weighs 0 in the loss and counts in nothing, and the per-row results are cut back to
the batch's own rows before anything reads them. On the CPU the step is compiled with dynamic
shapes and nothing is padded. An AS loss reads delta as a tensor input
(:meth:`~astune.losses.as_base.ASLossModule.delta_arg`), so one graph serves every delta of a
warm-up or an adaptive schedule; under the compiler it takes its torch function, which inductor
fuses, not the Triton kernel.

The model itself is not replaced: checkpoints, evaluation and export read ``run.model``, so a
run written compiled resumes eager and the other way round. Inductor keeps what it compiled in
its on-disk cache (``TORCHINDUCTOR_CACHE_DIR``, by default under the temp folder), which every
trial on a node shares.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from astune._device import to_device
from astune.losses.as_base import MaskStats
from astune.training.compute import Computed, device_inputs, loss_counts
from astune.training.evaluate import step_margin_sums

SMALLEST_BUCKET = 16
"""The shortest padded length on a card; buckets double from it up to the run's max_length."""
PAD_VALUES = {"input_ids": 0, "attention_mask": 0, "token_type_ids": 0, "labels": -100}
"""What a padded token or row holds, by batch key (the attention mask of a padded row is set
to its first token: a row that attends to nothing gives NaN, whose zero gradient is NaN too)."""


def length_bucket(length: int, max_length: int) -> int:
    """The padded length of a batch of ``length`` tokens: the smallest power of two from
    :data:`SMALLEST_BUCKET` that holds it, at most ``max_length``."""
    bucket = SMALLEST_BUCKET
    while bucket < length:
        bucket *= 2
    return min(bucket, max(max_length, length))


def padded(batch: dict[str, Tensor], *, rows: int, length: int) -> dict[str, Tensor]:
    """``batch``'s text tensors ``(B, T)`` padded to ``(rows, length)`` with
    :data:`PAD_VALUES`, on the host; other keys as they are."""
    out = dict(batch)
    for key, value in batch.items():
        if key not in PAD_VALUES or value.dim() < 1 or value.is_floating_point():
            continue
        shape = (rows, length) if value.dim() == 2 else (rows,)
        grown = value.new_full(shape, PAD_VALUES[key])
        grown[tuple(slice(0, n) for n in value.shape)] = value
        out[key] = grown
    if "attention_mask" in out:
        out["attention_mask"][len(batch["attention_mask"]) :, 0] = 1
    if "labels" in batch and batch["labels"].is_floating_point():  # multi-label 0/1 rows
        labels = batch["labels"]
        out["labels"] = torch.cat([labels, labels.new_zeros(rows - len(labels), *labels.shape[1:])])
    return out


class StepOut(NamedTuple):
    """What one compiled micro-step gives the loop: a :class:`Computed` of the batch's own rows
    and the margins' ``(sum, count)`` (None: not asked for)."""

    computed: Computed
    margins: tuple[Tensor, Tensor] | None


class CompiledStep:
    """The run's forward and loss through one compiled function; :meth:`compile_seconds`
    estimates what compiling cost (the micro-steps that met a new shape, less a typical one).

    ``margins``: also give the p-margins' sums (an AS loss's delta schedule and its record);
    ``rows``: also give each row's active, masked and headroom values (AS-Skip reads them)."""

    def __init__(
        self,
        model: nn.Module,
        loss_fn: nn.Module,
        *,
        device: torch.device,
        dtype: torch.dtype | None,
        batch_size: int,
        max_length: int,
        margins: bool,
        rows: bool,
    ):
        self.cuda = device.type == "cuda"
        self.model, self.loss_fn = model, loss_fn
        self.device, self.dtype = device, dtype
        self.batch_size, self.max_length = batch_size, max_length
        self.margins, self.rows = margins, rows
        # On a card: static shapes, one CUDA graph each; on the CPU: one graph for every shape.
        self.compiled: Callable[..., Any] = torch.compile(
            self._forward_and_loss,
            mode="reduce-overhead" if self.cuda else None,
            dynamic=not self.cuda,
        )
        self.shapes: set[tuple[int, ...]] = set()
        self._new_shape = False
        self._steps: list[tuple[float, bool]] = []  # (seconds, met a new shape)

    def __call__(self, batch: dict[str, Tensor], *, weight: Tensor | None) -> StepOut:
        """Forward and loss of ``batch`` (``weight`` ``(B,)`` per sample, None: 1)."""
        rows = len(batch["labels"])
        if self.cuda and "input_ids" in batch:
            length = length_bucket(batch["input_ids"].shape[1], self.max_length)
            batch = padded(batch, rows=max(rows, self.batch_size), length=length)
            torch.compiler.cudagraph_mark_step_begin()
        shape = tuple(batch["input_ids"].shape) if "input_ids" in batch else ()
        self._new_shape = shape not in self.shapes
        self.shapes.add(shape)
        padded_rows = len(batch["labels"])
        real = to_device(torch.arange(padded_rows) < rows, self.device)
        weight = self._padded_weight(weight, real, rows)
        inputs = device_inputs(self.model, batch, self.device)
        labels = to_device(batch["labels"], self.device)
        out = self.compiled(inputs, labels, weight, real)
        return self._cut(out, rows, padded_rows)

    def _padded_weight(self, weight: Tensor | None, real: Tensor, rows: int) -> Tensor:
        """Float32 on the device, one a padded row ``(len(real),)``: ``weight`` (None: 1) on
        the ``rows`` real rows (``real``), 0 on the padded ones."""
        if weight is None:
            return real.float()
        weight = weight.to(self.device, torch.float32, non_blocking=True)
        return torch.cat([weight, weight.new_zeros(len(real) - rows)])

    def _forward_and_loss(
        self, inputs: dict[str, Tensor], labels: Tensor, weight: Tensor, real: Tensor
    ) -> tuple[Tensor | None, ...]:
        """The traced step: logits, the weighted loss, the counts of real rows, the margins'
        sums and the per-row values asked for; rows are flat ``(M,)``, ``M = B * T`` or ``B``."""
        with torch.autocast(self.device.type, dtype=self.dtype, enabled=self.dtype is not None):
            logits = self.model(**inputs).logits
        computed = loss_counts(self.loss_fn, logits, labels, weight=weight)
        stats = computed.stats
        real_rows = real.repeat_interleave(logits[..., 0].numel() // len(labels))
        if stats is not None:
            active, masked = stats.rows()
        elif labels.is_floating_point():  # multi-label: every real row counts
            active, masked = real_rows, torch.zeros_like(real_rows)
        else:
            active = labels.reshape(-1) != -100
            masked = torch.zeros_like(active)
        active, masked = active & real_rows, masked & real_rows
        counts = torch.stack([active.sum(), masked.sum()])
        sums = step_margin_sums(stats, logits, labels) if self.margins else (None, None)
        per_row = (None, None, None)
        if self.rows and stats is not None:
            per_row = (active, masked, stats.headroom_rows())
        return (computed.loss, counts, computed.sample_losses, *sums, *per_row)

    @staticmethod
    def _cut(out: tuple[Tensor | None, ...], rows: int, padded_rows: int) -> StepOut:
        """The traced step's results, per-row ones cut to the batch's own ``rows``."""
        loss, counts, sample_losses, margin_sum, margin_count, active, masked, headroom = out
        stats = None
        if active is not None:
            keep = rows * (len(active) // padded_rows)
            active, masked = active[:keep], masked[:keep]
            headroom = None if headroom is None else headroom[:keep]
            stats = MaskStats(
                ~active, lambda: masked, None if headroom is None else (lambda: headroom)
            )
        margins = None if margin_sum is None else (margin_sum, margin_count)
        return StepOut(Computed(loss, counts, stats, sample_losses[:rows]), margins)

    def timed(self, seconds: float) -> None:
        """Note a micro-step's wall ``seconds`` (forward, loss, backward) after its call."""
        self._steps.append((seconds, self._new_shape))
        self._new_shape = False

    def compile_seconds(self) -> float:
        """The micro-steps that met a new shape (where torch compiled), less the median of
        the others for each; 0 before any step."""
        others = [s for s, new in self._steps if not new]
        typical = statistics.median(others) if others else 0.0
        return sum(max(0.0, s - typical) for s, new in self._steps if new)
