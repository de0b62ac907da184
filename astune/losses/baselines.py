"""The single-label baselines of the paper's Baselines section, with its AS-variant (Eq. log_delta).

Every loss takes ``(logits, labels)`` with logits ``(N, C)`` or token-level ``(N, T, C)`` and labels
``(N,)`` or ``(N, T)``; rows labelled ``ignore_index`` contribute nothing (zero loss, zero
gradient), and ``reduction`` is ``"mean"`` over the other rows, ``"sum"`` or ``"none"`` (shaped
like ``labels``), as in ``F.cross_entropy``. Each loss is a function and an ``nn.Module``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import entmax
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from astune._checks import REDUCTIONS, check_choice, check_int, check_range
from astune._device import on_host
from astune.losses.as_base import MaskStats, past_threshold
from astune.losses.rows import flatten_rows

_LOW_PRECISION = (torch.float16, torch.bfloat16)


class _Rows:
    """Flat rows of one loss call: ``logits`` ``(M, C)`` in the working dtype, ``labels`` ``(M,)``,
    ``inactive`` ``(M,)`` (ignored rows) and ``target`` ``(M, 1)`` (ignored rows point at class 0).
    """

    def __init__(self, logits: Tensor, labels: Tensor, ignore_index: int, *, upcast: bool = True):
        flat_logits, self.labels = flatten_rows(logits, labels)
        # Scaled or shifted fp16/bf16 logits overflow (65504) and their exps underflow: use float32.
        low_precision = logits.dtype in _LOW_PRECISION
        self.logits = flat_logits.float() if upcast and low_precision else flat_logits
        self.inactive = self.labels == ignore_index
        self.target = self.labels.masked_fill(self.inactive, 0).unsqueeze(1)
        if on_host(self.target):  # on accelerators the kernels assert instead (no sync)
            _check_labels(self.target, self.num_classes)
        self.shape, self.dtype = labels.shape, logits.dtype

    @property
    def num_classes(self) -> int:
        return self.logits.shape[1]

    def finish(self, loss: Tensor, reduction: str) -> Tensor:
        """Zero ignored rows of the per-row ``loss`` ``(M,)``, reduce, cast to the input dtype."""
        loss = loss.masked_fill(self.inactive, 0.0).reshape(self.shape)
        if loss.dtype in _LOW_PRECISION:  # a long fp16 sum stops growing once it passes ~2048
            loss = loss.float()
        if reduction == "mean":  # nan when every row is ignored, as F.cross_entropy gives
            loss = loss.sum() / (~self.inactive).sum()
        elif reduction == "sum":
            loss = loss.sum()
        return loss.to(self.dtype)

    def cross_entropy(self, logits: Tensor, reduction: str) -> Tensor:
        """Cross-entropy at the targets of ``logits`` ``(M, C)``, a transform of ``self.logits``."""
        loss = F.cross_entropy(logits, self.target.squeeze(1), reduction="none")
        return self.finish(loss, reduction)


def _check_labels(target: Tensor, num_classes: int) -> None:
    bad = (target < 0) | (target >= num_classes)
    if bool(bad.any()):
        raise ValueError(
            f"labels must be in [0, {num_classes - 1}] or ignore_index, "
            f"but got {target[bad].unique()[:5].tolist()}."
        )


def softmax_loss(
    logits: Tensor, labels: Tensor, *, ignore_index: int = -100, reduction: str = "mean"
) -> Tensor:
    """Plain softmax cross-entropy, ``F.cross_entropy`` with the shapes of this module; it runs in
    the input dtype since its kernels already accumulate fp16/bf16 in float32."""
    check_choice("reduction", reduction, REDUCTIONS)
    rows = _Rows(logits, labels, ignore_index, upcast=False)
    return rows.cross_entropy(rows.logits, reduction)


def t_softmax_loss(
    logits: Tensor,
    labels: Tensor,
    tau: float,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """T-Softmax (the paper's Eq. T-softmax): cross-entropy of ``logits / tau``, ``tau > 0``."""
    tau = check_range("tau", tau, 0.0, low_open=True)
    check_choice("reduction", reduction, REDUCTIONS)
    rows = _Rows(logits, labels, ignore_index)
    return rows.cross_entropy(rows.logits / tau, reduction)


def label_smoothing_loss(
    logits: Tensor,
    labels: Tensor,
    epsilon: float,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """Label smoothing in the paper's form: cross-entropy against a target distribution with
    weight ``1 - epsilon`` on the target class and ``epsilon / (C - 1)`` on each other class.

    This is not ``F.cross_entropy(label_smoothing=epsilon)``, which spreads ``epsilon / C`` over
    every class including the target (the two agree for torch's ``epsilon * C / (C - 1)``).
    ``epsilon`` is in ``[0, 1)``; ``epsilon = 0`` is plain cross-entropy.
    """
    epsilon = check_range("epsilon", epsilon, 0.0, 1.0, high_open=True)
    check_choice("reduction", reduction, REDUCTIONS)
    rows = _Rows(logits, labels, ignore_index)
    log_probs = torch.log_softmax(rows.logits, dim=1)
    log_p_target = log_probs.gather(1, rows.target).squeeze(1)
    off_weight = epsilon / (rows.num_classes - 1) if rows.num_classes > 1 else 0.0
    loss = -(1.0 - epsilon) * log_p_target - off_weight * (log_probs.sum(dim=1) - log_p_target)
    return rows.finish(loss, reduction)


def sparse_softmax_loss(
    logits: Tensor,
    labels: Tensor,
    k: int,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """Sparse-Softmax (Sun et al., 2021): cross-entropy over the ``k`` largest logits of each row
    and the target; the other logits are set to ``-inf``.

    The target is always kept: without it the loss is infinite whenever the target falls outside
    the top ``k``. Where the target is inside the top ``k`` this is the original
    ``logsumexp(top-k) - o_t``; where it is outside, the original drops ``e^{o_t}`` from the
    normalizer, while here the kept classes stay a distribution that holds the target (a true
    cross-entropy, >= 0). Classes tied with the ``k``-th largest logit are all kept, so the result
    does not depend on how ``topk`` breaks ties. ``k >= C`` is plain softmax.
    """
    k = check_int("k", k, 1)
    check_choice("reduction", reduction, REDUCTIONS)
    rows = _Rows(logits, labels, ignore_index)
    work = rows.logits
    if k < rows.num_classes:
        with torch.no_grad():
            kth_largest = work.topk(k, dim=1).values[:, -1:]
            dropped = (work < kth_largest).scatter_(1, rows.target, False)
        work = work.masked_fill(dropped, float("-inf"))
    return rows.cross_entropy(work, reduction)


def _entmax_family(
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    logits: Tensor,
    labels: Tensor,
    ignore_index: int,
    reduction: str,
) -> Tensor:
    check_choice("reduction", reduction, REDUCTIONS)
    rows = _Rows(logits, labels, ignore_index)
    # The entmax losses index with the labels and fail on ignore_index: ignored rows point at
    # class 0 and ``finish`` zeroes their loss (no boolean indexing, which would sync a GPU).
    return rows.finish(loss_fn(rows.logits, rows.target.squeeze(1)), reduction)


def sparsemax_loss(
    logits: Tensor, labels: Tensor, *, ignore_index: int = -100, reduction: str = "mean"
) -> Tensor:
    """Sparsemax loss (Martins and Astudillo, 2016), ``entmax.sparsemax_loss``, with the shapes
    and ``ignore_index`` of this module."""
    return _entmax_family(entmax.sparsemax_loss, logits, labels, ignore_index, reduction)


def entmax15_loss(
    logits: Tensor, labels: Tensor, *, ignore_index: int = -100, reduction: str = "mean"
) -> Tensor:
    """1.5-entmax loss (Peters et al., 2019; the sorting-based alpha = 1.5 of the paper),
    ``entmax.entmax15_loss``, with the shapes and ``ignore_index`` of this module."""
    return _entmax_family(entmax.entmax15_loss, logits, labels, ignore_index, reduction)


def am_softmax_loss(
    logits: Tensor,
    labels: Tensor,
    s: float,
    m: float,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """AM-Softmax on logits (the paper's Eq. am-softmax loss): cross-entropy of
    ``s * (logits - m * onehot(target))``, scale ``s > 0``, margin ``m >= 0``."""
    s = check_range("s", s, 0.0, low_open=True)
    m = check_range("m", m, 0.0)
    check_choice("reduction", reduction, REDUCTIONS)
    rows = _Rows(logits, labels, ignore_index)
    margin = rows.logits.new_full(rows.target.shape, -m)
    return rows.cross_entropy(rows.logits.scatter_add(1, rows.target, margin) * s, reduction)


def as_variant_with_stats(
    logits: Tensor,
    labels: Tensor,
    margin: float,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> tuple[Tensor, MaskStats]:
    """:func:`as_variant_loss` that also returns a :class:`MaskStats` (rows whose every
    non-target class is masked have loss exactly 0)."""
    margin = check_range("margin", margin, 0.0, low_open=True)
    check_choice("reduction", reduction, REDUCTIONS)
    rows = _Rows(logits, labels, ignore_index)
    with torch.no_grad():
        # The target's own gap is 0 < margin, so the target is always kept.
        gaps = rows.logits.gather(1, rows.target) - rows.logits
        masked = gaps >= margin
    loss = rows.cross_entropy(rows.logits.masked_fill(masked, float("-inf")), reduction)
    inactive, num_classes = rows.inactive, rows.num_classes  # not rows: it holds the logits
    fully_masked = lambda: (masked.sum(dim=1) == num_classes - 1) & ~inactive  # noqa: E731

    def headroom() -> Tensor:  # the smallest gap to a non-target class, in logits
        # float32: a bf16 logit gap keeps 2-3 digits; the re-check schedule needs no more.
        smallest = gaps.float().scatter(1, rows.target, float("inf")).amin(dim=1)
        return past_threshold(smallest, margin, fully_masked())

    return loss, MaskStats(inactive, fully_masked, headroom)


def as_variant_loss(
    logits: Tensor,
    labels: Tensor,
    margin: float,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """The AS-variant with a logit margin (the paper's Eq. log_delta): a non-target class ``i`` is
    masked when ``o_t - o_i >= margin`` (``>=``, the paper's "criterion satisfied"), then
    cross-entropy over the kept classes. ``margin`` (the paper's delta') is ``> 0`` and unbounded.
    """
    loss, _ = as_variant_with_stats(
        logits, labels, margin, ignore_index=ignore_index, reduction=reduction
    )
    return loss


class _SingleLabelLoss(nn.Module):
    """Module form of a loss function ``fn(logits, labels, **params, ignore_index, reduction)``."""

    def __init__(self, *, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__()
        self.ignore_index = check_int("ignore_index", ignore_index)
        self.reduction = check_choice("reduction", reduction, REDUCTIONS)

    def params(self) -> dict[str, Any]:
        """The loss's own parameters, as keyword arguments of its function."""
        return {}

    def _loss(self, logits: Tensor, labels: Tensor, **kwargs: Any) -> Tensor:
        raise NotImplementedError

    def forward(self, logits: Tensor, labels: Tensor) -> Tensor:
        options = {"ignore_index": self.ignore_index, "reduction": self.reduction}
        return self._loss(logits, labels, **self.params(), **options)

    def extra_repr(self) -> str:
        params = "".join(f"{name}={value}, " for name, value in self.params().items())
        return f"{params}ignore_index={self.ignore_index}, reduction={self.reduction!r}"


class SoftmaxLoss(_SingleLabelLoss):
    """Module form of :func:`softmax_loss`."""

    _loss = staticmethod(softmax_loss)


class TSoftmaxLoss(_SingleLabelLoss):
    """Module form of :func:`t_softmax_loss`."""

    _loss = staticmethod(t_softmax_loss)

    def __init__(self, tau: float = 5.0, *, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__(ignore_index=ignore_index, reduction=reduction)
        self.tau = check_range("tau", tau, 0.0, low_open=True)

    def params(self) -> dict[str, Any]:
        return {"tau": self.tau}


class LabelSmoothingLoss(_SingleLabelLoss):
    """Module form of :func:`label_smoothing_loss`."""

    _loss = staticmethod(label_smoothing_loss)

    def __init__(self, epsilon: float = 0.3, *, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__(ignore_index=ignore_index, reduction=reduction)
        self.epsilon = check_range("epsilon", epsilon, 0.0, 1.0, high_open=True)

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon}


class SparseSoftmaxLoss(_SingleLabelLoss):
    """Module form of :func:`sparse_softmax_loss`."""

    _loss = staticmethod(sparse_softmax_loss)

    def __init__(self, k: int = 4, *, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__(ignore_index=ignore_index, reduction=reduction)
        self.k = check_int("k", k, 1)

    def params(self) -> dict[str, Any]:
        return {"k": self.k}


class SparsemaxLoss(_SingleLabelLoss):
    """Module form of :func:`sparsemax_loss`."""

    _loss = staticmethod(sparsemax_loss)


class Entmax15Loss(_SingleLabelLoss):
    """Module form of :func:`entmax15_loss`."""

    _loss = staticmethod(entmax15_loss)


class AMSoftmaxLoss(_SingleLabelLoss):
    """Module form of :func:`am_softmax_loss`."""

    _loss = staticmethod(am_softmax_loss)

    def __init__(
        self, s: float = 10.0, m: float = 0.3, *, ignore_index: int = -100, reduction: str = "mean"
    ):
        super().__init__(ignore_index=ignore_index, reduction=reduction)
        self.s = check_range("s", s, 0.0, low_open=True)
        self.m = check_range("m", m, 0.0)

    def params(self) -> dict[str, Any]:
        return {"s": self.s, "m": self.m}


class ASVariantLoss(_SingleLabelLoss):
    """Module form of :func:`as_variant_loss`; ``last_stats`` holds the :class:`MaskStats` of the
    last call, as for :class:`~astune.losses.ASSoftmaxLoss`."""

    def __init__(self, margin: float = 1.0, *, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__(ignore_index=ignore_index, reduction=reduction)
        self.margin = check_range("margin", margin, 0.0, low_open=True)
        self.last_stats: MaskStats | None = None

    def params(self) -> dict[str, Any]:
        return {"margin": self.margin}

    def _loss(self, logits: Tensor, labels: Tensor, **kwargs: Any) -> Tensor:
        loss, self.last_stats = as_variant_with_stats(logits, labels, **kwargs)
        return loss
