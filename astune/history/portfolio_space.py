"""A search space holding a portfolio (issue 62, items 1 and 2): each range widened to contain
the portfolio's values (a bounding box around what won, as Perrone et al. 2019 learn one), a
fixed value turned into the range from it to theirs, and the portfolio's configs as the first
seed points, exactly as they were recorded. A value the space cannot hold (a batch size its
choices lack, a key it does not search) is left to the space."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from astune.history.portfolio import PortfolioEntry
from astune.history.space_points import as_point, is_number, space_param, with_points
from astune.space.params import Param
from astune.space.space import SearchSpace

WIDENED_KEYS = ("lr", "epochs", "delta", "warmup_ratio", "lr_warmup_ratio", "lam")
"""The numeric keys whose ranges grow to hold a portfolio's values."""
LOG_RANGES = ("lr",)
"""The keys whose range a fixed value turns into is searched on a log scale."""
LOSS_KEYS = ("delta", "warmup_ratio")
SPEED_KEYS = ("lam",)


def with_portfolio(
    space: SearchSpace, entries: Sequence[PortfolioEntry], *, keep: Sequence[str] = ()
) -> SearchSpace:
    """``space`` widened to hold every entry's config, the entries first among its points (in
    order; one the space still cannot hold exactly is moved onto it); the keys in ``keep``
    (those a flag fixed) are left as they are, and out of the points."""
    widened = widened_for(space, entries, keep=keep)
    return with_points(widened, portfolio_points(widened, entries, keep=keep))


def widened_for(
    space: SearchSpace, entries: Sequence[PortfolioEntry], *, keep: Sequence[str] = ()
) -> SearchSpace:
    """``space`` with each range of :data:`WIDENED_KEYS` not in ``keep`` grown to hold the
    entries' values (of the losses it searches)."""
    for entry in entries:
        loss = entry.config.get("loss")
        if loss not in space.losses:
            continue
        for key in (k for k in WIDENED_KEYS if k not in keep):
            value = entry.config.get(key)
            param = space_param(space, key, loss)
            if value is not None and param is not None and is_number(value):
                space = _holding(space, key, loss, param, float(value))
    return space


def portfolio_points(
    space: SearchSpace, entries: Sequence[PortfolioEntry], *, keep: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """The entries as ``space``'s seed points, in order and each once, without the keys in
    ``keep``; an entry the space cannot hold is left out."""
    points: list[dict[str, Any]] = []
    for entry in entries:
        point = as_point(space, str(entry.config.get("loss")), entry.config)
        if point is not None:
            point = {k: v for k, v in point.items() if k not in keep}
            points += [point] if point not in points else []
    return points


def _holding(space: SearchSpace, key: str, loss: str, param: Param, value: float) -> SearchSpace:
    """The space with ``key``'s domain grown to hold ``value`` (unchanged when it does)."""
    if param.contains(int(value) if param.kind == "int" else value):
        return space
    if param.kind == "categorical":
        return space  # a choice is the space's to offer, not history's
    if param.kind == "fixed":
        if not is_number(param.value):
            return space
        low, high = sorted((float(param.value), value))
        whole = float(param.value).is_integer() and value.is_integer()
        step = 1 if whole else None
        widened = space.narrowed(key, low, high, loss=loss, log=key in LOG_RANGES, step=step)
        return _filled(widened, key, loss, param.value)
    low, high = min(param.low, value), max(param.high, value)
    if param.step is None:
        return space.narrowed(key, low, high, loss=loss)
    on_grid = _on_steps(param, value)
    step = param.step if on_grid else _common_step(param.step, value - param.low)
    if step is None:
        return space  # off any grid near the space's: the point is moved onto it
    return space.narrowed(key, low, high, loss=loss, step=step)


def _filled(space: SearchSpace, key: str, loss: str, value: Any) -> SearchSpace:
    """The space's points that ran with ``key`` fixed at ``value`` now name it: it is searched
    (delta and r: the points of ``loss``; lambda: those with AS-Speed on; others: all)."""

    def applies(point: dict[str, Any]) -> bool:
        if key in LOSS_KEYS:
            return point.get("loss") == loss
        return bool(point.get("as_speed")) if key in SPEED_KEYS else True

    points = tuple({key: value, **p} if applies(p) and key not in p else p for p in space.points)
    return dataclasses.replace(space, points=points)


def _on_steps(param: Param, value: float) -> bool:
    """Whether ``value`` lies on ``param``'s step grid (anchored at its low)."""
    k = (value - param.low) / param.step
    return math.isclose(k, round(k), abs_tol=1e-9)


def _common_step(step: float, offset: float) -> float | None:
    """The coarsest of ``step``, its half, fifth and tenth that divides ``offset`` (a value's
    distance from the grid's anchor); None when none does."""
    for finer in (step, step / 2, step / 5, step / 10):
        if math.isclose(offset / finer, round(offset / finer), abs_tol=1e-9):
            return finer
    return None
