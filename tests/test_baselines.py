"""The single-label baselines against plain references written from the paper's definitions."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from astune.losses import (
    AMSoftmaxLoss,
    ASVariantLoss,
    Entmax15Loss,
    LabelSmoothingLoss,
    SoftmaxLoss,
    SparsemaxLoss,
    SparseSoftmaxLoss,
    TSoftmaxLoss,
    am_softmax_loss,
    as_variant_loss,
    as_variant_with_stats,
    entmax15_loss,
    label_smoothing_loss,
    softmax_loss,
    sparse_softmax_loss,
    sparsemax_loss,
    t_softmax_loss,
)

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
SHAPES = [(8,), (3, 5)]
TOL = {
    torch.float64: dict(rtol=1e-10, atol=1e-10),
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float16: dict(rtol=1e-2, atol=1e-2),
    torch.bfloat16: dict(rtol=2e-2, atol=5e-2),
}
C = 7


def make_batch(shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0):
    """Logits ``shape + (C,)`` and labels ``shape`` with two ignored rows, one of them extreme."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(*shape, C, generator=gen, dtype=torch.float64) * 2
    labels = torch.randint(0, C, shape, generator=gen)
    flat_logits, flat_labels = logits.view(-1, C), labels.view(-1)
    flat_labels[[1, -1]] = -100
    flat_logits[1] = torch.linspace(-1e4, 1e4, C, dtype=torch.float64)
    return logits.to(dtype), labels


# ---- plain references, one row at a time: o is a float64 (C,) tensor, t the target ---------------


def ref_cross_entropy(o: torch.Tensor, t: int, kept: list[int] | None = None) -> torch.Tensor:
    kept = list(range(len(o))) if kept is None else kept
    return torch.log(sum(torch.exp(o[j]) for j in kept)) - o[t]


def ref_t_softmax(o: torch.Tensor, t: int, tau: float) -> torch.Tensor:
    return ref_cross_entropy(o / tau, t)


def ref_label_smoothing(o: torch.Tensor, t: int, epsilon: float) -> torch.Tensor:
    log_p = o - torch.log(torch.exp(o).sum())
    weights = [1 - epsilon if j == t else epsilon / (len(o) - 1) for j in range(len(o))]
    return -sum(w * log_p[j] for j, w in enumerate(weights))


def ref_sparse_softmax(o: torch.Tensor, t: int, k: int) -> torch.Tensor:
    kth = sorted(o.tolist(), reverse=True)[min(k, len(o)) - 1]
    return ref_cross_entropy(o, t, [j for j in range(len(o)) if o[j] >= kth or j == t])


def ref_am_softmax(o: torch.Tensor, t: int, s: float, m: float) -> torch.Tensor:
    shift = s * o.detach().max()  # cancels in the ratio; keeps e^(s o) finite for large s o
    target = torch.exp(s * (o[t] - m) - shift)
    others = sum(torch.exp(s * o[j] - shift) for j in range(len(o)) if j != t)
    return -torch.log(target / (target + others))


def ref_as_variant(o: torch.Tensor, t: int, margin: float) -> torch.Tensor:
    return ref_cross_entropy(o, t, [j for j in range(len(o)) if not o[t] - o[j] >= margin])


def ref_threshold_probs(z: torch.Tensor, power: float) -> torch.Tensor:
    """``p = max(z - tau, 0) ** power`` with ``sum(p) = 1``, ``tau`` found by bisection."""
    lo, hi = z.max() - 1, z.max()  # sum(p) >= 1 at lo, 0 at hi
    for _ in range(100):
        mid = (lo + hi) / 2
        if (torch.clamp(z - mid, min=0) ** power).sum() >= 1:
            lo = mid
        else:
            hi = mid
    return torch.clamp(z - (lo + hi) / 2, min=0) ** power


def ref_sparsemax(o: torch.Tensor, t: int) -> torch.Tensor:
    """Fenchel-Young loss of sparsemax; p is a constant, so autograd gives ``p - onehot(t)``."""
    p = ref_threshold_probs(o.detach(), 1.0)
    return (1 - (p**2).sum()) / 2 + (p * o).sum() - o[t]


def ref_entmax15(o: torch.Tensor, t: int) -> torch.Tensor:
    """Fenchel-Young loss of 1.5-entmax, ``p = max(o / 2 - tau, 0) ** 2``."""
    p = ref_threshold_probs(o.detach() / 2, 2.0)
    return (1 - (p**1.5).sum()) / 0.75 + (p * o).sum() - o[t]


CASES = {
    "softmax": (softmax_loss, SoftmaxLoss, {}, ref_cross_entropy),
    "t_softmax": (t_softmax_loss, TSoftmaxLoss, {"tau": 0.5}, ref_t_softmax),
    "label_smoothing": (
        label_smoothing_loss,
        LabelSmoothingLoss,
        {"epsilon": 0.3},
        ref_label_smoothing,
    ),
    "sparse_softmax": (sparse_softmax_loss, SparseSoftmaxLoss, {"k": 3}, ref_sparse_softmax),
    "sparsemax": (sparsemax_loss, SparsemaxLoss, {}, ref_sparsemax),
    "entmax15": (entmax15_loss, Entmax15Loss, {}, ref_entmax15),
    "am_softmax": (am_softmax_loss, AMSoftmaxLoss, {"s": 10.0, "m": 0.3}, ref_am_softmax),
    "as_variant": (as_variant_loss, ASVariantLoss, {"margin": 1.0}, ref_as_variant),
}


def ref_losses(name: str, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Reference losses shaped like ``labels``, 0 at ignored rows."""
    _, _, params, ref = CASES[name]
    rows = [
        ref(o, int(t), **params) if t != -100 else o.sum() * 0
        for o, t in zip(logits.view(-1, C), labels.view(-1))
    ]
    return torch.stack(rows).view(labels.shape)


# ---- values and gradients against the references ------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CASES))
def test_loss_matches_reference(name, dtype, shape):
    fn, _, params, _ = CASES[name]
    logits, labels = make_batch(shape, dtype)
    expected = ref_losses(name, logits.double(), labels)
    none = fn(logits, labels, **params, reduction="none")
    assert none.shape == labels.shape and none.dtype == dtype
    assert_close(none.double(), expected, **TOL[dtype])
    total = fn(logits, labels, **params, reduction="sum")
    assert_close(total.double(), expected.sum(), **TOL[dtype])
    mean = fn(logits, labels, **params)  # the default reduction: over the non-ignored rows
    assert_close(mean.double(), expected.sum() / (labels != -100).sum(), **TOL[dtype])


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CASES))
def test_gradients_match_reference(name, dtype, shape):
    fn, _, params, _ = CASES[name]
    logits, labels = make_batch(shape, dtype)
    logits.requires_grad_(True)
    fn(logits, labels, **params, reduction="sum").backward()
    ref_logits = logits.detach().double().requires_grad_(True)
    ref_losses(name, ref_logits, labels).sum().backward()
    assert logits.grad.dtype == dtype
    assert_close(logits.grad.double(), ref_logits.grad, **TOL[dtype])
    ignored = labels == -100
    assert torch.equal(logits.grad[ignored], torch.zeros_like(logits.grad[ignored]))


@pytest.mark.parametrize("name", list(CASES))
def test_all_rows_ignored(name):
    fn, _, params, _ = CASES[name]
    logits, _ = make_batch((4,), torch.float32)
    logits.requires_grad_(True)
    labels = torch.full((4,), -100)
    assert torch.equal(fn(logits, labels, **params, reduction="none"), torch.zeros(4))
    assert math.isnan(fn(logits, labels, **params).item())  # 0 / 0, as F.cross_entropy gives
    total = fn(logits, labels, **params, reduction="sum")
    assert total.item() == 0.0
    total.backward()
    assert torch.equal(logits.grad, torch.zeros_like(logits))


@pytest.mark.parametrize("fn", [sparsemax_loss, entmax15_loss])
def test_entmax_losses_pass_gradcheck(fn):
    logits, labels = make_batch((2, 3), torch.float64, seed=1)
    logits[0, 1] = torch.randn(C, dtype=torch.float64)  # smooth values in the ignored row too
    logits.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: fn(x, labels, reduction="none"), (logits,))


# ---- the choices each baseline makes -------------------------------------------------------------


def test_softmax_is_f_cross_entropy():
    logits, labels = make_batch((3, 5), torch.float32)
    expected = F.cross_entropy(logits.view(-1, C), labels.view(-1), ignore_index=-100)
    assert_close(softmax_loss(logits, labels), expected)


def test_t_softmax_at_tau_one_is_softmax():
    logits, labels = make_batch((8,), torch.float32)
    assert_close(t_softmax_loss(logits, labels, 1.0), softmax_loss(logits, labels))


def test_label_smoothing_follows_the_paper_not_torch():
    logits, labels = make_batch((8,), torch.float64)
    ours = label_smoothing_loss(logits, labels, 0.3)
    # The paper's epsilon / (C - 1) off-target weight is torch's form at epsilon * C / (C - 1).
    torch_same = F.cross_entropy(logits, labels, label_smoothing=0.3 * C / (C - 1))
    torch_other = F.cross_entropy(logits, labels, label_smoothing=0.3)
    assert_close(ours, torch_same)
    assert not torch.allclose(ours, torch_other)
    assert_close(label_smoothing_loss(logits, labels, 0.0), softmax_loss(logits, labels))


def test_sparse_softmax_keeps_a_target_outside_the_top_k():
    logits = torch.tensor([[5.0, 4.0, 3.0, 2.0, 1.0, 0.0]], requires_grad=True)
    loss = sparse_softmax_loss(logits, torch.tensor([5]), 2)
    expected = math.log(math.exp(5.0) + math.exp(4.0) + math.exp(0.0)) - 0.0
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    loss.backward()
    assert torch.equal(logits.grad[0, 2:5], torch.zeros(3))  # the dropped classes


def test_sparse_softmax_keeps_every_class_tied_with_the_kth():
    logits = torch.tensor([[3.0, 2.0, 2.0, 2.0, 0.0]])
    loss = sparse_softmax_loss(logits, torch.tensor([0]), 2)
    expected = math.log(math.exp(3.0) + 3 * math.exp(2.0)) - 3.0
    assert loss.item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("k", [C, C + 5])
def test_sparse_softmax_with_k_at_least_c_is_softmax(k):
    logits, labels = make_batch((3, 5), torch.float32)
    assert_close(sparse_softmax_loss(logits, labels, k), softmax_loss(logits, labels))


def test_am_softmax_without_margin_is_scaled_softmax():
    logits, labels = make_batch((3, 5), torch.float32)
    assert_close(am_softmax_loss(logits, labels, 1.0, 0.0), softmax_loss(logits, labels))
    assert_close(am_softmax_loss(logits, labels, 2.0, 0.0), softmax_loss(2 * logits, labels))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_am_softmax_does_not_overflow_in_half_precision(dtype):
    logits = torch.tensor([[3000.0, 2990.0, 0.0]], dtype=dtype, requires_grad=True)
    loss = am_softmax_loss(logits, torch.tensor([1]), 30.0, 0.35)  # s * o is beyond 65504
    expected = ref_am_softmax(logits.detach()[0].double(), 1, 30.0, 0.35)
    assert torch.isfinite(loss)
    assert_close(loss.double(), expected, **TOL[dtype])
    loss.backward()
    assert torch.isfinite(logits.grad).all()


def test_as_variant_masks_a_gap_equal_to_the_margin():
    logits = torch.tensor([[2.0, 1.0, 0.0], [2.0, 1.5, 0.0]], requires_grad=True)
    labels = torch.tensor([0, 0])
    loss, stats = as_variant_with_stats(logits, labels, 1.0, reduction="none")
    assert loss[0].item() == 0.0  # gaps 1 and 2 both >= 1: every non-target class masked
    assert loss[1].item() == pytest.approx(math.log(math.exp(2.0) + math.exp(1.5)) - 2.0, rel=1e-6)
    assert (stats.n_active, stats.n_masked) == (2, 1)
    loss.sum().backward()
    assert torch.equal(logits.grad[0], torch.zeros(3))
    assert logits.grad[1, 2].item() == 0.0


def test_as_variant_stats_count_fully_masked_rows():
    logits, labels = make_batch((6, 5), torch.float32, seed=2)
    module = ASVariantLoss(1.0)
    assert module.last_stats is None
    module(logits, labels)
    masked = [
        all(o[t] - o[j] >= 1.0 for j in range(C) if j != t)
        for o, t in zip(logits.view(-1, C).double(), labels.view(-1))
        if t != -100
    ]
    assert module.last_stats.n_active == 28
    assert module.last_stats.n_masked == sum(masked) > 0


# ---- modules, validation -------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_modules_match_the_functions(name):
    fn, module_cls, params, _ = CASES[name]
    logits, labels = make_batch((3, 5), torch.float32)
    labels = labels.masked_fill(labels == -100, -1)
    module = module_cls(**params, ignore_index=-1, reduction="none")
    expected = fn(logits, labels, **params, ignore_index=-1, reduction="none")
    assert torch.equal(module(logits, labels), expected)
    assert (module(logits, labels)[labels == -1] == 0).all()
    for key, value in params.items():
        assert f"{key}={value}" in repr(module)
    assert "ignore_index=-1, reduction='none'" in repr(module)


BAD_PARAMS = [
    ("t_softmax", {"tau": 0.0}, r"tau must be in \(0\.0, inf\), but got 0\.0"),
    ("t_softmax", {"tau": -1}, r"tau must be in \(0\.0, inf\), but got -1"),
    ("label_smoothing", {"epsilon": 1.0}, r"epsilon must be in \[0\.0, 1\.0\), but got 1\.0"),
    ("label_smoothing", {"epsilon": -0.1}, r"epsilon .* got -0\.1"),
    ("sparse_softmax", {"k": 0}, r"k must be an integer in \[1, inf\), but got 0"),
    ("sparse_softmax", {"k": 2.5}, r"k must be an integer .* got 2\.5"),
    ("am_softmax", {"s": 0.0, "m": 0.3}, r"s must be in \(0\.0, inf\), but got 0\.0"),
    ("am_softmax", {"s": 10.0, "m": -0.1}, r"m must be in \[0\.0, inf\), but got -0\.1"),
    ("as_variant", {"margin": 0.0}, r"margin must be in \(0\.0, inf\), but got 0\.0"),
    ("as_variant", {"margin": float("nan")}, r"margin must be a number .* got nan"),
]


@pytest.mark.parametrize("name, params, match", BAD_PARAMS)
def test_bad_parameters_are_rejected(name, params, match):
    fn, module_cls, _, _ = CASES[name]
    logits, labels = make_batch((4,), torch.float32)
    with pytest.raises(ValueError, match=match):
        fn(logits, labels, **params)
    with pytest.raises(ValueError, match=match):
        module_cls(**params)


@pytest.mark.parametrize("name", list(CASES))
def test_bad_inputs_are_rejected(name):
    fn, module_cls, params, _ = CASES[name]
    logits, labels = make_batch((4,), torch.float32)
    with pytest.raises(ValueError, match="reduction must be one of .*'avg'"):
        fn(logits, labels, **params, reduction="avg")
    with pytest.raises(ValueError, match="reduction must be one of .*'avg'"):
        module_cls(**params, reduction="avg")
    with pytest.raises(ValueError, match=r"labels must have shape \(4,\) .* got \(5,\)"):
        fn(logits, torch.zeros(5, dtype=torch.long), **params)
    with pytest.raises(ValueError, match="integer class indices.*float32"):
        fn(logits, labels.float(), **params)
    with pytest.raises(ValueError, match=r"logits must have shape .* got \(7,\)"):
        fn(logits[0], labels[0], **params)
    with pytest.raises(ValueError, match=r"labels must be in \[0, 6\] or ignore_index.* \[7\]"):
        fn(logits, torch.tensor([0, 7, -100, 2]), **params)
