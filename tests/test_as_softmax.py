"""AS-Softmax against a plain reference written here, over dtypes, shapes and edge cases."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from astune.losses import ASSoftmaxLoss, as_softmax_loss, as_softmax_with_stats

TOLERANCES = {
    torch.float64: dict(rtol=1e-10, atol=1e-12),
    torch.float32: dict(rtol=1e-5, atol=1e-6),
    torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
}


def reference(logits: torch.Tensor, labels: torch.Tensor, delta: float, ignore_index: int = -100):
    """Row by row, straight from the paper: z_i = 0 iff p_t - p_i > delta and i != t.

    Returns per-row losses ``(M,)`` (0 at ignored rows) and the keep mask ``(M, C)``.
    """
    flat = logits.reshape(-1, logits.shape[-1]).double()
    flat_labels = labels.reshape(-1)
    losses, keeps = [], []
    for row, target in zip(flat, flat_labels.tolist()):
        if target == ignore_index:
            losses.append(row.sum() * 0)
            keeps.append(torch.ones_like(row, dtype=torch.bool))
            continue
        probs = torch.softmax(row, dim=0)
        keep = ~((probs[target] - probs) > delta)
        keep[target] = True
        kept = row.masked_fill(~keep, float("-inf"))
        losses.append(torch.logsumexp(kept, dim=0) - row[target])
        keeps.append(keep)
    return torch.stack(losses), torch.stack(keeps)


def make_batch(shape: tuple[int, ...], num_classes: int, dtype: torch.dtype, seed: int = 0):
    """Logits where targets lead by a random margin, so some rows are fully masked and some not."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, num_classes, shape, generator=gen)
    logits = torch.randn(*shape, num_classes, generator=gen, dtype=torch.float64) * 2
    lead = torch.rand(*shape, generator=gen, dtype=torch.float64) * 8
    logits.scatter_add_(-1, labels.unsqueeze(-1), lead.unsqueeze(-1))
    return logits.to(dtype), labels


def loss_and_grad(fn, logits: torch.Tensor, *args, **kwargs):
    leaf = logits.detach().clone().requires_grad_()
    loss = fn(leaf, *args, **kwargs)
    loss.sum().backward()
    return loss.detach(), leaf.grad


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(64,), (8, 12)], ids=["2d", "3d"])
@pytest.mark.parametrize("num_classes", [5, 151])
@pytest.mark.parametrize("delta", [0.01, 0.1, 0.3, 0.7])
def test_matches_reference_value_and_gradient(dtype, shape, num_classes, delta):
    logits, labels = make_batch(shape, num_classes, dtype)
    labels.view(-1)[::7] = -100  # some ignored rows
    ours, grad = loss_and_grad(as_softmax_loss, logits, labels, delta, reduction="sum")
    # the reference sees the values the loss sees: the logits rounded to `dtype`
    expected, expected_grad = loss_and_grad(
        lambda x: reference(x, labels, delta)[0].sum(), logits.double()
    )
    tol = TOLERANCES[dtype]
    torch.testing.assert_close(ours.double(), expected, **tol)
    torch.testing.assert_close(grad.double(), expected_grad, **tol)
    assert grad.dtype == dtype and ours.dtype == dtype


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_reductions_follow_cross_entropy_conventions(reduction):
    logits, labels = make_batch((6, 9), 7, torch.float64, seed=1)
    labels[0, :4] = -100
    ours = as_softmax_loss(logits, labels, 0.2, reduction=reduction)
    rows, _ = reference(logits, labels, 0.2)
    rows = rows.reshape(labels.shape)
    expected = {"sum": rows.sum(), "mean": rows.sum() / (labels != -100).sum(), "none": rows}
    torch.testing.assert_close(ours, expected[reduction])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(32,), (4, 10)])
def test_delta_one_is_exactly_cross_entropy(dtype, shape):
    logits, labels = make_batch(shape, 11, dtype, seed=2)
    labels.view(-1)[::5] = -100
    ours, grad = loss_and_grad(as_softmax_loss, logits, labels, 1.0)
    flat = lambda x: x.reshape(-1, 11)  # noqa: E731
    expected, expected_grad = loss_and_grad(
        lambda x: F.cross_entropy(flat(x), labels.reshape(-1)), logits
    )
    assert torch.equal(ours, expected)
    assert torch.equal(grad, expected_grad)


def test_masked_classes_get_exactly_zero_gradient():
    logits, labels = make_batch((256,), 20, torch.float32, seed=3)
    _, grad = loss_and_grad(as_softmax_loss, logits, labels, 0.2)
    _, keep = reference(logits, labels, 0.2)
    assert (~keep).sum() > 100  # the batch really masks classes
    assert torch.all(grad[~keep] == 0)
    alive = keep.sum(dim=1, keepdim=True) > 1  # rows that keep a class besides the target
    assert alive.sum() > 10 and torch.all(grad[keep & alive] != 0)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_fully_masked_rows_of_random_float32_batches_get_exactly_zero_gradient(reduction):
    logits, labels = make_batch((4096,), 5, torch.float32, seed=8)
    leaf = logits.clone().requires_grad_()
    loss, stats = as_softmax_with_stats(leaf, labels, 0.3, reduction=reduction)
    loss.backward()
    _, keep = reference(logits, labels, 0.3)
    fully_masked = keep.sum(dim=1) == 1
    assert fully_masked.sum() > 1000 and stats.n_masked == fully_masked.sum()
    assert torch.count_nonzero(leaf.grad[fully_masked]) == 0


def test_second_derivative_is_refused_not_silently_zero():
    logits, labels = make_batch((8,), 4, torch.float64)
    leaf, weights = logits.requires_grad_(), torch.rand(8, dtype=torch.float64, requires_grad=True)
    loss = (as_softmax_loss(leaf, labels, 0.3, reduction="none") * weights).sum()
    (grad,) = torch.autograd.grad(loss, leaf, create_graph=True)  # a function of weights too
    with pytest.raises(RuntimeError, match="differentiate twice"):
        grad.sum().backward()


def test_fully_masked_rows_have_zero_loss_and_zero_gradient():
    labels = torch.tensor([0, 1, 2])
    logits = torch.tensor([[9.0, 0.0, 0.0], [0.0, 9.0, -1.0], [0.0, 0.3, 0.2]])
    loss, grad = loss_and_grad(as_softmax_loss, logits, labels, 0.3, reduction="none")
    assert loss[0] == 0 and loss[1] == 0 and loss[2] > 0
    assert torch.all(grad[:2] == 0)
    assert torch.all(grad[2] != 0)


def test_all_masked_batch_has_zero_loss_and_stats_count_every_row():
    labels = torch.arange(4)
    logits = torch.eye(4) * 20
    loss, stats = as_softmax_with_stats(logits.requires_grad_(), labels, 0.5)
    loss.backward()
    assert loss.item() == 0.0
    assert torch.all(logits.grad == 0)
    assert (stats.n_active, stats.n_masked) == (4, 4)


def test_ties_are_never_masked_at_a_small_delta():
    # p_t - p_i > 0.1 is false for a class tied with the target: it stays, the lower one goes.
    logits = torch.tensor([[2.0, 2.0, 1.0], [3.0, 3.0, 3.0]], requires_grad=True)
    labels = torch.tensor([0, 2])
    loss = as_softmax_loss(logits, labels, 0.1, reduction="none")
    loss.sum().backward()
    torch.testing.assert_close(
        loss, torch.tensor([torch.log(torch.tensor(2.0)), torch.log(torch.tensor(3.0))])
    )
    assert logits.grad[0, 2] == 0 and logits.grad[0, 1] != 0
    assert torch.all(logits.grad[1] != 0)


def test_a_small_delta_masks_every_class_well_below_the_target():
    logits = torch.tensor([[3.0, 1.0, 2.0]])
    loss = as_softmax_loss(logits, torch.tensor([0]), 0.1)
    assert loss.item() == 0.0


def test_target_that_is_not_the_argmax_masks_nothing_it_should_not():
    # p_t = 0.09 <= delta: no class can be masked, the loss is plain cross-entropy
    logits = torch.tensor([[0.0, 2.0, 1.0]])
    labels = torch.tensor([0])
    torch.testing.assert_close(
        as_softmax_loss(logits, labels, 0.3), F.cross_entropy(logits, labels)
    )


def test_ignored_rows_are_neither_active_nor_masked():
    logits = torch.tensor([[20.0, 0.0], [20.0, 0.0], [0.0, 0.0]])
    labels = torch.tensor([0, -100, -100])
    loss, stats = as_softmax_with_stats(logits, labels, 0.3, reduction="mean")
    assert (stats.n_active, stats.n_masked) == (1, 1)
    assert loss.item() == 0.0


def test_token_level_stats_count_tokens_not_padding():
    logits, labels = make_batch((4, 16), 9, torch.float32, seed=4)
    labels[:, 10:] = -100
    _, stats = as_softmax_with_stats(logits, labels, 0.3)
    _, keep = reference(logits, labels, 0.3)
    active = labels.reshape(-1) != -100
    expected_masked = (active & (keep.sum(dim=1) == 1)).sum().item()
    assert stats.n_active == 40
    assert stats.n_masked == expected_masked
    assert 0 < expected_masked < 40


def test_large_logits_stay_finite():
    logits = torch.tensor([[1e4, -1e4, 0.0], [-1e4, 1e4, 0.0]], requires_grad=True)
    labels = torch.tensor([0, 0])
    loss = as_softmax_loss(logits, labels, 0.3, reduction="none")
    loss.sum().backward()
    assert loss[0].item() == 0.0
    torch.testing.assert_close(loss[1], torch.tensor(2e4))  # wrong with confidence: CE's value
    assert torch.isfinite(logits.grad).all()


def test_gradcheck_float64():
    logits, labels = make_batch((12,), 6, torch.float64, seed=5)
    labels[3] = -100
    leaf = logits.clone().requires_grad_()
    assert torch.autograd.gradcheck(
        lambda x: as_softmax_loss(x, labels, 0.25, reduction="none"), (leaf,)
    )


def test_backward_through_a_retained_graph_gives_the_same_gradient_twice():
    logits, labels = make_batch((8,), 4, torch.float32)
    leaf = logits.requires_grad_()
    loss = as_softmax_loss(leaf, labels, 0.3)
    (first,) = torch.autograd.grad(loss, leaf, retain_graph=True)
    (second,) = torch.autograd.grad(loss, leaf)
    assert torch.equal(first, second) and first.abs().sum() > 0


def test_module_form_keeps_stats_and_follows_delta_changes():
    logits, labels = make_batch((64,), 5, torch.float32, seed=6)
    module = ASSoftmaxLoss(delta=0.3)
    module(logits, labels)
    masked_at_03 = module.last_stats.n_masked
    module.set_delta(1.0)
    torch.testing.assert_close(module(logits, labels), F.cross_entropy(logits, labels))
    assert module.last_stats.n_masked == 0 and masked_at_03 > 0
    assert "delta=1.0" in repr(module)
    with pytest.raises(ValueError, match=r"delta must be in \(0\.0, 1\.0\], but got 0\.0"):
        module.set_delta(0.0)
    assert module.delta == 1.0


@pytest.mark.parametrize("delta", [0.0, -0.1, 1.5, float("nan"), "0.3", None])
def test_rejects_delta_outside_zero_one(delta):
    logits, labels = make_batch((4,), 3, torch.float32)
    with pytest.raises(ValueError, match=r"delta must be .*\(0\.0, 1\.0\].*" + repr(delta)[:3]):
        as_softmax_loss(logits, labels, delta)
    with pytest.raises(ValueError, match="delta"):
        ASSoftmaxLoss(delta=delta)


def test_rejects_bad_reduction_shapes_and_labels():
    logits, labels = make_batch((4,), 3, torch.float32)
    with pytest.raises(
        ValueError, match="reduction must be one of 'mean', 'sum', 'none', but got 'avg'"
    ):
        as_softmax_loss(logits, labels, 0.3, reduction="avg")
    with pytest.raises(ValueError, match=r"labels must have shape \(4,\)"):
        as_softmax_loss(logits, labels[:3], 0.3)
    with pytest.raises(ValueError, match=r"labels must be in \[0, 2\]"):
        as_softmax_loss(logits, torch.tensor([0, 1, 3, 0]), 0.3)
    with pytest.raises(ValueError, match="integer class indices"):
        as_softmax_loss(logits, labels.float(), 0.3)
