"""The compiled forward of ``--compile``: ``torch.compile`` of the model, the loss eager after it.

On a CUDA card the model runs as CUDA graphs (``mode="reduce-overhead"``): a 6-layer MiniLM
step at batch 16 is bound by the host's kernel launches, and a graph launches them all at once.
A graph has fixed shapes, so each micro-batch is padded to the run's batch size and its length
to one of a few buckets (:func:`length_bucket`), and a handful of graphs serve a whole run; the
logits are cut back to the batch's own rows and tokens before the loss. On the CPU the model is
compiled once with dynamic shapes and nothing is padded.

The model itself is not replaced: checkpoints, evaluation and export read ``run.model``, so a
run written compiled resumes eager and the other way round. Inductor keeps what it compiled in
its on-disk cache (``TORCHINDUCTOR_CACHE_DIR``, by default under the temp folder), which every
trial on a node shares.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from astune.training.compute import forward

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


class CompiledForward:
    """The run's forward through the compiled model; :meth:`compile_seconds` estimates what
    compiling cost (the micro-steps that met a new shape, less a typical one)."""

    def __init__(self, model: nn.Module, *, device: torch.device, batch_size: int, max_length: int):
        self.cuda = device.type == "cuda"
        self.model, self.batch_size, self.max_length = model, batch_size, max_length
        # On a card: static shapes, one CUDA graph each; on the CPU: one graph for every shape.
        self.compiled: Callable[..., Any] = torch.compile(
            model, mode="reduce-overhead" if self.cuda else None, dynamic=not self.cuda
        )
        self.shapes: set[tuple[int, ...]] = set()
        self._new_shape = False
        self._steps: list[tuple[float, bool]] = []  # (seconds, met a new shape)

    def __call__(
        self, batch: dict[str, Tensor], *, device: torch.device, dtype: torch.dtype | None
    ) -> tuple[Tensor, Tensor]:
        """:func:`~astune.training.compute.forward` of the compiled model: logits and labels
        of ``batch``'s own rows and tokens."""
        rows, length = batch["input_ids"].shape if "input_ids" in batch else (None, None)
        if self.cuda and rows is not None:
            length_to = length_bucket(length, self.max_length)
            batch = padded(batch, rows=max(rows, self.batch_size), length=length_to)
            torch.compiler.cudagraph_mark_step_begin()
        shape = tuple(batch["input_ids"].shape) if rows is not None else ()
        self._new_shape = shape not in self.shapes
        self.shapes.add(shape)
        logits, labels = forward(self.compiled, batch, device=device, dtype=dtype)
        if rows is not None and logits.shape[0] != rows:
            logits, labels = logits[:rows], labels[:rows]
        if rows is not None and logits.dim() == 3 and logits.shape[1] != length:
            logits, labels = logits[:, :length], labels[:, :length]
        return logits, labels

    def timed(self, seconds: float) -> None:
        """Note a micro-step's wall ``seconds`` (forward, loss, backward) after its forward."""
        self._steps.append((seconds, self._new_shape))
        self._new_shape = False

    def compile_seconds(self) -> float:
        """The micro-steps that met a new shape (where torch compiled), less the median of
        the others for each; 0 before any step."""
        others = [s for s, new in self._steps if not new]
        typical = statistics.median(others) if others else 0.0
        return sum(max(0.0, s - typical) for s, new in self._steps if new)
