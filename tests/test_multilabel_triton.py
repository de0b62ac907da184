"""The fused multi-label AS-Softmax kernel against a plain reference written here.

As tests/test_as_softmax_triton.py: each check is a function of (device, dtype); on the CPU
they run under triton's interpreter in one subprocess (fp32 and fp16), and the ``gpu`` tests run
them on CUDA, bf16 included.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch
from triton_checks import (
    assert_interpreter_checks_pass,
    assert_matches,
    compile_for_h100,
    run_checks,
)

from astune.losses import multilabel_as_softmax_with_stats

DELTA = 0.3
BOUNDARY = 1e-6  # rows whose criterion lies this close to delta may mask either way


def reference(logits: torch.Tensor, positive: torch.Tensor, delta: float):
    """Row by row in float64, from the paper: a negative ``i`` is masked when
    ``p_t^min - p_i > delta``, a positive ``t`` when ``p_t - p_i^max > delta``; a row without a
    positive or a negative masks nothing.

    Returns per-row losses ``(N,)``, kept entries ``(N, C)``, the gaps ``(N,)`` (inf where
    undecidable) and which rows lie within BOUNDARY of a criterion ``(N,)``.
    """
    losses, kept, gaps, near = [], [], [], []
    for row, pos in zip(logits.double(), positive):
        probs = torch.softmax(row, dim=0)
        keep = torch.ones_like(pos)
        gap, close = row.new_tensor(float("inf")), False
        if pos.any() and (~pos).any():
            low, high = probs[pos].min(), probs[~pos].max()
            neg_gap, pos_gap = low - probs, probs - high
            keep = torch.where(pos, ~(pos_gap > delta), ~(neg_gap > delta))
            gap = low - high
            close = bool((torch.where(pos, pos_gap, neg_gap) - delta).abs().lt(BOUNDARY).any())
        zero = row.new_zeros(1)
        neg_scores = row[~pos & keep]
        pos_scores = -row[pos & keep]
        losses.append(
            torch.logsumexp(torch.cat([neg_scores, zero]), 0)
            + torch.logsumexp(torch.cat([pos_scores, zero]), 0)
        )
        kept.append(keep)
        gaps.append(gap.detach())
        near.append(close)
    return torch.stack(losses), torch.stack(kept), torch.stack(gaps), torch.tensor(near)


def make_batch(n: int, num_classes: int, dtype, device, seed: int = 0, lead: float = 8.0):
    """0/1 float targets with a random lead of the positives (some rows fully masked, some
    not); row 0 has no positive, row 1 no negative."""
    gen = torch.Generator().manual_seed(seed)
    positive = torch.rand(n, num_classes, generator=gen) < 0.15
    positive[2:, 0] = True
    positive[0], positive[1] = False, True
    logits = torch.randn(n, num_classes, generator=gen, dtype=torch.float64) * 2
    logits += positive * (torch.rand(n, 1, generator=gen, dtype=torch.float64) * lead)
    return logits.to(dtype).to(device), positive.float().to(device)


def run_triton(logits, targets, *, reduction="sum", delta=DELTA, **kwargs):
    from astune.losses.multilabel_triton import multilabel_rows_triton

    leaf = logits.detach().clone().requires_grad_()
    out = multilabel_rows_triton(leaf, targets, delta, reduction=reduction, **kwargs)
    out.loss.sum().backward()
    return out, leaf.grad


def reference_grad(logits, targets, reduce=torch.sum, delta: float = DELTA):
    leaf = logits.detach().double().cpu().requires_grad_()
    rows, kept, gaps, near = reference(leaf, targets.cpu() == 1, delta)
    reduce(rows).backward()
    return rows.detach(), leaf.grad, kept, gaps, near


# ---------------------------------------------------------------- checks (device, dtype)
def check_values_gradients_and_masks(device, dtype):
    """Per-row loss and gradient equal the reference away from the thresholds; fully masked
    rows get exactly 0; flags and gaps equal the reference's; masked entries get no gradient."""
    for n, num_classes in ((96, 5), (40, 28), (12, 300)):
        logits, targets = make_batch(n, num_classes, dtype, device)
        out, grad = run_triton(logits, targets, reduction="none")
        rows, expected_grad, kept, gaps, near = reference_grad(logits, targets)
        far = ~near
        assert out.loss.shape == (n,) and out.loss.dtype == dtype and grad.dtype == dtype
        assert_matches(out.loss, rows, dtype, far)
        assert_matches(grad, expected_grad, dtype, far)
        fully = ~kept.any(dim=1)
        if num_classes == 5:
            assert fully.sum() > 5 and (~fully).sum() > 5, "the batch tests both kinds"
        assert torch.equal(out.fully_masked.cpu()[far], fully[far])
        dead = out.fully_masked.cpu()
        assert torch.count_nonzero(out.loss.cpu()[dead]) == 0
        assert torch.count_nonzero(grad.cpu()[dead]) == 0
        assert torch.all(grad.cpu()[far.unsqueeze(1) & ~kept] == 0), "masked: exactly 0"
        finite = torch.isfinite(gaps)
        assert not finite[:2].any() and finite[2:].all()
        assert torch.equal(torch.isfinite(out.margin.cpu()), finite)
        torch.testing.assert_close(out.margin.cpu()[finite].double(), gaps[finite],
                                   rtol=0, atol=1e-6)  # fmt: skip


def check_small_losses_keep_their_digits(device, dtype):
    """Rows whose kept mass is small (loss 1e-6 to 1e-4): the loss is that mass, not
    ``log(1 + mass)`` rounded in float32."""
    gen = torch.Generator().manual_seed(6)
    positive = torch.zeros(256, 6, dtype=torch.bool)
    positive[:, :2] = True
    logits = 11 + 4 * torch.rand(256, 6, generator=gen, dtype=torch.float64)
    logits[:, 2:] = -logits[:, 2:]  # positives far above 0, negatives far below
    logits, targets = logits.to(dtype).to(device), positive.float().to(device)
    out, grad = run_triton(logits, targets, reduction="none", delta=1.0)
    rows, expected_grad, _, _, _ = reference_grad(logits, targets, delta=1.0)
    assert rows.max() < 1e-4 and rows.min() > 1e-7, "the batch has small losses"
    if dtype == torch.float32:  # relative: an absolute 1e-6 would hide the lost digits
        for ours, expected in ((out.loss, rows), (grad, expected_grad)):
            torch.testing.assert_close(ours.cpu().double(), expected, rtol=1e-5, atol=0)
    else:
        assert_matches(out.loss, rows, dtype)
        assert_matches(grad, expected_grad, dtype)


def check_reductions_and_row_weights(device, dtype):
    """mean over every row, sum, and per-row weights on reduction="none": values and
    gradients as the reference's (the backward scales each row by its weight)."""
    logits, targets = make_batch(30, 7, dtype, device, seed=1, lead=3.0)
    weights = torch.rand(30, dtype=torch.float64) + 0.5
    reduces = {"sum": torch.sum, "mean": torch.mean, "none": lambda r: (r * weights).sum()}
    eps = torch.finfo(dtype).eps
    # half precision: a half-precision sum rounds at each step; weights rounded to the dtype
    tolerance = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=4e-3, atol=eps)
    for reduction, reduce in reduces.items():
        from astune.losses.multilabel_triton import multilabel_rows_triton

        leaf = logits.detach().clone().requires_grad_()
        loss = multilabel_rows_triton(leaf, targets, DELTA, reduction=reduction).loss
        if reduction == "none":
            loss = loss * weights.to(device=device, dtype=dtype)
        loss.sum().backward()
        rows, expected_grad, _, _, near = reference_grad(logits, targets, reduce)
        assert not near.any()
        if reduction != "none":
            torch.testing.assert_close(loss.double().cpu(), reduce(rows), **tolerance)
        torch.testing.assert_close(leaf.grad.double().cpu(), expected_grad, **tolerance)


def check_stats_equal_the_torch_path(device, dtype):
    """MaskStats of the kernel and of the torch path: the same counts and headroom; its
    margins are the loop's p_margins of the logits, without reading them again."""
    from astune.losses.multilabel_triton import multilabel_as_softmax_with_stats_triton
    from astune.training.evaluate import p_margins

    logits, targets = make_batch(400, 5, dtype, device, seed=3)
    _, ours = multilabel_as_softmax_with_stats_triton(logits, targets, DELTA)
    _, torch_stats = multilabel_as_softmax_with_stats(logits, targets, DELTA, kernel="torch")
    assert torch_stats.n_masked > 50
    assert torch.equal(ours.counts(), torch_stats.counts())
    torch.testing.assert_close(ours.headroom_rows(), torch_stats.headroom_rows(),
                               rtol=1e-4, atol=1e-5)  # fmt: skip
    torch.testing.assert_close(ours.active_margins(), p_margins(logits, targets), rtol=0,
                               atol=1e-6 if dtype == torch.float32 else 1e-3)  # fmt: skip


def check_logits_kept_unless_overwrite_asked(device, dtype):
    """A second user of the logits sees them after backward; ``overwrite_logits`` (function or
    module) writes the gradient there instead, and that is the gradient backward returns."""
    from astune.losses import MultiLabelASSoftmaxLoss

    logits, targets = make_batch(40, 13, dtype, device, seed=4)
    original = logits.clone()
    leaf = logits.clone().requires_grad_()
    MultiLabelASSoftmaxLoss(DELTA, kernel="triton")(leaf, targets).backward()
    assert torch.equal(leaf.detach(), original) and leaf.grad.abs().sum() > 0
    buffer = logits.clone().requires_grad_()
    MultiLabelASSoftmaxLoss(DELTA, kernel="triton", overwrite_logits=True)(
        buffer, targets
    ).backward()
    assert torch.equal(buffer.grad, leaf.grad) and torch.equal(buffer.detach(), leaf.grad)


def check_public_function_and_retained_graph(device, dtype):
    """``kernel="triton"`` of multilabel_as_softmax_loss is the fused kernel's result; a graph
    kept for a second backward gives the same gradient twice."""
    from astune.losses import multilabel_as_softmax_loss
    from astune.losses.multilabel_triton import multilabel_rows_triton

    logits, targets = make_batch(24, 9, dtype, device, seed=7)
    fused = multilabel_rows_triton(logits, targets, DELTA, reduction="none").loss
    public = multilabel_as_softmax_loss(logits, targets, DELTA, reduction="none", kernel="triton")
    assert torch.equal(public, fused)
    leaf = logits.clone().requires_grad_()
    loss = multilabel_as_softmax_loss(leaf, targets, DELTA, reduction="sum", kernel="triton") * 3
    first = torch.autograd.grad(loss, leaf, retain_graph=True)[0]
    assert torch.equal(first, torch.autograd.grad(loss, leaf)[0]) and first.abs().sum() > 0


CHECKS = [
    check_values_gradients_and_masks,
    check_small_losses_keep_their_digits,
    check_reductions_and_row_weights,
    check_stats_equal_the_torch_path,
    check_logits_kept_unless_overwrite_asked,
    check_public_function_and_retained_graph,
]


# ---------------------------------------------------------------------------- CPU tests
def test_interpreter_checks_pass_in_a_subprocess():
    assert_interpreter_checks_pass(__file__, CHECKS)


def test_wide_rows_and_cpu_tensors_are_refused_in_one_line_and_auto_takes_torch():
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.fail("run this test without TRITON_INTERPRET=1: it checks the refusal")
    from astune.losses.multilabel import chosen_multilabel_kernel
    from astune.losses.multilabel_triton import multilabel_rows_triton

    wide = torch.zeros(2, 8193)
    with pytest.raises(ValueError, match=r"^kernel='triton' takes multi-label rows of at most "
                       r"8192 classes, but got 8193; use kernel='torch'") as err:  # fmt: skip
        multilabel_rows_triton(wide, torch.zeros_like(wide), DELTA)
    logits, targets = make_batch(4, 6, torch.float32, "cpu")
    with pytest.raises(ValueError, match=r"^kernel='triton' needs CUDA tensors[^\n]*cpu"):
        multilabel_rows_triton(logits, targets, DELTA)
    assert "\n" not in str(err.value)
    assert chosen_multilabel_kernel("auto", logits, DELTA) == "torch"
    with pytest.raises(ValueError, match=r"targets must hold only 0 and 1, but got values \[2"):
        multilabel_rows_triton(logits, targets * 2, DELTA)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("num_classes", [5, 28, 8192])
def test_the_kernel_compiles_for_an_h100_without_one(dtype, num_classes):
    """What the interpreter does not check: the kernel lowers to PTX and assembles."""
    from astune.losses import _as_softmax_kernels as kernels
    from astune.losses.as_softmax_triton import launch_shape

    shape = launch_shape(num_classes)
    warps, _ = shape.pop("num_warps"), shape.pop("SINGLE")
    types = dict(
        logits_ptr=f"*{dtype}", grad_ptr=f"*{dtype}", positive_ptr="*i8", loss_ptr="*fp32",
        masked_ptr="*i8", gap_ptr="*fp32", n_rows="i32", n_cols="i32", logits_stride="i32",
        grad_stride="i32", positive_stride="i32", delta="fp32", row_scale="fp32",
    )  # fmt: skip
    compile_for_h100(kernels.multilabel_as_forward, types, shape | dict(STORE_GRAD=True), warps)


# ---------------------------------------------------------------------------- GPU tests
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_on_cuda(check, dtype):
    check("cuda", dtype)


@pytest.mark.gpu
def test_auto_takes_the_fused_kernel_for_cuda_rows_that_fit_one_block():
    from astune.losses.multilabel import chosen_multilabel_kernel

    logits = torch.zeros(2, 28, device="cuda")
    assert chosen_multilabel_kernel("auto", logits, DELTA) == "triton"
    assert chosen_multilabel_kernel("auto", logits.bfloat16(), DELTA) == "triton"
    assert chosen_multilabel_kernel("auto", logits.double(), DELTA) == "torch"
    assert chosen_multilabel_kernel("auto", torch.zeros(2, 8193, device="cuda"), DELTA) == "torch"


if __name__ == "__main__":  # the interpreter run: TRITON_INTERPRET=1 python this_file
    problems = run_checks(CHECKS, "cpu", [torch.float32, torch.float16])
    print("\n".join(problems) or f"{2 * len(CHECKS)} checks passed")
    sys.exit(1 if problems else 0)
