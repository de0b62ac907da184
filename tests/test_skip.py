"""AS-Skip: the policy on real AS-Softmax losses, and training runs on a slice of SST-5."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from training_runs import Snapshots, read_metrics, run_config, sst5_slice, timeless

from astune.config import TrainConfig
from astune.losses import ASSoftmaxLoss
from astune.losses.multilabel import multilabel_as_softmax_with_stats
from astune.speed import ASSpeed
from astune.speed.skip import PLAN_SEED_STRIDE, ASSkip, planned_visits
from astune.training import Run, fit
from astune.training.batches import SKIP_RECORD_KEYS
from astune.training.hooks import LoopHooks

# checkpoints only where a test resumes from them: each costs ~0.4 s on 2 CPU cores
BASE = dict(
    backbone="minilm", num_layers=1, max_length=32, seed=7, weight_decay=0.0, checkpoint_every="end"
)
# lr and delta chosen so that a 192-sample slice masks 20-50% of its samples within 4-5 epochs
MASKING = dict(dataset="sst5", lr=3e-3, batch_size=16, loss="as_softmax", delta=0.02)


def config(tmp_path: Path, name: str, data_dir: Path, **overrides) -> TrainConfig:
    return run_config({**BASE, **MASKING}, tmp_path, name, data_dir, **overrides)


@pytest.fixture(scope="module")
def sst5(data_dir):
    return sst5_slice(BASE, data_dir, n_train=192, n_eval=64)


# -- the policy ---------------------------------------------------------------------------------
def reference_visits(order, plan, size):
    """Plain-Python reference: full batches of planned samples; each covers the order positions
    since the previous batch, the last one up to the end."""
    kept = [i for i, p in enumerate(plan) if p]
    out = []
    for b in range(0, len(kept), size):
        lo = 0 if b == 0 else kept[b - 1] + 1
        hi = len(order) if b + size >= len(kept) else kept[b + size - 1] + 1
        chunk = kept[b : b + size]
        skipped = [order[i] for i in range(lo, hi) if not plan[i]]
        out.append(([order[i] for i in chunk], hi - lo, skipped))
    return out


@pytest.mark.parametrize("size", [1, 3, 4, 16])
def test_visits_fill_full_batches_and_cover_every_position(size):
    gen = torch.Generator().manual_seed(0)
    order = torch.randperm(23, generator=gen)
    plan = torch.rand(23, generator=gen) < 0.6
    visits = planned_visits(order, plan, batch_size=size)
    got = [(v.index.tolist(), v.visited, v.skipped.tolist()) for v in visits]
    assert got == reference_visits(order.tolist(), plan.tolist(), size)
    assert sum(v for _, v, _ in got) == 23
    assert all(len(i) == size for i, _, _ in got[:-1])


def test_an_epoch_that_computes_nothing_still_visits_every_sample():
    order = torch.arange(5)
    (visit,) = planned_visits(order, torch.zeros(5, dtype=torch.bool), batch_size=2)
    assert visit.visited == 5 and len(visit.index) == 0
    assert visit.skipped.tolist() == [0, 1, 2, 3, 4]
    assert (
        list(planned_visits(order, torch.zeros(5, dtype=torch.bool), batch_size=2, first=1)) == []
    )


def test_zero_loss_samples_are_skipped_rechecked_and_come_back_when_active_again():
    loss_fn = ASSoftmaxLoss(delta=0.3, reduction="sum")
    skip = ASSkip(4, keep=0.0, anneal=0.0, total_samples=400, seed=3)
    labels = torch.tensor([0, 1, 2, 0])
    confident = torch.tensor([[9.0, 0, 0], [0, 0, 0], [0, 0, 9.0], [0, 0, 0]])
    loss = loss_fn(confident, labels)
    skip.record(torch.arange(4), *loss_fn.last_stats.rows(), samples_seen=0)
    # rows 0 and 2 are fully masked: loss exactly 0, skipped by a keep-0 plan
    assert skip.zero.tolist() == [True, False, True, False] and loss > 0
    order = torch.tensor([3, 2, 1, 0])
    assert skip.plan_for(0, order, 0).tolist() == [True, False, True, False]
    # a keep-1 epoch re-checks them; sample 2 is no longer confident, so it comes back
    skip.keep = 1.0
    assert skip.plan_for(1, order, 4).all()
    moved = torch.tensor([[9.0, 0, 0], [0, 0, 0], [0, 9.0, 0], [0, 0, 0]])
    loss_fn(moved, labels)
    skip.record(torch.arange(4), *loss_fn.last_stats.rows(), samples_seen=4)
    skip.keep = 0.0
    assert skip.zero.tolist() == [True, False, False, False]
    assert skip.plan_for(2, order, 8).tolist() == [True, True, True, False]  # 2 is back


def test_recheck_draws_are_seeded_and_take_about_keep_of_the_zero_samples():
    skip = ASSkip(4000, keep=0.25, anneal=0.0, total_samples=40_000, seed=5)
    skip.zero[:] = True
    order = torch.arange(4000)
    share = skip.plan_for(0, order, 0).float().mean().item()
    assert abs(share - 0.25) < 0.03
    again = ASSkip(4000, keep=0.25, anneal=0.0, total_samples=40_000, seed=5)
    again.zero[:] = True
    assert torch.equal(again.plan_for(0, order, 0), skip.plan)
    assert not torch.equal(again.plan_for(1, order, 4000), skip.plan)


def test_the_last_anneal_share_of_training_uses_every_sample():
    skip = ASSkip(10, keep=0.0, anneal=0.25, total_samples=40, seed=0)
    skip.zero[:] = True
    assert skip.anneal_start() == 30
    assert not skip.plan_for(2, torch.arange(10), 20).any()
    assert skip.plan_for(3, torch.arange(10), 30).all()


def test_a_recheck_gets_the_due_zero_samples_and_the_plan_keeps_those_it_finds_active():
    zero = [True, True, False, True, True, False]
    skip = ASSkip(6, keep=0.5, anneal=0.0, total_samples=60, seed=3)
    skip.zero[:] = torch.tensor(zero)
    order = torch.tensor([5, 4, 3, 2, 1, 0])
    # reference: the seeded draws of plan_for; due = zero and drawn, in the epoch's order
    drawn = torch.rand(6, generator=torch.Generator().manual_seed(3 * PLAN_SEED_STRIDE)) < 0.5
    due = [int(order[i]) for i in range(6) if zero[order[i]] and drawn[i]]
    assert len(due) >= 2  # the case tests something: the seed draws at least two
    seen: list[list[int]] = []

    def recheck(index: torch.Tensor) -> None:  # finds the first due sample active, others not
        seen.append(index.tolist())
        masked = torch.tensor([i != due[0] for i in index.tolist()])
        skip.record(index, torch.ones(len(index), dtype=torch.bool), masked, samples_seen=6)

    plan = skip.plan_for(0, order, 0, recheck=recheck)
    assert seen == [due]
    after = [z and i != due[0] for i, z in enumerate(zero)]
    assert plan.tolist() == [not after[i] for i in order.tolist()]
    assert skip.last_computed[due].tolist() == [6] * len(due)
    assert skip.plan_for(0, order, 0, recheck=recheck) is plan and len(seen) == 1  # planned once


def test_token_level_sentence_is_zero_only_when_every_token_is_masked():
    loss_fn = ASSoftmaxLoss(delta=0.3, reduction="sum")
    sure, unsure = [9.0, 0.0], [0.0, 0.0]
    logits = torch.tensor([[sure, sure, sure], [sure, unsure, sure], [sure, unsure, unsure]])
    labels = torch.tensor([[0, 0, -100], [0, 0, 0], [0, -100, -100]])
    loss_fn(logits, labels)
    skip = ASSkip(3, keep=0.0, anneal=0.0, total_samples=30, seed=0)
    skip.record(torch.arange(3), *loss_fn.last_stats.rows(), samples_seen=0)
    # sentence 2: its one active token is masked; the unsure tokens are padding (-100)
    assert skip.zero.tolist() == [True, False, True]
    assert skip.rows.tolist() == [2, 3, 1]
    assert skip.skipped_rows(torch.tensor([0, 2])).item() == 3


def test_multilabel_row_is_zero_only_when_every_class_is_masked():
    logits = torch.tensor([[9.0, -9.0, -9.0], [0.0, 0.0, -9.0]])
    targets = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    loss, stats = multilabel_as_softmax_with_stats(logits, targets, 0.3, reduction="none")
    skip = ASSkip(2, keep=0.0, anneal=0.0, total_samples=20, seed=0)
    skip.record(torch.arange(2), *stats.rows(), samples_seen=0)
    assert skip.zero.tolist() == [bool(loss[0] == 0), bool(loss[1] == 0)] == [True, False]


def test_skip_state_round_trips_and_refuses_other_data():
    skip = ASSkip(6, keep=0.3, anneal=0.1, total_samples=60, seed=2)
    skip.zero[[1, 4]] = True
    skip.plan_for(0, torch.arange(6), 0)
    other = ASSkip(6, keep=0.0, anneal=0.0, total_samples=60, seed=0)
    other.load_state_dict(skip.state_dict())
    assert torch.equal(other.zero, skip.zero) and torch.equal(other.plan, skip.plan)
    assert (other.keep, other.anneal, other.seed) == (0.3, 0.1, 2)
    with pytest.raises(ValueError, match="holds 6 samples, but the run has 7"):
        ASSkip(7, keep=0.3, anneal=0.1, total_samples=70, seed=2).load_state_dict(skip.state_dict())


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(loss="softmax", as_skip=True), "as_skip needs an AS loss"),
        (dict(as_skip=True, skip_keep=1.5), r"skip_keep must be in \[0.0, 1.0\], but got 1.5"),
        (dict(as_skip=True, skip_anneal=-0.1), r"skip_anneal must be in \[0.0, 1.0\]"),
        (dict(as_skip=True, skip_probe="yes"), "skip_probe must be true or false, but got 'yes'"),
        (dict(as_skip=True, skip_backoff=0.5), r"skip_backoff must be in \[1.0, inf\), but got 0"),
    ],
)
def test_bad_skip_settings_fail_with_one_line(overrides, message):
    with pytest.raises(ValueError, match=message) as err:
        TrainConfig(**{**MASKING, **overrides}).validate()
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("flag, probe", [([], True), (["--no-skip-probe"], False)])
def test_the_skip_probe_flag_sets_how_a_run_rechecks(flag, probe):
    from astune.cli.parser import build_parser
    from astune.cli.train import train_config

    args = build_parser().parse_args(["train", "--dataset", "sst5", "--as-skip", *flag])
    config = train_config(args)
    assert config.as_skip and config.skip_probe is probe


# -- training runs --------------------------------------------------------------------------
@pytest.mark.slow
def test_keeping_every_sample_equals_plain_as_softmax_exactly(tmp_path, data_dir, sst5):
    common = dict(epochs=2, eval_every=6, as_speed=True, lam=1.0, max_accum_steps=3)
    plain = config(tmp_path, "plain", data_dir, **common)
    # v1 re-checks (no probe, no back-off): keep 1 trains on every zero-loss sample, so nothing
    # is skipped
    v1 = dict(skip_keep=1.0, skip_probe=False, skip_backoff=1.0)
    kept = config(tmp_path, "kept", data_dir, as_skip=True, **v1, **common)
    expected, got = fit(plain, data=sst5), fit(kept, data=sst5)
    a, b = read_metrics(plain), read_metrics(kept)
    assert [{k: v for k, v in r.items() if k not in SKIP_RECORD_KEYS} for r in timeless(b)] == (
        timeless(a)
    )
    assert all(r["skipped_ratio"] == 0.0 for r in b)
    assert max(r["masked_ratio"] for r in a) > 0.1  # masking happened, yet nothing was skipped
    for key in ("test_accuracy", "test_loss", "optimizer_steps", "samples_computed"):
        assert got[key] == expected[key], key


@pytest.mark.slow
def test_skipped_samples_come_back_when_active_and_as_speed_counts_skipped_as_masked(
    tmp_path, data_dir, sst5, monkeypatch
):
    calls: list[tuple[int, int]] = []
    history: dict[int, list[bool]] = {}
    update, record = ASSpeed.update, ASSkip.record

    def spy_update(self, n_active, n_masked):
        calls.append((n_active, n_masked))
        return update(self, n_active, n_masked)

    def spy_record(self, index, active, masked, **kwargs):
        record(self, index, active, masked, **kwargs)
        for i in index.tolist():
            history.setdefault(i, []).append(bool(self.zero[i]))

    monkeypatch.setattr(ASSpeed, "update", spy_update)
    monkeypatch.setattr(ASSkip, "record", spy_record)
    run = config(
        tmp_path, "skip", data_dir, epochs=5, as_skip=True, skip_keep=0.3, skip_anneal=0.0,
        as_speed=True, lam=1.0, max_accum_steps=4,
    )  # fmt: skip
    final = fit(run, data=sst5)
    records = read_metrics(run)
    seen, computed = final["samples_seen"], final["samples_computed"]
    assert seen == 5 * 192 and computed < seen
    assert records[-1]["samples_computed"] == computed
    assert max(r["skipped_ratio"] for r in records) > 0.05
    # a sample whose loss was zero was re-checked, found active again and computed as such
    came_back = [i for i, z in history.items() if any(a and not b for a, b in zip(z, z[1:]))]
    assert came_back, "no zero-loss sample was re-checked and found active again"
    # single-label: one row per sample, so AS-Speed saw every visited sample, and every skipped
    # one counted as masked
    assert sum(a for a, _ in calls) == seen
    assert sum(m for _, m in calls) >= seen - computed


class WatchRechecks(LoopHooks):
    """What each re-check got and found, each model call's grad mode and train mode (from the
    first re-check on), and the samples each epoch trained on."""

    def __init__(self) -> None:
        self.rechecks: list[tuple[int, list[int], list[bool]]] = []  # epoch, index, found zero
        self.calls: list[tuple[bool, bool]] = []  # (grad enabled, model.training)
        self.trained: dict[int, set[int]] = {}
        self.watching = False

    def on_recheck_start(self, run, index):
        if not self.watching:
            self.watching = True
            run.model.register_forward_hook(
                lambda module, args, out: self.calls.append(
                    (torch.is_grad_enabled(), module.training)
                )
            )

    def on_recheck_end(self, run, index):  # single-label: one row per sample
        active, masked = run.loss_fn.last_stats.rows()
        self.rechecks.append((run.pos.epoch, index.tolist(), (masked | ~active).tolist()))

    def on_micro_step_start(self, run, batch, visit):
        self.trained.setdefault(run.pos.epoch, set()).update(visit.index.tolist())


@pytest.mark.slow
def test_rechecks_are_forward_passes_without_gradient_and_only_active_samples_train(
    tmp_path, data_dir, sst5
):
    watch = WatchRechecks()
    run = config(
        tmp_path, "probe", data_dir, epochs=5, as_skip=True, skip_keep=0.5, skip_anneal=0.2
    )
    final = fit(run, data=sst5, hooks=[watch])
    assert final["samples_rechecked"] == sum(len(i) for _, i, _ in watch.rechecks) > 0
    found_active = sum(not z for _, _, zeros in watch.rechecks for z in zeros)
    assert final["rechecks_active"] == found_active < final["samples_rechecked"]
    assert read_metrics(run)[-1]["samples_rechecked"] == final["samples_rechecked"]
    # one model call per re-checked micro-batch without gradient, in train mode (dropout)
    chunks = sum(math.ceil(len(i) / 16) for _, i, _ in watch.rechecks)
    assert watch.calls.count((False, True)) == chunks
    for epoch, index, zeros in watch.rechecks:  # masked again: skipped; active: trained on
        trained = watch.trained[epoch]
        assert all((i in trained) != zero for i, zero in zip(index, zeros)), epoch
    # the anneal share (the last epoch) re-checks every zero-loss sample
    assert watch.rechecks[-1][0] == 4 and final["samples_computed"] < final["samples_seen"]


@pytest.mark.slow
def test_resumed_skipping_run_equals_an_uninterrupted_one(tmp_path, data_dir, sst5):
    """With everything that holds state across a resume: AS-Speed, dropout, the re-check
    back-off (the default), the soft policy's scores and plan, and micro-batches grouped by
    length."""
    straight = config(
        tmp_path, "straight", data_dir, epochs=3, eval_every=5, as_skip=True, skip_keep=0.3,
        as_speed=True, dropout=0.1, length_window=4, checkpoint_every="eval", skip_policy="soft",
    )  # fmt: skip
    snapshots = Snapshots(tmp_path / "snapshots")
    expected = fit(straight, data=sst5, callback=snapshots)
    records = read_metrics(straight)
    # resumed after an evaluation inside an epoch after skipping started: the plan is mid-way
    stop_at = next(r["evaluation"] for r in records if r["skipped_ratio"] > 0 and r["epoch"] % 1)
    folder = snapshots.folder(stop_at) / "checkpoint"
    restored = Run(straight, data=sst5)
    restored.restore(folder)
    skip = restored.batches.skip  # AS-Skip's batch source
    assert skip.plan_epoch == restored.pos.epoch
    assert restored.pos.batch > 0 and bool(skip.zero.any())  # mid-epoch, mid-plan
    assert bool((skip.headroom > 0).any())  # the back-off has headrooms to restore
    soft = restored.batches.soft  # the soft policy's plan of this epoch, weights and scores
    assert soft.plan_epoch == restored.pos.epoch and bool((~soft.keep).any())
    assert bool((soft.weight == 2.0).any()) and not bool(soft.score.isnan().any())
    resumed, final = snapshots.resume(straight, stop_at, sst5)
    for key in ("val_accuracy", "test_loss", "optimizer_steps", "samples_computed"):
        assert final[key] == expected[key], key

    assert timeless(read_metrics(resumed)) == timeless(records)


@pytest.mark.slow
def test_a_resume_after_an_epoch_that_computed_nothing_keeps_its_skipped_rows(
    tmp_path, data_dir, sst5, monkeypatch
):
    """Epoch 2 skips every sample: its rows wait in an open window for AS-Speed's next update,
    across the checkpoint written at its end."""
    plan_for, update = ASSkip.plan_for, ASSpeed.update
    calls: list[tuple[int, int]] = []

    def nothing_in_epoch_2(self, epoch, order, start, **recheck):
        plan = plan_for(self, epoch, order, start, **recheck)
        if epoch == 1:  # every sample found zero and none due: AS-Speed counts them masked
            self.zero[:] = True
            self.plan = plan = torch.zeros_like(plan)
        return plan

    def spy_update(self, n_active, n_masked):
        calls.append((n_active, n_masked))
        return update(self, n_active, n_masked)

    monkeypatch.setattr(ASSkip, "plan_for", nothing_in_epoch_2)
    monkeypatch.setattr(ASSpeed, "update", spy_update)
    straight = config(
        tmp_path, "straight", data_dir, epochs=3, as_skip=True, skip_keep=1.0, skip_anneal=0.0,
        skip_backoff=1.0, as_speed=True, lam=1.0, checkpoint_every="eval",
    )  # fmt: skip
    snapshots = Snapshots(tmp_path / "snapshots")
    expected = fit(straight, data=sst5, callback=snapshots)
    straight_calls = list(calls)
    # the snapshot at the end of the epoch that computed nothing (one evaluation per epoch)
    (end_of_epoch_2,) = [r["evaluation"] for r in read_metrics(straight) if r["epoch"] == 2]
    calls.clear()
    _, resumed = snapshots.resume(straight, end_of_epoch_2, sst5)
    assert calls == straight_calls[-len(calls) :]
    assert calls[0][0] > 192 and calls[0][1] >= 192  # epoch 2's rows, all counted masked
    for key in ("test_loss", "optimizer_steps", "samples_computed", "samples_seen"):
        assert resumed[key] == expected[key], key


@pytest.mark.parametrize(
    "dataset, loss", [("conll2003", "as_softmax"), ("go_emotions", "multilabel_as_softmax")]
)
def test_token_and_multilabel_runs_account_for_every_visited_sample(
    tmp_path, data_dir, dataset, loss
):
    run = config(
        tmp_path, dataset, data_dir, dataset=dataset, loss=loss, max_train_samples=64,
        max_eval_samples=32, epochs=2, as_skip=True, skip_keep=0.0, skip_anneal=0.0,
    )  # fmt: skip
    fitted = Run(run)
    final = fitted.train()
    records = read_metrics(run)
    seen, computed = final["samples_seen"], final["samples_computed"]
    assert seen == 2 * 64 >= computed and records[0]["skipped_ratio"] == 0.0
    # epoch 2 (keep 0) computes exactly the samples not flagged zero in epoch 1; the others
    # were last computed in epoch 1 and keep their zero flag
    skip = fitted.batches.skip
    assert computed == 64 + int(skip.plan.sum())
    stale = skip.last_computed < 64
    assert int(stale.sum()) == seen - computed and bool(skip.zero[stale].all())
    assert int(skip.last_computed.min()) >= 0  # every sample computed at least once
