"""A config as a seed point of a search space: each value snapped onto the space's domain, the
keys its loss and switches leave unsampled dropped, and seed points put first. The portfolio's
widened space (:mod:`astune.history.portfolio_space`) and the deprecated warm space
(:mod:`astune.recommendation.warm_space`) both place configs with them."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from astune.config import AS_SPEED_FIELDS
from astune.history.transfer import TRANSFER_KEYS
from astune.losses.catalogue import AS_LOSSES
from astune.space.params import Param
from astune.space.space import SearchSpace


def space_param(space: SearchSpace, key: str, loss: str) -> Param | None:
    """``key``'s spec for ``loss`` in the space, or None where the space does not have it."""
    try:
        return space.param(key, loss)
    except (KeyError, ValueError):  # ValueError: SpaceError, a name the loss does not take
        return None


def consistent(point: dict[str, Any], loss: str) -> dict[str, Any]:
    """``point`` without the keys its loss or switches leave unsampled: AS-Speed's lam and s
    without ``as_speed``, the skip policy without ``as_skip``, every speed key and delta/r for a
    loss that is not AS-Softmax; and InfoBatch turned off where AS-Skip is on (two ways of
    leaving samples out; AS-Skip, AS-Softmax's own, stays)."""
    drop = set() if point.get("as_speed") else set(AS_SPEED_FIELDS)
    drop |= set() if point.get("as_skip") else {"skip_policy"}
    if point.get("as_skip") and point.get("infobatch") and loss in AS_LOSSES:
        point = {**point, "infobatch": False}
    if loss not in AS_LOSSES:
        drop |= {
            "as_speed",
            "as_skip",
            "skip_policy",
            "lam",
            "max_accum_steps",
            "delta",
            "warmup_ratio",
        }
    return {k: v for k, v in point.items() if k not in drop}


def three_digits(x: float, rounding: Any = round) -> float:
    """``x`` to 3 significant digits, rounded by ``rounding`` (floor: down, ceil: up)."""
    if x <= 0:
        return x
    scale = 10.0 ** (math.floor(math.log10(x)) - 2)
    return tidy(rounding(x / scale) * scale)


def tidy(x: float) -> float:
    """Rounding noise off a grid value (0.30000000000000004 -> 0.3)."""
    return float(f"{x:.12g}")


def snapped(param: Param | None, value: Any) -> Any:
    """``value`` moved onto ``param``'s domain: clipped and onto its step for a range, the
    nearest choice (numeric) or the value itself for categoricals; None where it cannot be."""
    if param is None:
        return None
    if param.kind == "fixed":
        return param.value
    if param.kind == "categorical":
        if param.contains(value):
            return value
        numbers = [c for c in param.choices if is_number(c) and c > 0]
        if numbers and is_number(value) and value > 0:  # batch sizes: the nearest by ratio
            return min(numbers, key=lambda c: abs(math.log(c / value)))
        return None
    x = min(max(float(value), param.low), param.high)
    if param.step is not None:
        x = param.low + round((x - param.low) / param.step) * param.step
    elif param.kind == "float":  # inside the range still: its bounds have 3 digits (_on_grid)
        x = min(max(three_digits(x), param.low), param.high)
    x = int(round(x)) if param.kind == "int" else tidy(x)
    return x if param.contains(x) else None


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def as_point(space: SearchSpace, loss: str, config: dict[str, Any]) -> dict[str, Any] | None:
    """A reference trial's config as a seed point of the space: its loss if searched (its
    family's AS loss otherwise), each of its values the space can hold, snapped."""
    name = config.get("loss")
    if name not in space.losses:
        name = loss if name in AS_LOSSES or name is None else None
    if name is None or name not in space.losses:
        return None
    point: dict[str, Any] = {"loss": name}
    for key in (*TRANSFER_KEYS, "delta", "warmup_ratio"):
        if config.get(key) is None or (param := space_param(space, key, name)) is None:
            continue
        value = snapped(param, config[key])
        if value is not None:
            point[key] = value
    return consistent(point, name)


def with_points(space: SearchSpace, first: list[dict[str, Any]]) -> SearchSpace:
    """``first`` (those with a loss) ahead of the space's own points that are not among them."""
    new = [p for p in first if p.get("loss")]
    rest = [p for p in space.points if p not in new]
    return dataclasses.replace(space, points=(*new, *rest))
