"""Adaptive delta (astune/losses/delta.py): each controller against a plain reference on scripted
masked ratios and margins, their bounds and warm-up, their checkpoint state, the one-line
errors of their settings, and an exact resume of a training run whose delta adapts."""

from __future__ import annotations

import pytest
from training_runs import LOOP_BASE, Snapshots, loop_config, read_metrics, sst5_slice, timeless

from astune.config import TrainConfig
from astune.losses import DeltaSchedule, EmaDelta, TargetMaskDelta, build_delta_schedule
from astune.training import fit

MASKED = [0.0, 0.05, 0.3, 0.6, 0.9, 0.9, 0.2, 0.0, 0.4, 0.45, 0.5, 1.0]
MARGINS = [0.1, 0.4, None, 0.8, -0.2, 0.95, 0.3, 0.3, 0.6, 0.7, 0.2, 0.5]


def reference_target_mask(delta, masked, *, total, warmup, target, gain, max_step, low):
    """Plain proportional control: the target rises linearly from 0 at ``warmup`` to
    ``target`` at ``total``; delta moves by gain * (masked - target), at most max_step."""
    out, current = [], delta
    for step, ratio in enumerate(masked):
        if step >= warmup:
            aim = target * min(1.0, max(0.0, (step - warmup) / max(1.0, total - warmup)))
            move = min(max_step, max(-max_step, gain * (ratio - aim)))
            current = min(1.0, max(low, current + move))
        out.append(1.0 if step + 1 < warmup else current)
    return out


def reference_ema(delta, margins, *, warmup, momentum, low):
    out, ema, current = [], delta, delta
    for step, margin in enumerate(margins):
        if step >= warmup and margin is not None:
            ema = momentum * ema + (1 - momentum) * margin
            current = min(1.0, max(low, ema))
        out.append(1.0 if step + 1 < warmup else current)
    return out


def replay(schedule: DeltaSchedule, masked, margins) -> list[float]:
    """The delta of the step after each observation."""
    out = []
    for step, (ratio, margin) in enumerate(zip(masked, margins)):
        schedule.observe(step, masked_ratio=ratio, margin=margin)
        out.append(schedule.delta_at(step + 1))
    return out


@pytest.mark.parametrize("warmup_ratio", [0.0, 0.25])
def test_target_mask_follows_a_plain_proportional_controller(warmup_ratio):
    schedule = TargetMaskDelta(
        0.3, warmup_ratio, 12, mask_target=0.5, gain=0.4, max_step=0.1, delta_min=0.05
    )
    got = replay(schedule, MASKED, MARGINS)
    want = reference_target_mask(
        0.3, MASKED, total=12, warmup=warmup_ratio * 12, target=0.5, gain=0.4, max_step=0.1,
        low=0.05,
    )  # fmt: skip
    assert got == pytest.approx(want)
    moves = [b - a for a, b in zip(got[2:], got[3:])]
    assert max(abs(m) for m in moves) <= 0.1 + 1e-12 and min(got) >= 0.05
    # masked well above the target (0.9 at step 4): delta rises; nothing masked (step 7): it falls
    assert got[4] > got[3] and got[7] < got[6]


def test_ema_follows_the_margins_average_within_its_bounds():
    schedule = EmaDelta(0.3, 0.25, 12, momentum=0.5, delta_min=0.1)
    got = replay(schedule, MASKED, MARGINS)
    assert got == pytest.approx(reference_ema(0.3, MARGINS, warmup=3, momentum=0.5, low=0.1))
    assert min(got) >= 0.1 and max(got) <= 1.0
    assert got[:2] == [1.0, 1.0]  # the warm-up holds delta at 1 and learns nothing


def test_fixed_delta_learns_nothing_and_every_schedule_holds_one_in_the_warmup():
    fixed = build_delta_schedule("fixed", delta=0.3, warmup_ratio=0.5, total_steps=10)
    assert replay(fixed, MASKED, MARGINS)[4:] == [0.3] * 8
    for name in ("target-mask", "ema"):
        schedule = build_delta_schedule(name, delta=0.3, warmup_ratio=0.5, total_steps=10)
        for step in range(5):
            schedule.observe(step, masked_ratio=1.0, margin=0.9)
            assert schedule.delta_at(step) == 1.0
        assert schedule.delta_at(5) == 0.3  # starts from delta when the warm-up ends


@pytest.mark.parametrize("name", ["target-mask", "ema"])
def test_schedule_state_round_trips_and_refuses_another_schedule(name):
    schedule = build_delta_schedule(name, delta=0.3, warmup_ratio=0.0, total_steps=12)
    replay(schedule, MASKED[:6], MARGINS[:6])
    again = build_delta_schedule(name, delta=0.3, warmup_ratio=0.0, total_steps=12)
    again.load_state_dict(schedule.state_dict())
    assert replay(again, MASKED[6:], MARGINS[6:]) == replay(schedule, MASKED[6:], MARGINS[6:])
    with pytest.raises(ValueError, match=f"delta schedule is {name!r}, but this run asks for"):
        DeltaSchedule(0.3, 0.0, 12).load_state_dict(schedule.state_dict())


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(delta_schedule="pid"), "delta_schedule must be one of 'fixed', 'target-mask', 'ema'"),
        (dict(delta_schedule="ema", loss="softmax"), "delta_schedule 'ema' needs an AS loss"),
        (dict(mask_target=0.0), r"mask_target must be in \(0.0, 1.0\], but got 0.0"),
        (dict(delta_gain=-1.0), r"delta_gain must be in \(0.0, inf\), but got -1.0"),
        (dict(delta_max_step=1.5), r"delta_max_step must be in \(0.0, 1.0\], but got 1.5"),
        (dict(delta_momentum=1.0), r"delta_momentum must be in \[0.0, 1.0\), but got 1.0"),
        (
            dict(delta_schedule="target-mask", delta=0.1, delta_min=0.2),
            r"delta_min must be at most delta \(0.1\), but got 0.2",
        ),
    ],
)
def test_bad_delta_schedule_settings_fail_with_one_line(overrides, message):
    with pytest.raises(ValueError, match=message) as err:
        TrainConfig(**{"dataset": "sst5", **overrides}).validate()
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_a_run_whose_delta_adapts_logs_it_and_resumes_exactly(tmp_path, data_dir):
    sst5 = sst5_slice(LOOP_BASE, data_dir, n_train=96, n_eval=32)
    run = loop_config(
        tmp_path, "target-mask", data_dir, dataset="sst5", epochs=2, lr=2e-3, batch_size=16,
        loss="as_softmax", delta=0.3, warmup_ratio=0.25, delta_schedule="target-mask",
        delta_gain=2.0, delta_max_step=0.05, eval_every=2, dropout=0.1, checkpoint_every="eval",
    )  # fmt: skip
    snapshots = Snapshots(tmp_path / "snapshots")
    expected = fit(run, data=sst5, callback=snapshots)
    records = read_metrics(run)
    after = [r["delta_now"] for r in records if r["samples_seen"] >= 48]
    assert all(r["delta_now"] == 1.0 for r in records if r["samples_seen"] < 48)
    assert len(set(after)) > 2 and all(0.05 <= d < 1.0 for d in after)  # it moved
    margins = [r["train_margin"] for r in records]  # what recommend replays ema on
    assert all(-1.0 <= m <= 1.0 for m in margins) and len(set(margins)) == len(margins)
    stop_at = next(r["evaluation"] for r in records if r["samples_seen"] > 96)  # mid epoch 2
    resumed, final = snapshots.resume(run, stop_at, sst5)
    assert timeless(read_metrics(resumed)) == timeless(records)
    for key in ("val_accuracy", "test_loss", "optimizer_steps"):
        assert final[key] == expected[key], key


SCHEDULE_SPACE = """
extends: default
losses: [softmax, as_softmax]
loss_params:
  as_softmax:
    delta_schedule: {type: categorical, choices: [fixed, target-mask, ema]}
    mask_target: {type: float, low: 0.3, high: 0.8}
"""


def test_a_space_searches_the_schedule_under_loss_params(tmp_path):
    import optuna

    from astune.space import load_space
    from astune.space.params import SpaceError

    (tmp_path / "s.yaml").write_text(SCHEDULE_SPACE)
    space = load_space(tmp_path / "s.yaml")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    schedules = set()
    for _ in range(20):
        trial = study.ask()
        constants = space.define_by_run(trial)  # samples first: then trial.params holds them
        config = {**trial.params, **constants}
        if config["loss"] == "as_softmax":
            schedules.add(config["delta_schedule"])
            assert 0.3 <= config["mask_target"] <= 0.8
        else:
            assert "delta_schedule" not in config
        TrainConfig.from_dict({**config, "dataset": "sst5"}).validate()
    assert schedules == {"fixed", "target-mask", "ema"}
    (tmp_path / "bad.yaml").write_text(SCHEDULE_SPACE.replace("high: 0.8", "high: 1.5"))
    with pytest.raises(SpaceError, match=r"loss_params.as_softmax.mask_target: mask_target must"):
        load_space(tmp_path / "bad.yaml")
