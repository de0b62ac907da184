"""AS-Softmax (Lv et al., TASLP 2025, Eqs. criterion, z_i, AS-Softmax); its delta over training
is astune/losses/delta.py.

For a row with target ``t``, class ``i != t`` is masked when ``p_t - p_i > delta``; the loss is
the cross-entropy of the softmax over the classes that remain. Easy rows (every non-target class
masked) reach exactly zero loss and zero gradient, which is what AS-Speed counts.

The implementation is a custom autograd function that costs about what ``F.cross_entropy`` costs:
the probabilities it computes once are masked in place with a per-row threshold
``c = p_t - delta`` (a class stays when ``p_i >= c``), the loss is ``log(K / p_t)`` with ``K`` the
kept mass, and the backward pass is one fused multiply ``p_i * z_i / K`` plus a scatter at the
targets. It keeps the same ``(N, C)`` buffer for backward that cross-entropy keeps (its
log-probabilities) and otherwise only per-row scalars.
"""

from __future__ import annotations

import functools
import importlib.util

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from astune._checks import REDUCTIONS, check_choice, check_int
from astune._private import autograd_graph_is_kept
from astune.losses.as_base import ASLossModule, MaskStats, past_threshold
from astune.losses.catalogue import DELTA, LOSS_KERNELS
from astune.losses.rows import flatten_rows

# Below this kept-mass threshold a row masks nothing: the classes it would mask carry p < 1e-30,
# and dividing by such a p_t would overflow float32.
_MIN_THRESHOLD = 1e-30
_SMALL_CLASS_COUNT = 16


def _single_label_headroom(
    logits: Tensor, target: Tensor, fully_masked: Tensor, delta: float | Tensor
) -> Tensor:
    """:meth:`MaskStats.headroom_rows` of AS-Softmax rows: logits ``(M, C)``, target ``(M, 1)``."""
    with torch.no_grad():
        # float32: in fp16/bf16 the gap p_t - p_i near delta rounds to a few digits; the re-check
        # schedule needs no more than float32 gives.
        probs = torch.softmax(logits.detach().float(), dim=1)
        p_target = probs.gather(1, target).squeeze(1)
        p_rest = probs.scatter(1, target, float("-inf")).amax(dim=1)
        return past_threshold(p_target - p_rest, delta, fully_masked)


class _ASSoftmaxFunction(torch.autograd.Function):
    """Masked cross-entropy over flat rows: logits ``(M, C)``; target and inactive ``(M, 1)``."""

    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, inactive: Tensor, delta: float | Tensor):  # type: ignore[override]
        work_dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
        # fp16/bf16 probabilities underflow and their sums lose the kept mass: work in float32.
        probs, log_p_target = _softmax_and_log_target(logits.to(work_dtype), target)
        # p_t read from the buffer itself, so that the target passes its own test bit for bit.
        p_target = probs.gather(1, target)
        tiny = torch.finfo(work_dtype).tiny
        # Rows with p_t - delta <= 1e-30 mask nothing; they get the threshold tiny (_zero_below).
        threshold = F.threshold(p_target - delta, _MIN_THRESHOLD, tiny)
        _zero_below(probs, threshold)
        # A float sum of non-negative terms is never below its largest term, so kept_mass equals
        # p_t exactly when every non-target class is masked: such rows get loss exactly 0.
        kept_mass = probs.sum(dim=1, keepdim=True)
        fully_masked = kept_mass == p_target.div_(threshold).mul_(
            threshold
        )  # as _zero_below left it
        loss = torch.log(kept_mass).sub_(log_p_target).clamp_(min=0.0)
        # Fully masked rows get a zero row gradient, not p_t * (g / p_t) - g (off by a rounding).
        dead = fully_masked | inactive
        loss.masked_fill_(dead, 0.0)
        ctx.save_for_backward(probs, target, kept_mass, dead)
        ctx.input_dtype = logits.dtype
        ctx.mark_non_differentiable(fully_masked)
        return loss, fully_masked

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss: Tensor, _grad_fully_masked: Tensor):  # type: ignore[override]
        probs, target, kept_mass, dead = ctx.saved_tensors
        row_grad = grad_loss.to(probs.dtype).masked_fill(dead, 0.0)
        # d loss / d o_i = z_i p_i / K - [i = t]; written over the saved buffer unless the graph
        # is kept for another backward (retain_graph, gradcheck), which saves an (M, C) allocation.
        scale = row_grad / kept_mass
        grad = probs * scale if autograd_graph_is_kept() else probs.mul_(scale)
        grad.scatter_add_(1, target, row_grad.neg_())
        return grad.to(ctx.input_dtype), None, None, None


def _softmax_and_log_target(logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """Probabilities ``(M, C)`` in a new buffer, and ``log p_t`` ``(M, 1)`` without underflow."""
    if logits.device.type == "cpu" and logits.shape[1] < _SMALL_CLASS_COUNT:
        # The CPU log_softmax kernel is unvectorized below 16 classes (4-8x slower than this).
        shifted = logits - logits.amax(dim=1, keepdim=True)
        log_p_target = _gather_target(shifted, target)
        probs = shifted.exp_()
        norm = probs.sum(dim=1, keepdim=True)
        probs.div_(norm)
        return probs, log_p_target.sub_(norm.log_())
    probs = torch.log_softmax(logits, dim=1)
    log_p_target = _gather_target(probs, target)
    return probs.exp_(), log_p_target


def _gather_target(log_probs: Tensor, target: Tensor) -> Tensor:
    try:
        return log_probs.gather(1, target)
    except RuntimeError as err:  # gather checks bounds on the CPU for free
        raise ValueError(
            f"labels must be in [0, {log_probs.shape[1] - 1}] or ignore_index: {err}"
        ) from None


def _zero_below(probs: Tensor, threshold: Tensor) -> None:
    """In place: ``probs[i, j] = 0`` where ``probs[i, j] < threshold[i]`` (``threshold`` is
    ``(M, 1)``).

    Dividing by the row threshold turns the per-row test into ``F.threshold``'s scalar one,
    ``x >= 1``, exact at the boundary since rounding is monotone; multiplying back restores kept
    values to within one ulp. A threshold of ``tiny`` (a power of two, so exactly undone) keeps
    every normal probability bit for bit and zeroes only subnormal ones.
    """
    probs.div_(threshold)
    below_one = 1.0 - torch.finfo(probs.dtype).eps / 2  # the largest float below 1
    F.threshold(probs, below_one, 0.0, inplace=True)
    probs.mul_(threshold)


def _reduce(loss: Tensor, inactive: Tensor, reduction: str) -> Tensor:
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / (
            inactive.numel() - inactive.sum()
        )  # nan when every row is ignored, as F.cross_entropy gives
    return loss


FUSED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def chosen_kernel(kernel: str, logits: Tensor, delta: float) -> str:
    """``"triton"`` or ``"torch"`` for ``kernel``: ``"auto"`` takes the fused kernel for CUDA
    logits in float32/16 or bf16 when triton is installed (its ``-m gpu`` tests pass on an H100,
    where it is faster than this module's function at every size measured: RESULTS.md), and this
    module's function otherwise, and for ``delta = 1``, which is exactly ``F.cross_entropy``."""
    if check_choice("kernel", kernel, LOSS_KERNELS) != "auto":
        return kernel
    fused = logits.is_cuda and logits.dtype in FUSED_DTYPES and delta != 1.0
    return "triton" if fused and _triton_installed() else "torch"


@functools.cache
def _triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def as_softmax_with_stats(
    logits: Tensor,
    labels: Tensor,
    delta: float | Tensor,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    kernel: str = "auto",
    overwrite_logits: bool = False,
) -> tuple[Tensor, MaskStats]:
    """:func:`as_softmax_loss` that also returns the :class:`MaskStats` AS-Speed needs;
    ``overwrite_logits``: the fused kernel writes the gradient over the logits (only for a
    caller that reads them nowhere after this call; the torch function never does). A 0-dim
    tensor ``delta`` (a compiled graph's, checked when it was set) takes this module's function,
    which ``torch.compile`` traces whole, and the general path even at ``delta = 1``."""
    traced = isinstance(delta, Tensor)
    if not traced and chosen_kernel(kernel, logits, delta) == "triton":
        from astune.losses.as_softmax_triton import as_softmax_with_stats_triton

        return as_softmax_with_stats_triton(
            logits,
            labels,
            delta,
            ignore_index=ignore_index,
            reduction=reduction,
            overwrite_logits=overwrite_logits,
        )
    delta = delta if traced else DELTA.check(delta)
    check_choice("reduction", reduction, REDUCTIONS)
    check_int("ignore_index", ignore_index)
    flat_logits, flat_labels = flatten_rows(logits, labels)
    inactive = (flat_labels == ignore_index).unsqueeze(1)
    # delta = 1: p_t - p_i <= 1 always, nothing is masked: exactly cross-entropy
    if not traced and delta == 1.0:
        loss = F.cross_entropy(
            flat_logits, flat_labels, ignore_index=ignore_index, reduction=reduction
        )
        return (loss.reshape(labels.shape) if reduction == "none" else loss), MaskStats(inactive)
    else:
        safe_labels = flat_labels.unsqueeze(1).masked_fill(inactive, 0)
        loss, fully_masked = _ASSoftmaxFunction.apply(flat_logits, safe_labels, inactive, delta)
        loss = loss.to(logits.dtype)
        masked = lambda: fully_masked & ~inactive  # noqa: E731
        stats = MaskStats(
            inactive,
            masked,
            lambda: _single_label_headroom(flat_logits, safe_labels, masked(), delta),
        )
    return _reduce(loss.reshape(labels.shape), inactive, reduction), stats


def as_softmax_loss(
    logits: Tensor,
    labels: Tensor,
    delta: float,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    kernel: str = "auto",
) -> Tensor:
    """AS-Softmax cross-entropy.

    Args:
        logits: ``(N, C)`` or token-level ``(N, T, C)`` scores, any float dtype.
        labels: ``(N,)`` or ``(N, T)`` class indices in ``[0, C)``, or ``ignore_index``.
        delta: the margin in ``(0, 1]``; class ``i`` of a row with target ``t`` is masked when
            ``p_t - p_i > delta``. ``delta = 1`` is exactly ``F.cross_entropy`` of the rows
            ``logits.reshape(-1, C)``, bit for bit.
        ignore_index: label of rows that contribute nothing (padding, sub-tokens).
        reduction: ``"mean"`` over rows that are not ignored (masked rows count, with loss 0),
            ``"sum"``, or ``"none"`` (shape of ``labels``, 0 at ignored rows).
        kernel: ``"torch"`` (this module's autograd function), ``"triton"`` (the fused kernel
            of :mod:`astune.losses.as_softmax_triton`: CUDA, or the CPU under
            ``TRITON_INTERPRET=1``; float32/16 and bf16), or ``"auto"``: the fused kernel on
            CUDA when triton is installed, else ``"torch"`` (:func:`chosen_kernel`).

    Returns:
        The loss, a scalar or shaped like ``labels``, in the dtype of ``logits``.

    Raises:
        ValueError: ``delta`` outside ``(0, 1]``, an unknown ``reduction``, mismatched shapes or a
            label outside ``[0, C)``.
    """
    loss, _ = as_softmax_with_stats(
        logits, labels, delta, ignore_index=ignore_index, reduction=reduction, kernel=kernel
    )
    return loss


class ASSoftmaxLoss(ASLossModule):
    """Module form of :func:`as_softmax_loss`.

    After each call ``last_stats`` holds a :class:`MaskStats` with ``n_active`` and ``n_masked``.
    :meth:`set_delta` changes delta between calls (the warm-up of :class:`DeltaSchedule` does).
    ``overwrite_logits`` (the fused kernel only) writes the gradient over the logits: set it
    only where nothing reads the logits after the call (the training loop does).
    """

    upcasts_logits = True
    """Both kernels compute in float32 from fp16/bf16 logits (in registers, or in the torch
    function's buffer): callers hand the logits over in their own dtype."""

    def __init__(
        self,
        delta: float = DELTA.default,
        *,
        ignore_index: int = -100,
        reduction: str = "mean",
        kernel: str = "auto",
        overwrite_logits: bool = False,
    ):
        super().__init__(delta, reduction=reduction)
        self.ignore_index = check_int("ignore_index", ignore_index)
        self.kernel = check_choice("kernel", kernel, LOSS_KERNELS)
        self.overwrite_logits = bool(overwrite_logits)

    def forward(self, logits: Tensor, labels: Tensor) -> Tensor:
        loss, self.last_stats = as_softmax_with_stats(
            logits,
            labels,
            self.delta_arg(),
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            kernel=self.kernel,
            overwrite_logits=self.overwrite_logits,
        )
        return loss

    def extra_repr(self) -> str:
        return (
            f"delta={self.delta}, ignore_index={self.ignore_index}, "
            f"reduction={self.reduction!r}, kernel={self.kernel!r}"
            + (", overwrite_logits=True" if self.overwrite_logits else "")
        )
