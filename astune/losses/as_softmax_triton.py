"""Single-label AS-Softmax as one fused Triton kernel (the same loss as
:mod:`astune.losses.as_softmax`, rows ``(M, C)`` of ``(N, C)`` or token-level ``(N, T, C)``).

The design is the one Liger-Kernel published for cross-entropy, written here from its
description: the forward reads each row once and writes the loss, the fully-masked flag, the
p-margin and the gradient of the loss; the backward only scales each row's gradient by its
incoming gradient (and skips the blocks whose scale is 1). AS-Softmax adds one per-row
threshold ``p_t - delta`` to that pass. Small class counts put many rows in one program.

No glue around it (issue 63): a mean's count of active rows is one tiny kernel before the
forward (``count_active``), the reduction one tiny kernel after it (``reduce_rows``, in a fixed
order, writing the loss in the logits' dtype), and the backward gets no zero gradients for the
flags (``set_materialize_grads(False)``) and no cast of its incoming gradient. A mean is thus
3 kernels forward and 1 backward (plus the ones ``loss.backward()`` starts from).

``kernel="triton"`` on CPU tensors runs under triton's interpreter, which needs
``TRITON_INTERPRET=1`` set before triton is imported (tests do it in a subprocess).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from astune._checks import REDUCTIONS, check_choice, check_int
from astune._private import autograd_graph_is_kept
from astune.losses.as_base import MaskStats, past_threshold
from astune.losses.catalogue import DELTA
from astune.losses.rows import flatten_rows

MAX_SINGLE_BLOCK = 8192  # widest row a program holds in registers; wider rows loop over blocks
LOOP_BLOCK = 4096  # columns per step of that loop
TILE_ELEMENTS = 2048  # rows per program for small C: about this many elements a program
MAX_ROWS_PER_PROGRAM = 128
REDUCE_BLOCK = 1024  # labels or row losses a step of the one-program count and sum
KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


class ASRows(NamedTuple):
    """One call's results: ``loss`` (reduced, or per row ``(M,)``), and per row ``(M,)``: the
    ``fully_masked`` flags (bool) and the p-margin (float32): ``p_t - max_{i != t} p_i``, or
    for multi-label rows the gap ``p_t^min - p_i^max``."""

    loss: Tensor
    fully_masked: Tensor
    margin: Tensor


def _kernels(logits: Tensor) -> Any:
    """The kernel module, once ``logits`` are known to be where triton can run."""
    return kernel_module(logits.device, logits.dtype)


def kernel_module(device: torch.device, dtype: torch.dtype = torch.float32) -> Any:
    """The kernel module for logits of ``dtype`` on ``device``: RuntimeError when triton is
    not installed, ValueError (one line) where it cannot run them."""
    try:
        from astune.losses import _as_softmax_kernels as kernels
    except ImportError as err:
        raise RuntimeError(
            f"kernel='triton' needs triton (pip install 'astune[gpu]'): {err}"
        ) from None
    if device.type != "cuda" and not kernels.INTERPRETED:
        raise ValueError(
            f"kernel='triton' needs CUDA tensors (or TRITON_INTERPRET=1 set before triton is "
            f"imported), but the logits are on {device}; use kernel='torch' there."
        )
    if dtype not in KERNEL_DTYPES:
        raise ValueError(
            f"kernel='triton' takes float32, float16 or bfloat16 logits, but got {dtype}; "
            "use kernel='torch' for it."
        )
    return kernels


def launch_shape(n_cols: int, max_single: int = MAX_SINGLE_BLOCK) -> dict[str, Any]:
    """Block sizes and warps for rows of ``n_cols`` classes: one block a row when it fits
    ``max_single`` columns (then as many rows as make about TILE_ELEMENTS), else a loop."""
    width = 1 << max(0, n_cols - 1).bit_length()
    if width <= max_single:
        rows = max(1, min(MAX_ROWS_PER_PROGRAM, TILE_ELEMENTS // width))
        shape = dict(BLOCK_M=rows, BLOCK_C=width, SINGLE=True)
    else:
        shape = dict(BLOCK_M=1, BLOCK_C=min(LOOP_BLOCK, max_single), SINGLE=False)
    elements = shape["BLOCK_M"] * shape["BLOCK_C"]
    shape["num_warps"] = min(16, max(4, elements // 512))
    return shape


class _TritonASFunction(torch.autograd.Function):
    """Rows ``(M, C)`` and labels ``(M,)`` -> (loss, fully_masked ``(M,)``, margin ``(M,)``)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx,
        logits: Tensor,
        labels: Tensor,
        delta: float,
        ignore_index: int,
        reduction: str,
        overwrite: bool,
        max_single: int,
    ):
        kernels = _kernels(logits)
        ctx.set_materialize_grads(False)  # no zero gradients made for the flags and margins
        reduced = reduction != "none"
        logits, grad, rows, masked, margin = forward_buffers(ctx, logits, overwrite, reduced)
        n_rows, n_cols = logits.shape
        store_grad = ctx.needs_input_grad[0]
        mean = reduction == "mean"
        count = torch.empty(1, dtype=torch.float32, device=logits.device) if mean else rows
        if mean:
            kernels.count_active[(1,)](labels, count, n_rows, ignore_index, BLOCK=REDUCE_BLOCK)
        shape = launch_shape(n_cols, max_single)
        if n_rows:
            kernels.as_softmax_forward[(triton_cdiv(n_rows, shape["BLOCK_M"]),)](
                logits, grad, labels, rows, masked, margin, count, n_rows, n_cols,
                logits.stride(0), grad.stride(0), float(delta), ignore_index,
                STORE_GRAD=store_grad, MEAN=mean, **shape,
            )  # fmt: skip
        loss = reduced_loss(kernels, rows, count, logits.dtype, 1.0, mean) if reduced else rows
        ctx.shape = shape
        return loss, *kept_for_backward(ctx, grad if store_grad else None, masked, margin)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss: Tensor | None, *_grad_flags: Tensor | None):  # type: ignore[override]
        return scaled_gradient(ctx, grad_loss), None, None, None, None, None, None


def forward_buffers(
    ctx: Any, logits: Tensor, overwrite: bool, reduced: bool = True
) -> tuple[Tensor, ...]:
    """The logits with contiguous rows ``(M, C)``, the gradient's buffer (the logits themselves
    when ``overwrite`` or when no gradient is wanted), and per row ``(M,)`` the loss (float32
    when ``reduced`` will sum it, else in the logits' dtype: the result itself, no cast), the
    int8 fully-masked flag and a float32 statistic (p-margin or gap)."""
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    store_grad = ctx.needs_input_grad[0]
    grad = logits if overwrite or not store_grad else torch.empty_like(logits)
    n_rows, device = len(logits), logits.device
    rows = torch.empty(n_rows, dtype=torch.float32 if reduced else logits.dtype, device=device)
    masked = torch.empty(n_rows, dtype=torch.int8, device=device)
    return logits, grad, rows, masked, torch.empty(n_rows, dtype=torch.float32, device=device)


def reduced_loss(
    kernels: Any, rows: Tensor, count: Tensor, dtype: torch.dtype, scale: float, mean: bool
) -> Tensor:
    """The float32 per-row losses ``rows`` summed in one kernel, times ``scale``, over
    ``count[0]`` when ``mean``, as a scalar of ``dtype``."""
    loss = torch.empty((), dtype=dtype, device=rows.device)
    kernels.reduce_rows[(1,)](
        rows, count, loss, len(rows), scale, USE_COUNT=mean, BLOCK=REDUCE_BLOCK
    )
    return loss


def kept_for_backward(
    ctx: Any, grad: Tensor | None, masked: Tensor, per_row: Tensor
) -> tuple[Tensor, Tensor]:
    """Save the forward's ``grad`` (None: none was computed) for the backward; the flags
    ``masked`` (int8 ``(M,)``) as bools and ``per_row`` (``(M,)``), neither differentiable."""
    if grad is not None:
        ctx.save_for_backward(grad)
    fully_masked = masked.view(torch.bool)
    ctx.mark_non_differentiable(fully_masked, per_row)
    return fully_masked, per_row


def scaled_gradient(ctx: Any, grad_loss: Tensor | None) -> Tensor | None:
    """The forward's saved gradient ``(M, C)`` times the incoming ``grad_loss`` (a scalar, or
    one per row, in any float dtype: the kernel reads it as float32), in place unless the graph
    is kept for a second backward; ``ctx.shape``: the forward's :func:`launch_shape`. None when
    no gradient comes in (the loss was not used)."""
    if grad_loss is None:
        return None
    (grad,) = ctx.saved_tensors
    per_row = grad_loss.reshape(-1)
    if autograd_graph_is_kept():  # a second backward will read the saved gradient again
        return (grad.float() * per_row.float().reshape(-1, 1)).to(grad.dtype)
    n_rows, n_cols = grad.shape
    shape = dict(ctx.shape, BLOCK_C=min(ctx.shape["BLOCK_C"], LOOP_BLOCK))
    shape.pop("SINGLE", None)
    if n_rows:
        _kernels(grad).scale_rows[(triton_cdiv(n_rows, shape["BLOCK_M"]),)](
            grad, per_row, per_row.stride(0) if per_row.numel() == n_rows else 0,
            n_rows, n_cols, grad.stride(0), **shape,
        )  # fmt: skip
    return grad


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def as_softmax_rows_triton(
    logits: Tensor,
    labels: Tensor,
    delta: float,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    overwrite_logits: bool = False,
    max_single_block: int = MAX_SINGLE_BLOCK,
) -> ASRows:
    """The fused kernel's loss (shaped as :func:`as_softmax_loss` returns it, in the dtype of
    ``logits``) with the per-row flags and p-margins (flat ``(M,)``). ``overwrite_logits``
    writes the gradient over the logits' buffer (when their rows are contiguous): only for a
    caller that reads the logits nowhere after this call. ``max_single_block`` below C forces
    the looped kernel (tests). A label outside ``[0, C)`` gives a NaN loss on its row."""
    delta = DELTA.check(delta)
    check_choice("reduction", reduction, REDUCTIONS)
    check_int("ignore_index", ignore_index)
    flat_logits, flat_labels = flatten_rows(logits, labels)
    loss, fully_masked, margin = _TritonASFunction.apply(
        flat_logits, flat_labels.contiguous(), delta, ignore_index, reduction,
        overwrite_logits, max_single_block,
    )  # fmt: skip
    if reduction == "none":
        loss = loss.reshape(labels.shape)
    return ASRows(loss, fully_masked, margin)


def as_softmax_with_stats_triton(
    logits: Tensor,
    labels: Tensor,
    delta: float,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    overwrite_logits: bool = False,
) -> tuple[Tensor, MaskStats]:
    """:func:`as_softmax_loss_triton` with the :class:`MaskStats` of the torch path (its
    headroom read from the kernel's p-margins: nothing more is computed when it is asked for)."""
    loss, fully_masked, margin = as_softmax_rows_triton(
        logits, labels, delta, ignore_index=ignore_index, reduction=reduction,
        overwrite_logits=overwrite_logits,
    )  # fmt: skip
    inactive = (labels.reshape(-1) == ignore_index).unsqueeze(1)
    masked = lambda: fully_masked & ~inactive.reshape(-1)  # noqa: E731
    stats = MaskStats(
        inactive,
        masked,
        lambda: past_threshold(margin, delta, masked()),
        lambda: (margin, ~inactive.reshape(-1)),
    )
    return loss, stats


def as_softmax_loss_triton(
    logits: Tensor,
    labels: Tensor,
    delta: float,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    overwrite_logits: bool = False,
) -> Tensor:
    """:func:`astune.losses.as_softmax.as_softmax_loss` (same arguments, same result) computed
    by the fused kernel; ``overwrite_logits`` as :func:`as_softmax_rows_triton` says.

    Raises:
        ValueError: as ``as_softmax_loss``; also CPU logits without ``TRITON_INTERPRET=1`` and
            float64 logits. RuntimeError: triton is not installed.
    """
    return as_softmax_rows_triton(
        logits, labels, delta, ignore_index=ignore_index, reduction=reduction,
        overwrite_logits=overwrite_logits,
    ).loss  # fmt: skip
