"""The fused Triton AS-Softmax against a plain reference written here.

Each check is a function of (device, dtype). On the CPU they run under triton's interpreter, in
one subprocess with TRITON_INTERPRET=1 (it must be set before triton is imported), in float32
and float16 (the interpreter lacks bf16). The ``gpu`` tests run the same checks on CUDA, bf16
included; CI deselects them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import pytest
import torch
from triton_checks import (
    assert_interpreter_checks_pass,
    assert_matches,
    compile_for_h100,
    run_checks,
)

from astune.losses import as_softmax_with_stats

DELTA = 0.3
BOUNDARY = 1e-6  # rows whose p_t - p_i lies this close to delta may mask either way


def reference(logits: torch.Tensor, labels: torch.Tensor, delta: float, ignore_index: int = -100):
    """Row by row in float64, from the paper: z_i = 0 iff p_t - p_i > delta and i != t.

    Returns per-row losses ``(M,)`` (0 at ignored rows), the keep mask ``(M, C)``, the
    p-margins ``(M,)`` and which rows lie within BOUNDARY of their threshold ``(M,)``.
    """
    flat = logits.reshape(-1, logits.shape[-1]).double()
    losses, keeps, margins, near = [], [], [], []
    for row, target in zip(flat, labels.reshape(-1).tolist()):
        probs = torch.softmax(row, dim=0)
        if target == ignore_index:
            losses.append(row.sum() * 0)
            keeps.append(torch.ones_like(row, dtype=torch.bool))
            margins.append(probs.new_tensor(0.0))
            near.append(False)
            continue
        gap = probs[target] - probs
        keep = ~(gap > delta)
        keep[target] = True
        losses.append(torch.logsumexp(row.masked_fill(~keep, float("-inf")), dim=0) - row[target])
        keeps.append(keep)
        margins.append(probs[target] - probs.detach().clone().index_fill_(0, probs.new_tensor(
            [target], dtype=torch.long), float("-inf")).max())  # fmt: skip
        near.append(bool(((gap - delta).abs() < BOUNDARY).any()))
    return torch.stack(losses), torch.stack(keeps), torch.stack(margins), torch.tensor(near)


def make_batch(shape, num_classes: int, dtype, device, seed: int = 0):
    """Targets that lead by a random margin (some rows fully masked, some not); every 7th row
    ignored."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, num_classes, shape, generator=gen)
    logits = torch.randn(*shape, num_classes, generator=gen, dtype=torch.float64) * 2
    lead = torch.rand(*shape, generator=gen, dtype=torch.float64) * 8
    logits.scatter_add_(-1, labels.unsqueeze(-1), lead.unsqueeze(-1))
    labels.view(-1)[::7] = -100
    return logits.to(dtype).to(device), labels.to(device)


def run_triton(logits, labels, *, reduction="sum", **kwargs):
    from astune.losses.as_softmax_triton import as_softmax_rows_triton

    leaf = logits.detach().clone().requires_grad_()
    out = as_softmax_rows_triton(leaf, labels, DELTA, reduction=reduction, **kwargs)
    out.loss.sum().backward()
    return out, leaf.grad


def reference_grad(logits, labels, reduce: Callable = torch.sum, delta: float = DELTA):
    leaf = logits.detach().double().cpu().requires_grad_()
    rows, keep, margin, near = reference(leaf, labels.cpu(), delta)
    reduce(rows).backward()
    return rows.detach(), leaf.grad, keep, margin, near


# ---------------------------------------------------------------- checks (device, dtype)
SHAPES = [((64,), 5, {}), ((8, 12), 151, {}), ((2, 9), 300, {"max_single_block": 64})]


def check_values_gradients_and_masks(device, dtype):
    """Per-row loss and gradient equal the reference away from the threshold; fully masked rows
    get exactly 0; the flags equal the reference's; ignored rows give nothing."""
    for shape, num_classes, kwargs in SHAPES:
        logits, labels = make_batch(shape, num_classes, dtype, device)
        out, grad = run_triton(logits, labels, reduction="none", **kwargs)
        rows, expected_grad, keep, margin, near = reference_grad(logits, labels)
        far = ~near
        assert out.loss.shape == labels.shape and out.loss.dtype == dtype
        assert grad.dtype == dtype and grad.shape == logits.shape
        assert_matches(out.loss.reshape(-1), rows, dtype, far)
        flat_grad = grad.reshape(-1, num_classes)
        assert_matches(flat_grad, expected_grad.reshape(-1, num_classes), dtype, far)
        active = labels.reshape(-1).cpu() != -100
        fully = (keep.sum(dim=1) == 1) & active
        assert fully.sum() > 0 and (active & ~fully).sum() > 0, "the batch tests both kinds"
        assert torch.equal(out.fully_masked.cpu()[far & active], fully[far & active])
        dead = (out.fully_masked.cpu() & active) | ~active
        assert torch.count_nonzero(out.loss.reshape(-1).cpu()[dead]) == 0
        assert torch.count_nonzero(flat_grad.cpu()[dead]) == 0
        assert torch.all(flat_grad.cpu()[far.unsqueeze(1) & ~keep] == 0), "masked: exactly 0"
        torch.testing.assert_close(out.margin.cpu()[active].double(), margin[active],
                                   rtol=0, atol=1e-6)  # fmt: skip


def check_small_losses_keep_their_digits(device, dtype):
    """Rows that keep only a little mass besides the target (loss 1e-6 to 1e-4, delta near 1):
    the loss and the target's gradient are that small mass, not a difference of two numbers
    near 1 (which would be off by float32's 6e-8: beyond one fp16 ulp)."""
    from astune.losses.as_softmax_triton import as_softmax_rows_triton

    gen = torch.Generator().manual_seed(6)
    logits = -11 - 6 * torch.rand(256, 5, generator=gen, dtype=torch.float64)
    labels = torch.randint(0, 5, (256,), generator=gen)
    logits[torch.arange(256), labels] = 0.0
    logits, labels = logits.to(dtype).to(device), labels.to(device)
    leaf = logits.clone().requires_grad_()
    out = as_softmax_rows_triton(leaf, labels, 0.99999, reduction="none")
    out.loss.sum().backward()
    rows, expected_grad, _, _, near = reference_grad(logits, labels, delta=0.99999)
    live = ~near & (rows > 1e-7)
    assert live.sum() > 100 and rows[live].max() < 1e-4, "the batch has small losses"
    if dtype == torch.float32:  # relative: an absolute 1e-6 would hide the lost digits
        for ours, expected in ((out.loss, rows), (leaf.grad, expected_grad)):
            torch.testing.assert_close(ours.cpu()[live].double(), expected[live], rtol=1e-5, atol=0)
    else:
        assert_matches(out.loss, rows, dtype, live)
        assert_matches(leaf.grad, expected_grad, dtype, live)


def check_reductions(device, dtype):
    """mean over the active rows, sum, none: values and gradients as the reference's."""
    logits, labels = make_batch((6, 9), 7, dtype, device, seed=1)
    labels[0, :4] = -100
    n_active = int((labels != -100).sum())
    reduces = {"sum": torch.sum, "mean": lambda r: r.sum() / n_active, "none": torch.sum}
    for reduction, reduce in reduces.items():
        out, grad = run_triton(logits, labels, reduction=reduction)
        rows, expected_grad, _, _, near = reference_grad(logits, labels, reduce)
        assert not near.any()
        expected = rows.reshape(labels.shape) if reduction == "none" else reduce(rows)
        tolerance = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(
            rtol=4e-3, atol=1e-3)  # a half-precision sum rounds at each step  # fmt: skip
        torch.testing.assert_close(out.loss.double().cpu(), expected, **tolerance)
        torch.testing.assert_close(grad.double().cpu(), expected_grad, **tolerance)


def check_row_weights_scale_the_gradient(device, dtype):
    """reduction="none" with per-row weights: the backward scales each row by its weight."""
    logits, labels = make_batch((48,), 11, dtype, device, seed=2)
    weights = torch.rand(48, dtype=torch.float64) + 0.5
    from astune.losses.as_softmax_triton import as_softmax_loss_triton

    leaf = logits.detach().clone().requires_grad_()
    loss = as_softmax_loss_triton(leaf, labels, DELTA, reduction="none")
    (loss * weights.to(device=device, dtype=dtype)).sum().backward()
    _, expected_grad, _, _, near = reference_grad(logits, labels, lambda r: (r * weights).sum())
    # half precision: the weight, rounded to the dtype, times the rounded gradient: two
    # roundings of half an ulp each (bf16's ulp is 2**-7 relative at most: 2e-3 failed on an H100)
    eps = torch.finfo(dtype).eps
    tolerance = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=eps, atol=eps)
    torch.testing.assert_close(leaf.grad.double().cpu()[~near], expected_grad[~near], **tolerance)


def check_stats_equal_the_torch_path(device, dtype):
    """MaskStats of the kernel and of the torch function: the same counts and headroom."""
    from astune.losses.as_softmax_triton import as_softmax_with_stats_triton

    logits, labels = make_batch((512,), 5, dtype, device, seed=3)
    _, ours = as_softmax_with_stats_triton(logits, labels, DELTA)
    _, torch_stats = as_softmax_with_stats(logits, labels, DELTA, kernel="torch")
    assert torch_stats.n_masked > 50
    assert (ours.n_active, ours.n_masked) == (torch_stats.n_active, torch_stats.n_masked)
    assert torch.equal(ours.counts(), torch_stats.counts())
    torch.testing.assert_close(ours.headroom_rows(), torch_stats.headroom_rows(),
                               rtol=1e-4, atol=1e-5)  # fmt: skip
    # The kernel's p-margins of the active rows: what the loop logs without reading the logits.
    from astune.training.evaluate import p_margins

    assert torch_stats.active_margins() is None  # the torch function leaves them to p_margins
    torch.testing.assert_close(ours.active_margins(), p_margins(logits, labels), rtol=0,
                               atol=1e-6 if dtype == torch.float32 else 1e-3)  # fmt: skip


def check_logits_kept_unless_overwrite_asked(device, dtype):
    """A second user of the logits sees them after backward; ``overwrite_logits`` writes the
    gradient there instead (and that is the gradient backward returns)."""
    from astune.losses.as_softmax_triton import as_softmax_loss_triton

    logits, labels = make_batch((40,), 13, dtype, device, seed=4)
    original = logits.clone()
    leaf = logits.clone().requires_grad_()
    as_softmax_loss_triton(leaf, labels, DELTA).backward()
    assert torch.equal(leaf.detach(), original) and leaf.grad.abs().sum() > 0
    buffer = logits.clone().requires_grad_()
    as_softmax_loss_triton(buffer, labels, DELTA, overwrite_logits=True).backward()
    assert torch.equal(buffer.grad, leaf.grad)
    assert torch.equal(buffer.detach(), leaf.grad)
    from astune.losses import ASSoftmaxLoss  # the module: the same, only when asked

    for overwrite in (False, True):
        buffer = logits.clone().requires_grad_()
        ASSoftmaxLoss(DELTA, kernel="triton", overwrite_logits=overwrite)(buffer, labels).backward()
        assert torch.equal(buffer.detach(), leaf.grad if overwrite else original)


def check_retained_graph_gives_the_same_gradient_twice(device, dtype):
    from astune.losses.as_softmax_triton import as_softmax_loss_triton

    logits, labels = make_batch((20,), 6, dtype, device, seed=5)
    leaf = logits.clone().requires_grad_()
    loss = as_softmax_loss_triton(leaf, labels, DELTA, reduction="sum") * 3
    first = torch.autograd.grad(loss, leaf, retain_graph=True)[0]
    second = torch.autograd.grad(loss, leaf)[0]
    assert torch.equal(first, second) and first.abs().sum() > 0


def check_public_functions_take_kernel_triton(device, dtype):
    """``kernel="triton"`` of as_softmax_loss and ASSoftmaxLoss is the fused kernel's result."""
    from astune.losses import ASSoftmaxLoss, as_softmax_loss
    from astune.losses.as_softmax_triton import as_softmax_loss_triton

    logits, labels = make_batch((4, 6), 9, dtype, device, seed=7)
    fused = as_softmax_loss_triton(logits, labels, DELTA, reduction="none")
    assert torch.equal(
        as_softmax_loss(logits, labels, DELTA, reduction="none", kernel="triton"), fused
    )
    module = ASSoftmaxLoss(DELTA, kernel="triton")
    # the mean scales the float32 rows by 1/n, sums and rounds once; the rows of "none" were each
    # rounded to the dtype already, so in half precision the two may differ by one ulp
    mean = fused.float().sum() / (labels != -100).sum()
    one_ulp = 1e-6 if dtype == torch.float32 else torch.finfo(dtype).eps
    torch.testing.assert_close(module(logits, labels).float(), mean, rtol=one_ulp, atol=1e-7)
    _, torch_stats = as_softmax_with_stats(logits, labels, DELTA, kernel="torch")
    assert module.last_stats.n_masked == torch_stats.n_masked > 0


CHECKS = [
    check_values_gradients_and_masks,
    check_small_losses_keep_their_digits,
    check_reductions,
    check_row_weights_scale_the_gradient,
    check_stats_equal_the_torch_path,
    check_logits_kept_unless_overwrite_asked,
    check_retained_graph_gives_the_same_gradient_twice,
    check_public_functions_take_kernel_triton,
]


# ---------------------------------------------------------------------------- CPU tests
def test_interpreter_checks_pass_in_a_subprocess():
    assert_interpreter_checks_pass(__file__, CHECKS)


def test_cpu_tensors_without_the_interpreter_are_refused_in_one_line():
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.fail("run this test without TRITON_INTERPRET=1: it checks the refusal")
    from astune.losses.as_softmax_triton import as_softmax_loss_triton

    logits, labels = make_batch((4,), 3, torch.float32, "cpu")
    with pytest.raises(ValueError, match=r"^kernel='triton' needs CUDA tensors[^\n]*cpu") as err:
        as_softmax_loss_triton(logits, labels, DELTA)
    assert "\n" not in str(err.value)


def test_kernel_auto_is_torch_until_the_gpu_tests_pass_and_a_bad_kernel_is_refused():
    from astune.losses import ASSoftmaxLoss, as_softmax_loss

    logits, labels = make_batch((5, 7), 6, torch.float32, "cpu", seed=8)
    assert torch.equal(
        as_softmax_loss(logits, labels, DELTA),
        as_softmax_loss(logits, labels, DELTA, kernel="torch"),
    )
    assert ASSoftmaxLoss(DELTA).kernel == "auto"
    with pytest.raises(
        ValueError, match=r"^kernel must be one of 'auto', 'triton', 'torch', but got 'cuda'"
    ):
        as_softmax_loss(logits, labels, DELTA, kernel="cuda")
    with pytest.raises(ValueError, match=r"kernel.*'cuda'"):
        ASSoftmaxLoss(DELTA, kernel="cuda")
    with pytest.raises(ValueError, match=r"^kernel='triton' needs CUDA tensors"):
        ASSoftmaxLoss(DELTA, kernel="triton")(logits, labels)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(delta=0.0), "delta"),
        (dict(reduction="avg"), "reduction"),
        (dict(labels=torch.zeros(3, dtype=torch.long)), "labels must have shape"),
    ],
)
def test_bad_input_is_refused_before_the_kernel(kwargs, message):
    from astune.losses.as_softmax_triton import as_softmax_loss_triton

    logits, labels = make_batch((4,), 3, torch.float32, "cpu")
    args = dict(logits=logits, labels=labels, delta=DELTA) | kwargs
    with pytest.raises(ValueError, match=message):
        as_softmax_loss_triton(args.pop("logits"), args.pop("labels"), args.pop("delta"), **args)


FORWARD_TYPES = dict(
    labels_ptr="*i64", loss_ptr="*fp32", masked_ptr="*i8", margin_ptr="*fp32", count_ptr="*fp32",
    n_rows="i32", n_cols="i32", logits_stride="i32", grad_stride="i32", delta="fp32",
    ignore_index="i32",
)  # fmt: skip


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("num_classes", [5, 5201, 20000], ids=["many-rows", "one-block", "loop"])
def test_kernels_compile_for_an_h100_without_one(dtype, num_classes):
    """What the interpreter does not check: the kernels lower to PTX and assemble (triton's
    type rules, its static ``if``, the dynamic ``if`` on a loaded scale)."""
    from astune.losses import _as_softmax_kernels as kernels
    from astune.losses.as_softmax_triton import launch_shape

    shape = launch_shape(num_classes)
    warps = shape.pop("num_warps")
    types = dict(logits_ptr=f"*{dtype}", grad_ptr=f"*{dtype}") | FORWARD_TYPES
    constants = shape | dict(STORE_GRAD=True, MEAN=True)
    compile_for_h100(kernels.as_softmax_forward, types, constants, warps)
    shape.pop("SINGLE")
    types = dict(grad_ptr=f"*{dtype}", scale_ptr="*fp32", scale_stride="i32", n_rows="i32",
                 n_cols="i32", grad_stride="i32")  # fmt: skip
    compile_for_h100(
        kernels.scale_rows, types, shape | {"BLOCK_C": min(shape["BLOCK_C"], 4096)}, warps
    )


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_count_and_reduce_kernels_compile_for_an_h100_without_one(dtype):
    """The mean's two one-program kernels (issue 63: no torch glue around the forward); the
    reduction writes the loss in the logits' dtype, and the forward its per-row losses too."""
    from astune.losses import _as_softmax_kernels as kernels
    from astune.losses.as_softmax_triton import REDUCE_BLOCK, launch_shape

    types = dict(labels_ptr="*i64", count_ptr="*fp32", n_rows="i32", ignore_index="i32")
    compile_for_h100(kernels.count_active, types, dict(BLOCK=REDUCE_BLOCK), 4)
    types = dict(rows_ptr="*fp32", count_ptr="*fp32", out_ptr=f"*{dtype}", n_rows="i32",
                 scale="fp32")  # fmt: skip
    for mean in (True, False):
        compile_for_h100(kernels.reduce_rows, types, dict(USE_COUNT=mean, BLOCK=REDUCE_BLOCK), 4)
    shape = launch_shape(5)
    warps = shape.pop("num_warps")
    types = dict(logits_ptr=f"*{dtype}", grad_ptr=f"*{dtype}") | FORWARD_TYPES
    types["loss_ptr"] = f"*{dtype}"  # reduction="none": the rows are the result
    compile_for_h100(
        kernels.as_softmax_forward, types, shape | dict(STORE_GRAD=True, MEAN=False), warps
    )


# ---------------------------------------------------------------------------- GPU tests
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_on_cuda(check, dtype):
    check("cuda", dtype)


if __name__ == "__main__":  # the interpreter run: TRITON_INTERPRET=1 python this_file
    problems = run_checks(CHECKS, "cpu", [torch.float32, torch.float16])
    print("\n".join(problems) or f"{2 * len(CHECKS)} checks passed")
    sys.exit(1 if problems else 0)


def test_auto_is_the_torch_function_off_cuda() -> None:
    from astune.losses.as_softmax import chosen_kernel

    cpu = torch.zeros(2, 5)
    assert chosen_kernel("auto", cpu, 0.3) == "torch"
    assert chosen_kernel("triton", cpu, 0.3) == "triton"  # asked for: the interpreter, or refused
    with pytest.raises(ValueError, match=r"kernel must be one of 'auto', 'triton', 'torch'"):
        chosen_kernel("cuda", cpu, 0.3)


@pytest.mark.gpu
def test_auto_takes_the_fused_kernel_for_cuda_logits_it_computes() -> None:
    from astune.losses.as_softmax import chosen_kernel

    logits = torch.zeros(2, 5, device="cuda")
    assert chosen_kernel("auto", logits, 0.3) == "triton"
    assert chosen_kernel("auto", logits.half(), 0.3) == "triton"
    assert chosen_kernel("auto", logits.double(), 0.3) == "torch"  # the kernel takes no float64
    assert chosen_kernel("auto", logits, 1.0) == "torch"  # exactly F.cross_entropy
