"""Multi-label AS-Softmax as one fused Triton kernel (the same loss as
:func:`astune.losses.multilabel.multilabel_as_softmax_loss`), for rows of at most
:data:`~astune.losses.as_softmax_triton.MAX_SINGLE_BLOCK` classes.

The single-label kernel's design (:mod:`astune.losses.as_softmax_triton`): the forward reads each
row and its targets once and writes the loss, the fully-masked flag, the gap
``p_t^min - p_i^max`` and the gradient; the backward scales each row's gradient by its incoming
gradient. The two masking criteria need the row's smallest positive and largest negative
probability, which the same read gives, so a row wider than one block would need a second pass
over it: such rows are left to the torch function.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from astune._checks import REDUCTIONS, check_choice
from astune.losses.as_base import MaskStats, past_threshold
from astune.losses.as_softmax_triton import (
    MAX_SINGLE_BLOCK,
    ASRows,
    forward_buffers,
    kept_for_backward,
    kernel_module,
    launch_shape,
    reduced_loss,
    scaled_gradient,
    triton_cdiv,
)
from astune.losses.catalogue import DELTA
from astune.losses.rows import multilabel_positives


def fits_one_block(num_classes: int) -> bool:
    """Whether the fused multi-label kernel takes rows of ``num_classes`` classes."""
    return num_classes <= MAX_SINGLE_BLOCK


class _TritonMultiLabelFunction(torch.autograd.Function):
    """Rows ``(N, C)`` and positives (bool ``(N, C)``) -> (loss, fully_masked ``(N,)``,
    gap ``(N,)``)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx, logits: Tensor, positive: Tensor, delta: float, reduction: str, overwrite: bool
    ):
        kernels = kernel_module(logits.device, logits.dtype)
        ctx.set_materialize_grads(False)
        reduced = reduction != "none"
        logits, grad, rows, masked, gap = forward_buffers(ctx, logits, overwrite, reduced)
        positive = positive.contiguous().view(torch.int8)
        n_rows, n_cols = logits.shape
        store_grad = ctx.needs_input_grad[0]
        shape = launch_shape(n_cols)  # one block a row: callers check fits_one_block
        shape.pop("SINGLE")
        if n_rows:
            kernels.multilabel_as_forward[(triton_cdiv(n_rows, shape["BLOCK_M"]),)](
                logits, grad, positive, rows, masked, gap, n_rows, n_cols, logits.stride(0),
                grad.stride(0), positive.stride(0), float(delta),
                1.0 / n_rows if reduction == "mean" else 1.0, STORE_GRAD=store_grad, **shape,
            )  # fmt: skip
        scale = (1.0 / n_rows if n_rows else float("nan")) if reduction == "mean" else 1.0
        loss = reduced_loss(kernels, rows, rows, logits.dtype, scale, False) if reduced else rows
        ctx.shape = dict(shape, SINGLE=True)
        return loss, *kept_for_backward(ctx, grad if store_grad else None, masked, gap)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss: Tensor | None, *_grad_flags: Tensor | None):  # type: ignore[override]
        return scaled_gradient(ctx, grad_loss), None, None, None, None


def multilabel_rows_triton(
    logits: Tensor,
    targets: Tensor,
    delta: float,
    *,
    reduction: str = "mean",
    overwrite_logits: bool = False,
) -> ASRows:
    """The fused kernel's loss (in the dtype of ``logits``: a scalar, or ``(N,)`` for
    ``reduction="none"``), the fully-masked flags ``(N,)`` and, in ``margin``, the gap
    ``p_t^min - p_i^max`` ``(N,)`` (float32) that both criteria compare with delta.
    ``overwrite_logits`` writes the gradient over the logits' buffer: only for a caller that
    reads the logits nowhere after this call.

    Raises:
        ValueError: as :func:`~astune.losses.multilabel.multilabel_as_softmax_loss`; also rows of
            more than ``MAX_SINGLE_BLOCK`` classes, CPU logits without ``TRITON_INTERPRET=1``
            and float64 logits. RuntimeError: triton is not installed.
    """
    delta = DELTA.check(delta)
    check_choice("reduction", reduction, REDUCTIONS)
    positive = multilabel_positives(logits, targets)
    if not fits_one_block(logits.shape[1]):
        raise ValueError(
            f"kernel='triton' takes multi-label rows of at most {MAX_SINGLE_BLOCK} classes, but "
            f"got {logits.shape[1]}; use kernel='torch' for them."
        )
    loss, fully_masked, gap = _TritonMultiLabelFunction.apply(
        logits, positive, delta, reduction, overwrite_logits
    )
    return ASRows(loss, fully_masked, gap)


def multilabel_as_softmax_with_stats_triton(
    logits: Tensor,
    targets: Tensor,
    delta: float,
    *,
    reduction: str = "mean",
    overwrite_logits: bool = False,
) -> tuple[Tensor, MaskStats]:
    """:func:`multilabel_rows_triton`'s loss with the :class:`MaskStats` of the torch path:
    every row active, the fully masked ones counted, their headroom from the kernel's gaps, and
    the gaps as the p-margins the loop logs (so it need not read the logits again)."""
    loss, fully_masked, gap = multilabel_rows_triton(
        logits, targets, delta, reduction=reduction, overwrite_logits=overwrite_logits
    )
    inactive = torch.zeros(len(logits), dtype=torch.bool, device=logits.device)
    stats = MaskStats(
        inactive,
        lambda: fully_masked,
        lambda: past_threshold(gap, delta, fully_masked),
        lambda: (gap, torch.isfinite(gap)),  # a row without a positive or a negative: +inf
    )
    return loss, stats
