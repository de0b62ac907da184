"""The seed statistics of `astune confirm` against scipy, written out here."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from astune.confirmation.stats import paired_difference, t_interval


@pytest.mark.parametrize("n", [2, 3, 10])
def test_t_interval_equals_scipys(n):
    values = list(np.random.default_rng(n).normal(0.4, 0.05, n))
    mean = sum(values) / n
    low, high = stats.t.interval(0.95, n - 1, loc=mean, scale=stats.sem(values))
    got = t_interval(values)
    assert (got.mean, got.low, got.high, got.n) == pytest.approx((mean, low, high, n))


def test_paired_difference_equals_scipys_paired_test():
    rng = np.random.default_rng(0)
    base = list(rng.normal(0.4, 0.05, 5))
    ours = [b + d for b, d in zip(base, rng.normal(0.02, 0.01, 5))]
    diffs = [a - b for a, b in zip(ours, base)]
    low, high = stats.t.interval(0.95, 4, loc=np.mean(diffs), scale=stats.sem(diffs))
    got = paired_difference(ours, base)
    assert got.p_value == pytest.approx(stats.ttest_rel(ours, base).pvalue)
    assert (got.interval.mean, got.interval.low, got.interval.high) == pytest.approx(
        (np.mean(diffs), low, high)
    )


def test_identical_runs_give_p_one_and_a_zero_interval():
    got = paired_difference([0.25, 0.25, 0.25], [0.25, 0.25, 0.25])
    assert got.p_value == 1.0 and (got.interval.low, got.interval.high) == (0.0, 0.0)


def test_single_value_and_bad_input():
    one = t_interval([0.5])
    assert one.mean == 0.5 and math.isnan(one.low) and math.isnan(one.high)
    with pytest.raises(ValueError, match="at least one value"):
        t_interval([])
    with pytest.raises(ValueError, match="one baseline value per value, but got 2 values and 3"):
        paired_difference([0.1, 0.2], [0.1, 0.2, 0.3])
