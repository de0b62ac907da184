"""Argument validation in Optuna's style: raise ValueError naming the value and what is accepted."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

REDUCTIONS = ("mean", "sum", "none")


class InvalidArgument(ValueError):
    """A ValueError about one argument: its ``name``, what it ``must`` be (``"must be in (0.0,
    inf)"``) and the ``value`` it got, so that a command can name its flag instead
    (:meth:`named`)."""

    def __init__(self, name: str, must: str, value: Any) -> None:
        super().__init__(f"{name} {must}, but got {value!r}.")
        self.name, self.must, self.value = name, must, value

    def named(self, label: str) -> InvalidArgument:
        """The same refusal with the argument called ``label`` (``--num-samples``)."""
        return InvalidArgument(label, self.must, self.value)

    def __reduce__(self) -> tuple[type, tuple[str, str, Any]]:
        # a trial's error travels pickled to the driver: rebuilt from its three parts
        return InvalidArgument, (self.name, self.must, self.value)


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
        raise InvalidArgument(name, f"must be a number in {interval}", value)
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if too_low or too_high:
        raise InvalidArgument(name, f"must be in {interval}", value)
    return float(value)


def check_int(name: str, value: Any, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` after checking it is an int inside ``[low, high]``."""
    interval = _interval(low, high, False, False)
    wrong_type = isinstance(value, bool) or not isinstance(value, int)
    if wrong_type or (low is not None and value < low) or (high is not None and value > high):
        raise InvalidArgument(name, f"must be an integer in {interval}", value)
    return value


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> Any:
    """Return ``value`` after checking it is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        accepted = ", ".join(repr(c) for c in choices)
        raise InvalidArgument(name, f"must be one of {accepted}", value)
    return value


def _interval(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    left = "(" if low_open or low is None else "["
    right = ")" if high_open or high is None else "]"
    return f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
