"""AS-Skip's re-check schedule: the headroom the AS losses report against a reference written
here, the back-off of samples found zero again, and its state in checkpoints."""

from __future__ import annotations

import pytest
import torch

from astune.losses import (
    ASSoftmaxLoss,
    as_softmax_with_stats,
    as_variant_with_stats,
    multilabel_as_softmax_with_stats,
)
from astune.speed.skip import PLAN_SEED_STRIDE, ASSkip


# -- headroom -----------------------------------------------------------------------------------
def reference_headroom(probs: list[float], targets: set[int], delta: float) -> float:
    """Plain Python: how far past delta the gap between the least target and the largest other
    class is, in deltas; 0 when some class is not masked (the gap is not past delta)."""
    gap = min(probs[t] for t in targets) - max(p for i, p in enumerate(probs) if i not in targets)
    return (gap - delta) / delta if gap > delta else 0.0


def logits_with_easy_rows(n: int, classes: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, classes, generator=gen) * torch.linspace(0.5, 8.0, n).unsqueeze(1)


@pytest.mark.parametrize("delta", [0.05, 0.3, 0.7])
def test_single_label_headroom_equals_the_reference_and_is_zero_where_a_class_is_kept(delta):
    logits = logits_with_easy_rows(64, 6, seed=1)
    labels = logits.argmax(dim=1)
    labels[::5] = (labels[::5] + 1) % 6  # some rows with a wrong target: never fully masked
    _, stats = as_softmax_with_stats(logits, labels, delta)
    got = stats.headroom_rows()
    probs = torch.softmax(logits.double(), dim=1).tolist()
    expected = [reference_headroom(p, {int(t)}, delta) for p, t in zip(probs, labels)]
    assert got.tolist() == pytest.approx(expected, abs=1e-5)
    masked = stats.rows()[1]
    assert bool((got[~masked] == 0).all()) and bool((got[masked] > 0).any())


def test_token_level_headroom_is_zero_on_ignored_rows():
    logits = logits_with_easy_rows(12, 4, seed=2).reshape(3, 4, 4)
    labels = logits.argmax(dim=2)
    labels[0, 1] = labels[2, 3] = -100
    _, stats = as_softmax_with_stats(logits, labels, 0.2)
    got = stats.headroom_rows().reshape(3, 4)
    assert got[0, 1] == 0 and got[2, 3] == 0
    probs = torch.softmax(logits.double(), dim=2)
    assert float(got[1, 2]) == pytest.approx(
        reference_headroom(probs[1, 2].tolist(), {int(labels[1, 2])}, 0.2), abs=1e-5
    )


def test_multi_label_headroom_equals_the_reference_over_several_positives():
    logits = logits_with_easy_rows(40, 5, seed=3)
    targets = torch.zeros(40, 5)
    top2 = logits.topk(2, dim=1).indices
    targets.scatter_(1, top2[:, :1], 1.0)
    targets[::2].scatter_(1, top2[::2, 1:], 1.0)  # every other row has two positives
    _, stats = multilabel_as_softmax_with_stats(logits, targets, 0.1)
    probs = torch.softmax(logits.double(), dim=1).tolist()
    positives = [set(torch.nonzero(t).flatten().tolist()) for t in targets]
    expected = [reference_headroom(p, pos, 0.1) for p, pos in zip(probs, positives)]
    assert stats.headroom_rows().tolist() == pytest.approx(expected, abs=1e-5)
    assert any(e > 0 for e in expected) and any(e == 0 for e in expected)


def test_as_variant_headroom_is_measured_in_logits():
    logits = torch.tensor([[5.0, 1.0, 0.0], [2.0, 1.5, 0.0], [0.0, 4.0, 3.0]])
    labels = torch.tensor([0, 0, 1])
    _, stats = as_variant_with_stats(logits, labels, 0.5)
    # gaps to the nearest other class: 4.0 (masked), 0.5 (masked at >=, headroom 0), 1.0
    assert stats.headroom_rows().tolist() == pytest.approx([7.0, 0.0, 1.0])


# -- the back-off -------------------------------------------------------------------------------
def reference_chance(keep: float, backoff: float, streak: int, headroom: float) -> float:
    return keep / min(backoff, max(1.0, 2.0 ** max(streak - 1, 0) * (1.0 + headroom)))


def record(skip: ASSkip, index: list[int], zero: list[bool], headroom: list[float]) -> None:
    n = len(index)
    active = torch.ones(n, dtype=torch.bool)
    skip.record(
        torch.tensor(index),
        active,
        torch.tensor(zero),
        samples_seen=0,
        headroom=torch.tensor(headroom),
    )


def test_a_sample_found_zero_again_and_a_wider_headroom_wait_longer_up_to_the_cap():
    skip = ASSkip(4, keep=0.6, anneal=0.0, total_samples=400, seed=0, backoff=8.0)
    record(skip, [0, 1, 2, 3], [True, True, True, False], [0.0, 1.5, 0.0, 0.0])
    for _ in range(3):  # sample 2 is found zero three more times
        record(skip, [2], [True], [0.2])
    assert skip.streak.tolist() == [1, 1, 4, 0]
    assert skip.headroom.tolist() == pytest.approx([0.0, 1.5, 0.2, 0.0])
    expected = [
        reference_chance(0.6, 8.0, k, h) for k, h in zip([1, 1, 4, 0], [0.0, 1.5, 0.2, 0.0])
    ]
    assert skip.recheck_chance().tolist() == pytest.approx(expected)
    assert expected[1] < expected[0] and expected[2] == pytest.approx(0.6 / 8.0)  # capped
    record(skip, [2], [False], [0.0])  # found active: the back-off starts over
    assert int(skip.streak[2]) == 0 and float(skip.headroom[2]) == 0.0


def test_token_level_samples_take_the_headroom_of_their_least_masked_row():
    loss_fn = ASSoftmaxLoss(delta=0.2)
    logits = torch.tensor([[[9.0, 0, 0], [3.0, 0, 0]], [[9.0, 0, 0], [0, 0, 0]]])
    labels = torch.tensor([[0, 0], [0, -100]])
    loss_fn(logits, labels)
    stats = loss_fn.last_stats
    skip = ASSkip(2, keep=1.0, anneal=0.0, total_samples=20, seed=0, backoff=100.0)
    skip.record(torch.arange(2), *stats.rows(), samples_seen=0, headroom=stats.headroom_rows())
    rows = stats.headroom_rows().reshape(2, 2)
    assert skip.zero.tolist() == [True, True]
    assert skip.headroom.tolist() == pytest.approx([float(rows[0].min()), float(rows[1, 0])])


def test_backoff_one_draws_exactly_the_keep_plan_whatever_the_streaks():
    order = torch.randperm(500, generator=torch.Generator().manual_seed(4))
    plans = []
    for streak in (0, 5):
        skip = ASSkip(500, keep=0.3, anneal=0.0, total_samples=5000, seed=9, backoff=1.0)
        skip.zero[:] = True
        skip.streak[:] = streak
        skip.headroom[:] = 2.0
        plans.append(skip.plan_for(3, order, 1500))
    drawn = torch.rand(500, generator=torch.Generator().manual_seed(9 * PLAN_SEED_STRIDE + 3))
    assert torch.equal(plans[0], plans[1]) and torch.equal(plans[0], drawn < 0.3)


def test_backed_off_samples_are_rechecked_at_their_chance_over_many_draws():
    skip = ASSkip(6000, keep=0.8, anneal=0.0, total_samples=60_000, seed=2, backoff=16.0)
    skip.zero[:] = True
    skip.streak[:3000], skip.streak[3000:] = 1, 3  # chances 0.8 and 0.8 / 4 / 1.5
    skip.headroom[3000:] = 0.5
    plan = skip.plan_for(0, torch.arange(6000), 0)
    assert abs(plan[:3000].float().mean().item() - 0.8) < 0.03
    assert abs(plan[3000:].float().mean().item() - 0.8 / 6.0) < 0.03


def test_the_schedule_state_survives_a_checkpoint_and_an_older_one_loads():
    skip = ASSkip(5, keep=0.5, anneal=0.1, total_samples=50, seed=1, backoff=4.0)
    record(skip, [0, 1, 2], [True, True, False], [0.3, 0.0, 0.0])
    record(skip, [0], [True], [0.4])
    other = ASSkip(5, keep=0.5, anneal=0.1, total_samples=50, seed=1)
    other.load_state_dict(skip.state_dict())
    assert other.backoff == 4.0 and torch.equal(other.streak, skip.streak)
    assert torch.equal(other.headroom, skip.headroom)
    assert torch.equal(other.recheck_chance(), skip.recheck_chance())
    older = {
        k: v for k, v in skip.state_dict().items() if k not in ("backoff", "streak", "headroom")
    }
    before = ASSkip(5, keep=0.5, anneal=0.1, total_samples=50, seed=1, backoff=4.0)
    before.load_state_dict(older)  # written before the back-off: the keep chance throughout
    assert before.backoff == 1.0 and before.streak.tolist() == [1, 1, 0, 0, 0]
    assert before.recheck_chance().tolist() == pytest.approx([0.5] * 5)
