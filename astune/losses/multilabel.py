"""Multi-label categorical cross-entropy (Su, 2020) and its AS-Softmax form (Lv et al., TASLP 2025,
Eqs. multi-label loss, criterion_mul, criterion_mul2, z_i, z_t and multi-label AS-Softmax loss).

For a row with positive classes ``P`` and negative classes ``Q``::

    L = log(1 + sum_{i in Q} z_i e^{o_i}) + log(1 + sum_{t in P} z_t e^{-o_t})

with every ``z = 1`` for the plain loss. AS-Softmax sets ``z_i = 0`` for a negative class when
``p_t^min - p_i > delta`` and ``z_t = 0`` for a positive class when ``p_t - p_i^max > delta``,
where ``p = softmax(o)`` over the row and ``p_t^min`` / ``p_i^max`` are the smallest positive and
the largest negative probability. Both log terms are computed as a ``logsumexp`` over the kept
scores and an appended 0 (the ``1 +``), so logits of any finite size give finite losses.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from astune._checks import REDUCTIONS, check_choice
from astune.losses.as_base import ASLossModule, MaskStats, past_threshold
from astune.losses.as_softmax import chosen_kernel
from astune.losses.catalogue import DELTA, LOSS_KERNELS
from astune.losses.multilabel_triton import fits_one_block
from astune.losses.rows import multilabel_positives

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _work_dtype(logits: Tensor) -> torch.dtype:
    return torch.float32 if logits.dtype in _LOW_PRECISION else logits.dtype


def _log1p_sum_exp(scores: Tensor, keep: Tensor) -> Tensor:
    """``log(1 + sum_{j kept} e^{scores_j})`` per row, ``(N,)``; exactly 0 where nothing is kept."""
    masked = scores.masked_fill(~keep, float("-inf"))
    return torch.logsumexp(torch.cat([masked, masked.new_zeros(len(masked), 1)], dim=1), dim=1)


def _loss(logits: Tensor, keep_neg: Tensor, keep_pos: Tensor, reduction: str) -> Tensor:
    """The reduced loss over the kept negatives and positives, in the dtype of ``logits``."""
    work = logits.to(_work_dtype(logits))
    loss = _log1p_sum_exp(work, keep_neg) + _log1p_sum_exp(-work, keep_pos)
    if reduction == "mean":
        loss = loss.mean()
    elif reduction == "sum":
        loss = loss.sum()
    return loss.to(logits.dtype)


def multilabel_categorical_crossentropy(
    logits: Tensor, targets: Tensor, *, reduction: str = "mean"
) -> Tensor:
    """Multi-label categorical cross-entropy, the paper's Eq. (multi-label loss).

    Args:
        logits: ``(N, C)`` scores, any float dtype; a class is predicted when its score is > 0.
        targets: ``(N, C)`` 0/1 tensor (bool, int or float); 1 marks a positive class.
        reduction: ``"mean"`` over rows, ``"sum"``, or ``"none"`` (``(N,)``).

    Returns:
        The loss in the dtype of ``logits``. A row with no positive (no negative) class has a
        positive (negative) term of exactly 0.

    Raises:
        ValueError: mismatched shapes, targets other than 0/1, or an unknown ``reduction``.
    """
    check_choice("reduction", reduction, REDUCTIONS)
    positive = multilabel_positives(logits, targets)
    return _loss(logits, ~positive, positive, reduction)


def _as_keep_masks(
    logits: Tensor, positive: Tensor, delta: float | Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """The kept negatives (``z_i = 1``) and kept positives (``z_t = 1``), bool ``(N, C)``, and
    the gap ``p_t^min - p_i^max`` ``(N,)`` that both criteria compare with delta."""
    with torch.no_grad():
        # fp16/bf16 probabilities keep 3 (bf16: 2) significant digits and fp16 ones underflow to
        # 0 past a logit gap of ~17, which flips the criterion near delta: compare in float32.
        probs = torch.softmax(logits.detach().to(_work_dtype(logits)), dim=1)
        negative = ~positive
        p_pos_min = probs.masked_fill(negative, float("inf")).amin(dim=1, keepdim=True)
        p_neg_max = probs.masked_fill(positive, float("-inf")).amax(dim=1, keepdim=True)
        # Without a positive (or a negative) there is no p_t^min (p_i^max): nothing is masked.
        decidable = positive.any(dim=1, keepdim=True) & negative.any(dim=1, keepdim=True)
        mask_neg = (p_pos_min - probs > delta) & decidable
        mask_pos = (probs - p_neg_max > delta) & decidable
        gap = (p_pos_min - p_neg_max).squeeze(1)
        return negative & ~mask_neg, positive & ~mask_pos, gap


def chosen_multilabel_kernel(kernel: str, logits: Tensor, delta: float) -> str:
    """``"triton"`` or ``"torch"``: :func:`~astune.losses.as_softmax.chosen_kernel`'s choice,
    except that ``"auto"`` leaves rows wider than one block (the fused kernel refuses them) to
    the torch function."""
    chosen = chosen_kernel(kernel, logits, delta)
    if kernel == "auto" and not fits_one_block(logits.shape[-1] if logits.dim() else 0):
        return "torch"
    return chosen


def multilabel_as_softmax_with_stats(
    logits: Tensor,
    targets: Tensor,
    delta: float | Tensor,
    *,
    reduction: str = "mean",
    kernel: str = "auto",
    overwrite_logits: bool = False,
) -> tuple[Tensor, MaskStats]:
    """:func:`multilabel_as_softmax_loss` that also returns a :class:`MaskStats`.

    Every row is active (multi-label rows are never ignored); a row counts as masked when every
    class is masked, so its loss is exactly 0. ``overwrite_logits``: the fused kernel writes the
    gradient over the logits (only for a caller that reads them nowhere after this call). A
    0-dim tensor ``delta`` (a compiled graph's) takes the torch function's general path.
    """
    traced = isinstance(delta, Tensor)
    if not traced and chosen_multilabel_kernel(kernel, logits, delta) == "triton":
        from astune.losses.multilabel_triton import multilabel_as_softmax_with_stats_triton

        return multilabel_as_softmax_with_stats_triton(
            logits, targets, delta, reduction=reduction, overwrite_logits=overwrite_logits
        )
    delta = delta if traced else DELTA.check(delta)
    check_choice("reduction", reduction, REDUCTIONS)
    positive = multilabel_positives(logits, targets)
    inactive = torch.zeros(len(logits), dtype=torch.bool, device=logits.device)
    if not traced and delta == 1.0:
        # For finite logits p_t^min - p_i < 1, so nothing is masked; the shortcut also keeps rows
        # whose float probabilities saturate to 1 and 0 (which would meet ">= 1") unmasked.
        return _loss(logits, ~positive, positive, reduction), MaskStats(inactive)
    keep_neg, keep_pos, gap = _as_keep_masks(logits, positive, delta)
    fully_masked = lambda: ~(keep_neg.any(dim=1) | keep_pos.any(dim=1))  # noqa: E731
    stats = MaskStats(inactive, fully_masked, lambda: past_threshold(gap, delta, fully_masked()))
    return _loss(logits, keep_neg, keep_pos, reduction), stats


def multilabel_as_softmax_loss(
    logits: Tensor, targets: Tensor, delta: float, *, reduction: str = "mean", kernel: str = "auto"
) -> Tensor:
    """Multi-label AS-Softmax loss, the paper's Eq. (multi-label AS-Softmax loss).

    With ``p = softmax(logits)`` over each row, a negative class ``i`` is masked when
    ``p_t^min - p_i > delta`` and a positive class ``t`` when ``p_t - p_i^max > delta``
    (the strict ``>`` of the single-label :func:`~astune.losses.as_softmax_loss`; the paper's
    Eqs. criterion_mul and criterion_mul2 write ``>=``, which differs only at an exact tie).
    Positives are read from ``targets``, never inferred from the probabilities. A row with no
    positive or no negative class has no ``p_t^min`` or ``p_i^max``, so the criterion cannot be
    met: nothing is masked and the row keeps its :func:`multilabel_categorical_crossentropy` loss.

    Args:
        logits: ``(N, C)`` scores, any float dtype.
        targets: ``(N, C)`` 0/1 tensor (bool, int or float); 1 marks a positive class.
        delta: the margin in ``(0, 1]``; ``delta = 1`` is exactly
            :func:`multilabel_categorical_crossentropy`, bit for bit.
        reduction: ``"mean"`` over rows (masked rows count, with loss 0), ``"sum"`` or ``"none"``.
        kernel: ``"torch"`` (this module's functions), ``"triton"`` (the fused kernel of
            :mod:`astune.losses.multilabel_triton`: CUDA, or the CPU under
            ``TRITON_INTERPRET=1``; float32/16 and bf16; at most 8,192 classes), or ``"auto"``:
            the fused kernel where it runs (:func:`chosen_multilabel_kernel`), else ``"torch"``.

    Returns:
        The loss in the dtype of ``logits``, a scalar or ``(N,)``.

    Raises:
        ValueError: ``delta`` outside ``(0, 1]``, mismatched shapes, targets other than 0/1, or an
            unknown ``reduction``.
    """
    loss, _ = multilabel_as_softmax_with_stats(
        logits, targets, delta, reduction=reduction, kernel=kernel
    )
    return loss


class MultiLabelCategoricalCrossEntropy(nn.Module):
    """Module form of :func:`multilabel_categorical_crossentropy`."""

    def __init__(self, *, reduction: str = "mean"):
        super().__init__()
        self.reduction = check_choice("reduction", reduction, REDUCTIONS)

    def forward(self, logits: Tensor, targets: Tensor) -> Tensor:
        return multilabel_categorical_crossentropy(logits, targets, reduction=self.reduction)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class MultiLabelASSoftmaxLoss(ASLossModule):
    """Module form of :func:`multilabel_as_softmax_loss`.

    After each call ``last_stats`` holds a :class:`MaskStats` (``n_active`` rows, ``n_masked`` of
    them with zero loss). :meth:`set_delta` changes delta between calls (as :class:`DeltaSchedule`
    does). ``overwrite_logits`` (the fused kernel only) writes the gradient over the logits: set
    it only where nothing reads the logits after the call (the training loop does).
    """

    upcasts_logits = True
    """Both kernels compute in float32 from fp16/bf16 logits (in registers, or in a float32
    copy): callers hand the logits over in their own dtype."""

    def __init__(
        self,
        delta: float = DELTA.default,
        *,
        reduction: str = "mean",
        kernel: str = "auto",
        overwrite_logits: bool = False,
    ):
        super().__init__(delta, reduction=reduction)
        self.kernel = check_choice("kernel", kernel, LOSS_KERNELS)
        self.overwrite_logits = bool(overwrite_logits)

    def forward(self, logits: Tensor, targets: Tensor) -> Tensor:
        loss, self.last_stats = multilabel_as_softmax_with_stats(
            logits,
            targets,
            self.delta_arg(),
            reduction=self.reduction,
            kernel=self.kernel,
            overwrite_logits=self.overwrite_logits,
        )
        return loss

    def extra_repr(self) -> str:
        return f"delta={self.delta}, reduction={self.reduction!r}, kernel={self.kernel!r}" + (
            ", overwrite_logits=True" if self.overwrite_logits else ""
        )
