"""Soft pruning by loss (astune/prune.py): InfoBatch's plan, its rescaling, and the two training
sources that use it (AS-Skip's soft policy, InfoBatch on softmax) on a slice of SST-5."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from training_runs import LOOP_BASE, loop_config, read_metrics, sst5_slice

from astune.config import TrainConfig
from astune.speed.prune import PRUNE_SEED_STRIDE, SoftPrune
from astune.training import fit
from astune.training.hooks import LoopHooks


def reference_plan(scores, eligible, order, *, prune, seed, epoch, late_from):
    """Plain-Python InfoBatch plan: of the eligible samples with a known score, those below the
    mean of those scores are pruned when their seeded draw is below ``prune`` (none from order
    position ``late_from`` on); kept low ones weigh ``1 / (1 - prune)``. Returns keep (in the
    order) and weight (by index)."""
    gen = torch.Generator().manual_seed(seed * PRUNE_SEED_STRIDE + epoch)
    draws = torch.rand(len(order), generator=gen)
    known = [eligible[p] and not math.isnan(scores[i]) for p, i in enumerate(order)]
    values = [scores[i] for p, i in enumerate(order) if known[p]]
    mean = sum(values) / len(values) if values else math.nan
    keep, weight = [], [1.0] * len(order)
    for p, i in enumerate(order):
        low = known[p] and scores[i] < mean and p < late_from
        pruned = low and float(draws[p]) < prune
        keep.append(not pruned)
        if low and not pruned:
            weight[i] = 1.0 / (1.0 - prune)
    return keep, weight


def scored(n: int, seed: int = 0, **kwargs) -> SoftPrune:
    soft = SoftPrune(n, total_samples=10 * n, seed=seed, **{"prune": 0.5, "anneal": 0.0, **kwargs})
    soft.record(torch.arange(n), torch.rand(n, generator=torch.Generator().manual_seed(99)))
    return soft


@pytest.mark.parametrize("prune, with_eligible", [(0.5, False), (0.3, True), (0.0, False)])
def test_the_plan_follows_a_plain_reference(prune, with_eligible):
    soft = scored(40, seed=4, prune=prune)
    soft.score[[3, 17]] = math.nan  # never computed
    order = torch.randperm(40, generator=torch.Generator().manual_seed(1))
    eligible = torch.rand(40, generator=torch.Generator().manual_seed(2)) < 0.7
    keep = soft.plan_for(2, order, 80, eligible=eligible if with_eligible else None)
    want_keep, want_weight = reference_plan(
        soft.score.tolist(),
        eligible.tolist() if with_eligible else [True] * 40,
        order.tolist(),
        prune=prune,
        seed=4,
        epoch=2,
        late_from=40,
    )
    assert keep.tolist() == want_keep
    torch.testing.assert_close(soft.weight, torch.tensor(want_weight))
    assert bool(keep[(order == 3).nonzero()]) and bool(keep[(order == 17).nonzero()])
    if prune > 0:
        assert not all(want_keep)  # the case prunes something


def test_rescaling_makes_the_expected_gradient_the_unpruned_one():
    """Over many seeded draws, the mean gradient of the weighted sum of the kept samples' losses
    equals the gradient of the sum over every sample; without the rescaling it would not."""
    n, classes, draws = 24, 5, 4000
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(n, classes, generator=gen, requires_grad=True)
    labels = torch.randint(classes, (n,), generator=gen)
    losses = F.cross_entropy(logits, labels, reduction="none")
    (full,) = torch.autograd.grad(losses.sum(), logits, retain_graph=True)
    mean_grad, mean_unscaled = torch.zeros_like(full), torch.zeros_like(full)
    soft = SoftPrune(n, prune=0.5, anneal=0.0, total_samples=n * draws, seed=11)
    soft.record(torch.arange(n), losses)
    order = torch.arange(n)
    for epoch in range(draws):
        keep = soft.plan_for(epoch, order, epoch * n)
        kept = losses * keep
        (grad,) = torch.autograd.grad((kept * soft.weight).sum(), logits, retain_graph=True)
        (unscaled,) = torch.autograd.grad(kept.sum(), logits, retain_graph=True)
        mean_grad += grad / draws
        mean_unscaled += unscaled / draws
    low = losses.detach() < losses.detach().mean()
    assert 0 < int(low.sum()) < n  # some samples are prunable, some not
    error = (mean_grad - full).norm() / full.norm()
    bias = (mean_unscaled - full).norm() / full.norm()
    assert error < 0.05 < bias, (error, bias)


def test_unknown_scores_are_kept_and_the_anneal_share_prunes_nothing():
    soft = SoftPrune(10, prune=0.9, anneal=0.5, total_samples=40, seed=0)
    order = torch.arange(10)
    assert soft.plan_for(0, order, 0).all()  # nothing computed yet: nothing known to be low
    soft.record(order, torch.arange(10.0))
    keep = soft.plan_for(1, order, 15)  # anneal from sample 20: positions 5.. are late
    assert keep[5:].all() and not keep[:5].all()
    assert soft.weight[5:].eq(1.0).all()
    assert soft.plan_for(1, order, 15) is keep  # planned once per epoch
    assert soft.plan_for(2, order, 20).all()


def test_prune_state_round_trips_and_refuses_other_data():
    soft = scored(8, seed=3)
    keep = soft.plan_for(0, torch.arange(8), 0)
    other = SoftPrune(8, prune=0.1, anneal=0.2, total_samples=8, seed=0)
    other.load_state_dict(soft.state_dict())
    assert torch.equal(other.keep, keep) and torch.equal(other.weight, soft.weight)
    assert torch.equal(other.score, soft.score) and (other.prune, other.seed) == (0.5, 3)
    with pytest.raises(ValueError, match="holds 8 samples, but the run has 9"):
        SoftPrune(9, prune=0.5, anneal=0.0, total_samples=9, seed=0).load_state_dict(
            soft.state_dict()
        )


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(skip_policy="hard"), "skip_policy must be one of 'zero', 'soft', but got 'hard'"),
        (dict(skip_prune=1.0), r"skip_prune must be in \[0.0, 1.0\), but got 1.0"),
        (dict(infobatch=True), "as_skip and infobatch are two ways of leaving samples out"),
        (dict(infobatch_prune=-0.1), r"infobatch_prune must be in \[0.0, 1.0\)"),
        (dict(infobatch_anneal=2), r"infobatch_anneal must be in \[0.0, 1.0\], but got 2"),
    ],
)
def test_bad_pruning_settings_fail_with_one_line(overrides, message):
    with pytest.raises(ValueError, match=message) as err:
        TrainConfig(dataset="sst5", as_skip=True, **overrides).validate()
    assert "\n" not in str(err.value)


def test_the_pruning_flags_reach_the_config():
    from astune.cli.parser import build_parser
    from astune.cli.train import train_config

    parse = build_parser().parse_args
    soft = train_config(
        parse(
            ["train", "--dataset", "sst5", "--as-skip", "--skip-policy", "soft"]
            + ["--skip-prune", "0.3", "--length-window", "4", "--max-length", "64"]
        )  # fmt: skip
    )
    assert (soft.skip_policy, soft.skip_prune, soft.length_window) == ("soft", 0.3, 4)
    assert soft.max_length == 64  # a flag train takes reaches its config
    info = train_config(
        parse(
            ["train", "--dataset", "sst5", "--loss", "softmax", "--infobatch"]
            + ["--infobatch-prune", "0.4", "--infobatch-anneal", "0.2"]
        )  # fmt: skip
    )
    assert (info.infobatch, info.infobatch_prune, info.infobatch_anneal) == (
        True, 0.4, 0.2
    )  # fmt: skip


# -- training runs ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sst5(data_dir):
    return sst5_slice(LOOP_BASE, data_dir, n_train=96, n_eval=32)


ANNEAL = 1 / 3  # the last of 3 epochs uses every sample


class WatchWeights(LoopHooks):
    """Each planned epoch's pruned and low-kept samples, and the weights the loop trained with."""

    def __init__(self) -> None:
        self.visits: list[tuple[int, list[int], list[float]]] = []  # epoch, index, weights

    def on_micro_step_start(self, run, batch, visit):
        weight = [1.0] * len(visit.index) if visit.weight is None else visit.weight.tolist()
        self.visits.append((run.pos.epoch, visit.index.tolist(), weight))


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, settings",
    [
        ("infobatch", dict(loss="softmax", infobatch=True, infobatch_anneal=ANNEAL)),
        (
            "soft",
            dict(
                loss="as_softmax",
                delta=0.02,
                as_skip=True,
                skip_policy="soft",
                skip_prune=0.5,
                skip_anneal=ANNEAL,
            ),
        ),  # fmt: skip
    ],
)
def test_pruned_runs_train_the_kept_low_loss_samples_at_the_rescaled_weight(
    tmp_path: Path, data_dir, sst5, name, settings
):
    watch = WatchWeights()
    run = loop_config(
        tmp_path, name, data_dir, dataset="sst5", lr=3e-3, batch_size=16, epochs=3, **settings
    )
    final = fit(run, data=sst5, hooks=[watch])
    records = read_metrics(run)
    assert final["samples_seen"] == 3 * 96 > final["samples_computed"]
    assert records[0]["skipped_ratio"] == 0.0 and max(r["skipped_ratio"] for r in records) > 0.1
    by_epoch: dict[int, list[tuple[int, float]]] = {}
    for epoch, index, weights in watch.visits:
        by_epoch.setdefault(epoch, []).extend(zip(index, weights))
    assert {w for _, w in by_epoch[0]} == {1.0}  # nothing known yet: all kept at weight 1
    assert {w for _, w in by_epoch[1]} == {1.0, 2.0}  # 1 / (1 - 0.5) on kept low-loss samples
    assert {w for _, w in by_epoch[2]} == {1.0}  # the annealed last epoch: no pruning
    assert all(len({i for i, _ in pairs}) == len(pairs) for pairs in by_epoch.values())
    if name == "infobatch":  # no exact zeros to skip: the annealed epoch trains on every sample
        assert sorted(i for i, _ in by_epoch[2]) == list(range(96))


@pytest.mark.parametrize(
    "settings, named",
    [
        (
            dict(loss="softmax", infobatch=True, infobatch_prune=0.4),
            "InfoBatch (infobatch_prune=0.4)",
        ),
        (dict(loss="as_softmax", as_skip=True, skip_policy="soft"), "skip_policy='soft'"),
        (dict(loss="as_softmax", delta_schedule="ema"), "the 'ema' delta schedule"),
    ],
)
def test_the_hf_export_names_the_pruning_it_leaves_out(settings, named):
    from astune.exporting.code import hf_snippet
    from astune.store.best import BestTrial

    best = BestTrial(
        experiment="e", tracking_uri="sqlite:///x.db", parent_run_id="p", run_id="r",
        objective=0.5, metric="val_accuracy", value=0.5, source="test",
        config=dict(dataset="sst5", lr=1e-3, batch_size=16, epochs=2.0, **settings),
    )  # fmt: skip
    code = hf_snippet(best)
    (note,) = [line for line in code.splitlines() if line.startswith("# The best trial used")]
    assert named in note and note.endswith("left out here.")
    compile(code, "best_hf.py", "exec")  # a module that runs
