"""The rows of a single-label loss call: ``(N, C)`` or token-level ``(N, T, C)`` logits and
their integer labels, checked and flattened to ``(M, C)`` and ``(M,)``."""

from __future__ import annotations

from torch import Tensor


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
