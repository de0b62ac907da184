"""Multi-label categorical cross-entropy and its AS-Softmax form against plain references."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from astune.losses import (
    MultiLabelASSoftmaxLoss,
    MultiLabelCategoricalCrossEntropy,
    multilabel_as_softmax_loss,
    multilabel_as_softmax_with_stats,
    multilabel_categorical_crossentropy,
)

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
TOL = {
    torch.float64: dict(rtol=1e-10, atol=1e-10),
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float16: dict(rtol=1e-2, atol=1e-2),
    torch.bfloat16: dict(rtol=2e-2, atol=5e-2),
}


def make_batch(dtype: torch.dtype, n: int = 10, c: int = 9, scale: float = 3.0, seed: int = 0):
    """Logits ``(n, c)`` and 0/1 targets; row 0 has no positive, row 1 no negative."""
    gen = torch.Generator().manual_seed(seed)
    logits = (torch.randn(n, c, generator=gen, dtype=torch.float64) * scale).to(dtype)
    targets = (torch.rand(n, c, generator=gen) < 0.3).long()
    targets[0] = 0
    targets[1] = 1
    targets[2:, 0] = 1  # every other row has a positive and (almost surely) a negative
    return logits, targets


# ---- plain references: one row at a time, straight from the paper's equations -----------------


def log1p_sum_exp(values: torch.Tensor) -> torch.Tensor:
    return torch.log(1 + torch.exp(values).sum())


def ref_plain_row(o: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return log1p_sum_exp(o[y == 0]) + log1p_sum_exp(-o[y == 1])


def ref_as_kept(o: torch.Tensor, y: torch.Tensor, delta: float) -> tuple[list[int], list[int]]:
    """Kept negatives and kept positives of one row (Eqs. criterion_mul, criterion_mul2)."""
    e = torch.exp(o.detach() - o.detach().max())
    p = (e / e.sum()).tolist()
    pos = [j for j in range(len(p)) if y[j] == 1]
    neg = [j for j in range(len(p)) if y[j] == 0]
    if not pos or not neg:
        return neg, pos
    p_pos_min = min(p[t] for t in pos)
    p_neg_max = max(p[i] for i in neg)
    kept_neg = [i for i in neg if not p_pos_min - p[i] > delta]
    kept_pos = [t for t in pos if not p[t] - p_neg_max > delta]
    return kept_neg, kept_pos


def ref_as_row(o: torch.Tensor, y: torch.Tensor, delta: float) -> torch.Tensor:
    kept_neg, kept_pos = ref_as_kept(o, y, delta)
    return log1p_sum_exp(o[kept_neg]) + log1p_sum_exp(-o[kept_pos])


def ref_rows(logits: torch.Tensor, targets: torch.Tensor, delta: float | None) -> torch.Tensor:
    rows = [
        ref_plain_row(o, y) if delta is None else ref_as_row(o, y, delta)
        for o, y in zip(logits, targets)
    ]
    return torch.stack(rows)


def reduce(loss: torch.Tensor, reduction: str) -> torch.Tensor:
    return {"mean": loss.mean(), "sum": loss.sum(), "none": loss}[reduction]


# ---- values against the references -------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_plain_loss_matches_reference(dtype, reduction):
    logits, targets = make_batch(dtype)
    loss = multilabel_categorical_crossentropy(logits, targets, reduction=reduction)
    expected = reduce(ref_rows(logits.double(), targets, None), reduction)
    assert loss.dtype == dtype
    assert_close(loss.double(), expected, **TOL[dtype])


@pytest.mark.parametrize("delta", [0.01, 0.05, 0.3, 0.7])
@pytest.mark.parametrize("dtype", DTYPES)
def test_as_loss_matches_reference(dtype, delta):
    logits, targets = make_batch(dtype)
    loss = multilabel_as_softmax_loss(logits, targets, delta, reduction="none")
    expected = ref_rows(logits.double(), targets, delta)
    assert loss.dtype == dtype
    assert_close(loss.double(), expected, **TOL[dtype])
    if delta < 0.7:  # the batch exercises the mask: some loss differs from the plain one
        plain = ref_rows(logits.double(), targets, None)
        assert (expected < plain - 1e-6).any()


@pytest.mark.parametrize("delta", [None, 0.01, 0.3])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16])
def test_gradients_match_reference(dtype, delta):
    logits, targets = make_batch(dtype)
    logits.requires_grad_(True)
    if delta is None:
        loss = multilabel_categorical_crossentropy(logits, targets)
    else:
        loss = multilabel_as_softmax_loss(logits, targets, delta)
    loss.backward()
    ref_logits = logits.detach().double().requires_grad_(True)
    ref_rows(ref_logits, targets, delta).mean().backward()
    assert logits.grad.dtype == dtype
    assert_close(logits.grad.double(), ref_logits.grad, **TOL[dtype])


# ---- delta = 1, rows without positives or negatives ---------------------------------------------


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_delta_one_is_the_plain_loss_bit_for_bit(dtype, reduction):
    logits, targets = make_batch(dtype)
    # Saturated rows: float32 gives p = (1, 0), which would meet "p_t^min - p_i >= 1".
    logits[2, :3] = torch.tensor([120.0, -100.0, 10.0], dtype=dtype)
    targets[2, :3] = torch.tensor([1, 0, 0])
    as_logits = logits.clone().requires_grad_(True)
    plain_logits = logits.clone().requires_grad_(True)
    as_loss = multilabel_as_softmax_loss(as_logits, targets, 1.0, reduction=reduction)
    plain = multilabel_categorical_crossentropy(plain_logits, targets, reduction=reduction)
    assert torch.equal(as_loss, plain)
    as_loss.sum().backward()
    plain.sum().backward()
    assert torch.equal(as_logits.grad, plain_logits.grad)


def test_saturated_row_is_not_masked_at_delta_one():
    logits = torch.tensor([[120.0, 10.0]])  # p = (1, 0) in float32
    targets = torch.tensor([[1, 0]])
    loss = multilabel_as_softmax_loss(logits, targets, 1.0)
    assert_close(loss, torch.tensor(math.log1p(math.exp(10.0))))
    assert loss.item() > 10.0


@pytest.mark.parametrize("delta", [0.01, 0.3, 0.99])
@pytest.mark.parametrize("dtype", DTYPES)
def test_rows_without_positive_or_negative_keep_the_plain_loss(dtype, delta):
    logits = (torch.arange(12, dtype=torch.float64).reshape(2, 6) - 5.0).to(dtype)
    targets = torch.tensor([[0] * 6, [1] * 6])
    loss, stats = multilabel_as_softmax_with_stats(logits, targets, delta, reduction="none")
    plain = ref_rows(logits.double(), targets, None)
    assert_close(loss.double(), plain, **TOL[dtype])
    assert (loss > 0).all()
    assert (stats.n_active, stats.n_masked) == (2, 0)


def test_empty_parts_are_exactly_zero():
    logits = torch.tensor([[-3.0, 2.0], [1.0, -4.0]])
    targets = torch.tensor([[0, 0], [1, 1]])
    loss = multilabel_categorical_crossentropy(logits, targets, reduction="none")
    assert loss[0].item() == pytest.approx(math.log(1 + math.exp(-3.0) + math.exp(2.0)), rel=1e-6)
    assert loss[1].item() == pytest.approx(math.log(1 + math.exp(-1.0) + math.exp(4.0)), rel=1e-6)


# ---- the criterion's edges: ties, an all-masked batch, the mask counts ---------------------------


def test_a_gap_of_exactly_delta_masks_nothing_as_in_single_label():
    logits = torch.tensor([[2.0, 0.0]], requires_grad=True)
    targets = torch.tensor([[1, 0]])
    p = torch.softmax(logits.detach(), dim=1)[0]
    gap = (p[0] - p[1]).item()  # the float32 gap the criterion sees: "> delta" is false at it
    loss = multilabel_as_softmax_loss(logits, targets, gap)
    assert_close(loss, multilabel_categorical_crossentropy(logits, targets))
    assert loss.item() > 0
    below = multilabel_as_softmax_loss(logits, targets, gap * 0.999)  # gap > delta: both masked
    assert below.item() == 0.0
    below.backward()
    assert torch.equal(logits.grad, torch.zeros_like(logits))


def test_all_masked_batch_has_zero_loss_and_gradient():
    logits = torch.tensor([[8.0, -8.0, -8.0], [-8.0, 8.0, 8.0]], requires_grad=True)
    targets = torch.tensor([[1, 0, 0], [0, 1, 1]])
    loss, stats = multilabel_as_softmax_with_stats(logits, targets, 0.3)
    assert loss.item() == 0.0
    loss.backward()
    assert torch.equal(logits.grad, torch.zeros_like(logits))
    assert (stats.n_active, stats.n_masked) == (2, 2)


@pytest.mark.parametrize("delta", [0.01, 0.2, 0.4])
def test_mask_stats_count_the_rows_with_nothing_kept(delta):
    logits, targets = make_batch(torch.float32, n=40, c=5, scale=5.0, seed=3)
    _, stats = multilabel_as_softmax_with_stats(logits, targets, delta)
    expected = sum(ref_as_kept(o, y, delta) == ([], []) for o, y in zip(logits.double(), targets))
    assert stats.n_active == 40
    assert stats.n_masked == expected
    assert 0 < expected < 40


# ---- large logits -------------------------------------------------------------------------------


@pytest.mark.parametrize("delta", [None, 0.3])
@pytest.mark.parametrize("dtype", DTYPES)
def test_large_logits_give_finite_losses_and_gradients(dtype, delta):
    logits = torch.tensor([[1e4, -1e4, -1e4], [-1e4, 1e4, 1e4]], dtype=dtype, requires_grad=True)
    targets = torch.tensor([[1, 0, 0], [1, 0, 0]])
    if delta is None:
        loss = multilabel_categorical_crossentropy(logits, targets, reduction="none")
    else:
        loss = multilabel_as_softmax_loss(logits, targets, delta, reduction="none")
    big = logits.detach()[1, 1].double()
    # Row 0 is right by a mile (0 loss; masked under AS), row 1 wrong: log(2 e^big) + big.
    expected = torch.stack([torch.zeros((), dtype=torch.float64), 2 * big + math.log(2)])
    assert_close(loss.double(), expected, **TOL[dtype])
    loss.sum().backward()
    assert torch.isfinite(logits.grad).all()
    # exp(o - logsumexp) at |o| = 1e4 carries the rounding of a 1e4-sized logsumexp (float32: 1e-4).
    expected_grad = torch.tensor([-1.0, 0.5, 0.5], dtype=torch.float64)
    assert_close(logits.grad[1].double(), expected_grad, rtol=0, atol=max(TOL[dtype]["atol"], 1e-3))


# ---- targets, validation, modules ----------------------------------------------------------------


def test_bool_int_and_float_targets_agree():
    logits, targets = make_batch(torch.float32)
    losses = [
        multilabel_as_softmax_loss(logits, t, 0.3)
        for t in (targets, targets.bool(), targets.float())
    ]
    assert torch.equal(losses[0], losses[1]) and torch.equal(losses[0], losses[2])


@pytest.mark.parametrize("delta", [0.0, -0.1, 1.5, float("nan"), "0.3"])
def test_delta_out_of_range_is_rejected(delta):
    logits, targets = make_batch(torch.float32)
    with pytest.raises(ValueError, match=r"delta must be .*\(0\.0, 1\.0\].*" + str(delta)[:3]):
        multilabel_as_softmax_loss(logits, targets, delta)
    with pytest.raises(ValueError, match="delta"):
        MultiLabelASSoftmaxLoss(delta)


@pytest.mark.parametrize(
    "logits, targets, match",
    [
        (torch.zeros(4), torch.zeros(4), r"logits must have shape \(N, C\).*\(4,\)"),
        (torch.zeros(2, 3), torch.zeros(2, 4), r"targets must have the shape .*\(2, 3\).*\(2, 4\)"),
        (torch.zeros(2, 3), torch.tensor([[0, 1, 2], [0, 0, 1]]), r"only 0 and 1.*\[2\]"),
        (torch.zeros(2, 2), torch.tensor([[0.5, 1.0], [0.0, 1.0]]), r"only 0 and 1.*\[0\.5\]"),
        (torch.zeros(2, 2, dtype=torch.long), torch.zeros(2, 2), "float tensor.*torch.int64"),
    ],
)
def test_bad_inputs_are_rejected(logits, targets, match):
    with pytest.raises(ValueError, match=match):
        multilabel_categorical_crossentropy(logits, targets)
    with pytest.raises(ValueError, match=match):
        multilabel_as_softmax_loss(logits, targets, 0.3)


def test_bad_reduction_is_rejected():
    logits, targets = make_batch(torch.float32)
    with pytest.raises(ValueError, match="reduction must be one of .*'avg'"):
        multilabel_categorical_crossentropy(logits, targets, reduction="avg")
    with pytest.raises(ValueError, match="reduction must be one of .*'avg'"):
        MultiLabelASSoftmaxLoss(0.3, reduction="avg")


def test_modules_match_the_functions_and_follow_delta_changes():
    logits, targets = make_batch(torch.float32, n=30, c=5, scale=5.0, seed=3)
    plain = MultiLabelCategoricalCrossEntropy(reduction="none")
    assert_close(plain(logits, targets), ref_rows(logits.double(), targets, None).float())
    module = MultiLabelASSoftmaxLoss(0.3, reduction="none")
    assert module.last_stats is None
    loss = module(logits, targets)
    assert loss.shape == (30,)
    assert_close(loss, ref_rows(logits.double(), targets, 0.3).float())
    assert module.last_stats.n_active == 30 and module.last_stats.n_masked > 0
    module.set_delta(1.0)
    assert torch.equal(module(logits, targets), plain(logits, targets))
    assert module.last_stats.n_masked == 0
    assert repr(module) == "MultiLabelASSoftmaxLoss(delta=1.0, reduction='none', kernel='auto')"
