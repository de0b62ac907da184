"""Argument validation in Optuna's style: raise ValueError naming the value and what is accepted."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

REDUCTIONS = ("mean", "sum", "none")


def check_range(
    name: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return ``value`` as a float after checking it is a finite number inside the interval.

    Raises:
        ValueError: ``value`` is not a real number or lies outside ``[low, high]`` (or the open
            variant chosen by ``low_open`` / ``high_open``).
    """
    interval = _interval(low, high, low_open, high_open)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ValueError(f"{name} must be a number in {interval}, but got {value!r}.")
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if too_low or too_high:
        raise ValueError(f"{name} must be in {interval}, but got {value!r}.")
    return float(value)


def check_int(name: str, value: Any, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` after checking it is an int inside ``[low, high]``."""
    interval = _interval(low, high, False, False)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer in {interval}, but got {value!r}.")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be an integer in {interval}, but got {value!r}.")
    return value


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> Any:
    """Return ``value`` after checking it is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        accepted = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {accepted}, but got {value!r}.")
    return value


def _interval(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    left = "(" if low_open or low is None else "["
    right = ")" if high_open or high is None else "]"
    return f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
