"""The rows of a loss call, checked: single-label ``(N, C)`` or token-level ``(N, T, C)`` logits
and their integer labels flattened to ``(M, C)`` and ``(M,)``; multi-label ``(N, C)`` logits and
their 0/1 targets as a bool mask of the positive classes."""

from __future__ import annotations

import torch
from torch import Tensor

from astune._device import on_host


def flatten_rows(logits: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """``(logits (M, C), labels (M,))``; ValueError on a shape other than ``(N, C)`` /
    ``(N, T, C)``, labels that do not match it, or float labels."""
    if logits.dim() not in (2, 3):
        raise ValueError(
            f"logits must have shape (N, C) or (N, T, C), but got {tuple(logits.shape)}."
        )
    if labels.shape != logits.shape[:-1]:
        raise ValueError(
            f"labels must have shape {tuple(logits.shape[:-1])} to match logits "
            f"{tuple(logits.shape)}, but got {tuple(labels.shape)}."
        )
    if labels.is_floating_point():
        raise ValueError(f"labels must be integer class indices, but got dtype {labels.dtype}.")
    return logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)


def multilabel_positives(logits: Tensor, targets: Tensor) -> Tensor:
    """The positive classes of ``targets`` (0/1: bool, int or float) as a bool ``(N, C)``
    tensor; ValueError on a shape other than ``(N, C)``, non-float logits, targets of another
    shape or values other than 0 and 1."""
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (N, C), but got {tuple(logits.shape)}.")
    if not logits.is_floating_point():
        raise ValueError(f"logits must be a float tensor, but got dtype {logits.dtype}.")
    if targets.shape != logits.shape:
        raise ValueError(
            f"targets must have the shape of logits {tuple(logits.shape)}, "
            f"but got {tuple(targets.shape)}."
        )
    if targets.dtype == torch.bool:
        return targets
    positive = targets == 1
    if not on_host(targets):  # reading the check would sync a GPU; the loop checks its data
        return positive
    binary = positive | (targets == 0)
    if not bool(binary.all()):
        bad = targets[~binary].unique()[:5].tolist()
        raise ValueError(f"targets must hold only 0 and 1, but got values {bad}.")
    return positive
