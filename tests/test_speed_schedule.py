"""ASSpeed on scripted masked counts, and the DeltaSchedule warm-up."""

from __future__ import annotations

import pytest

from astune.losses import DeltaSchedule
from astune.speed import ASSpeed


def test_scripted_sequence_rises_by_one_never_falls_and_caps():
    speed = ASSpeed(lam=1.0, max_steps=4)
    # (n_active, n_masked) -> raw request lam * N / (N - masked)
    script = [(32, 0), (32, 16), (32, 28), (32, 0), (32, 30), (32, 31), (32, 31)]
    # raw requests:   1,       2,       8,       1,       16,      32,      32
    got = [speed.update(a, m) for a, m in script]
    assert got == [1, 2, 3, 3, 4, 4, 4]


def test_all_masked_window_asks_for_max_steps_without_dividing_by_zero():
    speed = ASSpeed(lam=0.5, max_steps=5)
    assert speed.target(16, 16) == 5
    assert [speed.update(16, 16) for _ in range(6)] == [2, 3, 4, 5, 5, 5]


def test_rounding_is_half_up_and_at_least_one():
    assert ASSpeed(lam=1.5, max_steps=9).target(10, 0) == 2
    assert ASSpeed(lam=2.5, max_steps=9).target(10, 0) == 3
    assert ASSpeed(lam=0.2, max_steps=9).target(10, 0) == 1
    assert ASSpeed(lam=0.5, max_steps=9).target(10, 5) == 1
    assert ASSpeed(lam=0.5, max_steps=9).target(10, 6) == 1  # 1.25 rounds down
    assert ASSpeed(lam=0.5, max_steps=9).target(12, 8) == 2  # 1.5 rounds up


def test_window_with_no_active_rows_keeps_the_current_value():
    speed = ASSpeed(lam=2.0, max_steps=6)
    speed.update(8, 0)
    assert speed.update(0, 0) == 2


def test_state_round_trip_continues_the_same_sequence():
    script = [(10, 0), (10, 5), (10, 8), (10, 9), (10, 9)]
    straight = ASSpeed(lam=1.0, max_steps=6)
    expected = [straight.update(a, m) for a, m in script]
    first = ASSpeed(lam=1.0, max_steps=6)
    head = [first.update(a, m) for a, m in script[:2]]
    resumed = ASSpeed(lam=3.0, max_steps=2)  # values are overwritten by the state
    resumed.load_state_dict(first.state_dict())
    assert head + [resumed.update(a, m) for a, m in script[2:]] == expected
    assert resumed.state_dict() == straight.state_dict()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(lam=0.0, max_steps=4), r"lam must be in \(0\.0, inf\), but got 0\.0"),
        (dict(lam=-1, max_steps=4), r"lam must be in \(0\.0, inf\)"),
        (dict(lam=1.0, max_steps=0), r"max_steps must be an integer in \[1, inf\), but got 0"),
        (dict(lam=1.0, max_steps=2.5), r"max_steps must be an integer.*2\.5"),
    ],
)
def test_speed_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ASSpeed(**kwargs)


def test_speed_rejects_more_masked_than_active():
    with pytest.raises(ValueError, match=r"n_masked must be an integer in \[0, 4\], but got 5"):
        ASSpeed(1.0, 4).update(4, 5)


def test_delta_schedule_warms_up_at_one_then_switches():
    schedule = DeltaSchedule(delta=0.35, warmup_ratio=0.25, total_steps=100)
    assert [schedule.delta_at(s) for s in (0, 24, 25, 99, 500)] == [1.0, 1.0, 0.35, 0.35, 0.35]
    assert DeltaSchedule(0.3, 0.0, 10).delta_at(0) == 0.3
    assert DeltaSchedule(0.3, 1.0, 10).delta_at(9) == 1.0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (
            dict(delta=1.2, warmup_ratio=0.1, total_steps=10),
            r"delta must be in \(0\.0, 1\.0\], but got 1\.2",
        ),
        (
            dict(delta=0.0, warmup_ratio=0.1, total_steps=10),
            r"delta must be in \(0\.0, 1\.0\], but got 0\.0",
        ),
        (
            dict(delta=0.3, warmup_ratio=-0.1, total_steps=10),
            r"warmup_ratio must be in \[0\.0, 1\.0\]",
        ),
        (
            dict(delta=0.3, warmup_ratio=0.1, total_steps=0),
            r"total_steps must be an integer in \[1, inf\)",
        ),
    ],
)
def test_delta_schedule_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DeltaSchedule(**kwargs)
