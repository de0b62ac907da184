"""Seed statistics of confirm runs: a mean with its t interval, and a paired difference to the
baseline over the same seeds (t interval and ``scipy.stats.ttest_rel``'s p-value)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """The mean of ``n`` values and its two-sided ``CONFIDENCE`` t interval ``[low, high]``."""

    mean: float
    low: float
    high: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    def format(self, digits: int = 4) -> str:
        """``0.3700 +- 0.0123`` (``+- nan`` with a single value)."""
        return f"{self.mean:.{digits}f} +- {self.half_width:.{digits}f}"


@dataclass(frozen=True)
class PairedDifference:
    """``values - baseline`` over the same seeds: its mean interval and the paired t-test."""

    interval: Interval
    p_value: float


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """Mean of ``values`` +- ``t_{(1+confidence)/2, n-1} * s / sqrt(n)`` (s: sample std).

    One value gives a nan-wide interval; none is a ValueError.
    """
    from scipy import stats

    n = len(values)
    if n == 0:
        raise ValueError("t_interval needs at least one value, but got none.")
    mean = math.fsum(values) / n
    if n == 1:
        return Interval(mean, math.nan, math.nan, 1)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(stats.t.ppf((1.0 + confidence) / 2.0, n - 1)) * std / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n)


def paired_difference(
    values: Sequence[float], baseline: Sequence[float], confidence: float = CONFIDENCE
) -> PairedDifference:
    """The paired difference ``values[i] - baseline[i]`` (same seed ``i``).

    The p-value is ``scipy.stats.ttest_rel``'s (two-sided): 1.0 when every difference is 0
    (no evidence of a difference), nan with fewer than two pairs.
    """
    from scipy import stats

    if len(values) != len(baseline):
        raise ValueError(
            f"paired_difference needs one baseline value per value, but got {len(values)} "
            f"values and {len(baseline)} baseline values."
        )
    diffs = [a - b for a, b in zip(values, baseline)]
    interval = t_interval(diffs, confidence)
    if len(diffs) < 2:
        return PairedDifference(interval, math.nan)
    if all(d == diffs[0] for d in diffs) and diffs[0] == 0.0:
        return PairedDifference(interval, 1.0)
    p_value = float(stats.ttest_rel(values, baseline).pvalue)
    return PairedDifference(interval, p_value)
