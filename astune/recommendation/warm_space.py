"""A search space warmed by a recommendation: delta and r moved toward history's fit (or, where
the space ships no value for them, narrowed to the recommendation), the recommended schedule
offered, the transferred keys' ranges moved toward history (:mod:`astune.history.transfer`)
and the recommendation first among the seed points, the best trials of the nearest tasks next.

``recommend --write-space`` writes it; ``search --warm-start`` searches it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from astune.history.space_points import (
    as_point,
    consistent,
    is_number,
    snapped,
    space_param,
    three_digits,
    tidy,
    with_points,
)
from astune.history.transfer import (
    SWITCHES,
    TRANSFER_KEYS,
    TRANSFER_POINTS,
    TransferAdvice,
    blend,
    history_range,
)
from astune.losses.catalogue import MULTI_LABEL_TASKS
from astune.recommendation.result import Recommendation
from astune.recommendation.schedules import ScheduleAdvice
from astune.space.params import Param, named, parse_param
from astune.space.space import SearchSpace

MODE_WEIGHT = 0.5
"""History's share from which a categorical or switch takes history's mode."""
EXTRA_POINTS_WEIGHT = 0.25
"""History's share from which its best trials are seed points of their own."""
PROBE_MIN_WEIGHT = 0.1
"""History's share below which a warm start does not probe the dataset: below it no range or
first seed value moves a tenth of the way toward history, and history adds no point of its own
(:data:`EXTRA_POINTS_WEIGHT`) and sets no switch (:data:`MODE_WEIGHT`), so the probe's seconds
would buy a space hardly apart from the one given."""


def warm_space(rec: Recommendation, space: SearchSpace) -> SearchSpace:
    """``space`` warmed by ``rec`` (module docstring); the shipped seed points that still lie
    in it follow the recommendation's."""
    multi = rec.difficulty.task in MULTI_LABEL_TASKS
    loss = "multilabel_as_softmax" if multi else "as_softmax"
    shipped = space.points  # before delta's narrowing drops those outside its range
    start: dict[str, Any] = {}
    if loss in space.loss_params:
        space, start = _delta_and_r(space, loss, rec, _first_seed(shipped, loss))
        space = _with_schedule(space, loss, rec.schedule)
    point_loss = loss if loss in space.losses else space.losses[0]
    space, moved = _moved_ranges(space, point_loss, rec.transfer, shipped)
    first = {**_held(space, point_loss, _first_seed(shipped, point_loss)), **moved}
    if point_loss == loss:
        first |= _recommended_point(space, loss, rec, start)
    points = [first, *_trial_points(space, loss, rec.transfer)]
    return with_points(space, points)


def _first_seed(shipped: Sequence[dict[str, Any]], loss: str) -> dict[str, Any]:
    """The first of the ``shipped`` seed points of ``loss`` (empty where none is)."""
    return next((p for p in shipped if p["loss"] == loss), {})


def _held(space: SearchSpace, loss: str, seed: dict[str, Any]) -> dict[str, Any]:
    """``seed`` as a point of ``loss`` less the values the warmed ``space`` no longer holds:
    what the first point keeps where history moves nothing (so that without history the points
    are the shipped ones, in their order)."""
    kept = {"loss": loss}
    for key, value in seed.items():
        param = space_param(space, key, loss) if key != "loss" else None
        if param is not None and param.contains(value):
            kept[key] = value
    return kept


def _delta_and_r(
    space: SearchSpace, loss: str, rec: Recommendation, seed: dict[str, Any]
) -> tuple[SearchSpace, dict[str, Any]]:
    """The space with delta's and r's ranges, and the first seed point's delta and r.

    Where the space ships them (in ``seed``, its first ``loss`` seed point: the paper's
    values for a paper's dataset), they move toward history's fit by delta's history weight
    and keep their range without history: the paper's rule, which ``recommend`` falls back
    to, does not displace a value tuned for the dataset. Where the space ships none, the
    recommendation's values and ranges, as ``recommend`` prints them.
    """
    r = rec.warmup_ratio
    wanted = {
        "delta": (rec.delta, rec.low, rec.high, rec.fit_delta),
        "warmup_ratio": (r, round(max(0.0, r - 0.1), 2), round(min(1.0, r + 0.1), 2),
                         rec.fit_warmup_ratio),
    }  # fmt: skip
    h, start = rec.history_weight, {}
    for key, (value, low, high, fit) in wanted.items():
        param = space_param(space, key, loss)
        if param is None or param.kind not in ("float", "int"):
            continue
        if seed.get(key) is None:
            space, start[key] = space.narrowed(key, low, high, loss=loss), value
            continue
        if fit is None:  # no history of this key: the space as shipped
            start[key] = seed[key]
            continue
        value = h * fit + (1 - h) * seed[key]
        low = min(param.low + h * (low - param.low), value)
        high = max(param.high + h * (high - param.high), value)
        low, high = _on_grid(param, low, high, key)
        if low < high:
            space = space.narrowed(key, low, high, loss=loss)
        start[key] = snapped(space_param(space, key, loss), value)
    return space, start


def _with_schedule(space: SearchSpace, loss: str, advice: ScheduleAdvice) -> SearchSpace:
    """Where history chose an adaptive schedule and the space does not search schedules: the
    space chooses between ``fixed`` and that schedule, whose parameters are fixed at the
    recommended values, so that the search itself can confirm or refute it."""
    params = space.loss_params.get(loss)
    if params is None or "delta_schedule" in params or advice.schedule == "fixed":
        return space
    where = f"loss_params.{loss}"
    added = {"delta_schedule": {"type": "categorical", "choices": ["fixed", advice.schedule]}}
    added |= {key: {"type": "fixed", "value": value} for key, value in advice.params.items()}
    with named(space.source):
        parsed = {k: parse_param(k, spec, f"{where}.{k}") for k, spec in added.items()}
    return dataclasses.replace(space, loss_params={**space.loss_params, loss: {**params, **parsed}})


def _recommended_point(
    space: SearchSpace, loss: str, rec: Recommendation, start: dict[str, Any]
) -> dict[str, Any]:
    """delta and r of ``start`` (:func:`_delta_and_r`), the schedule and its parameters as
    recommended, where the space holds them."""
    params = space.loss_params.get(loss, {})
    wanted = {"delta_schedule": rec.schedule.schedule, **rec.schedule.params, **start}
    return {k: v for k, v in wanted.items() if k in params and params[k].contains(v)}


def _shipped_value(points: Sequence[dict[str, Any]], key: str, loss: str, param: Param) -> Any:
    """The value the space itself starts ``key`` from: its first seed point's (of ``points``,
    the space's as shipped), else the fixed value or the range's middle (geometric where it is
    searched on a log scale); None for a categorical no seed point sets."""
    for point in points:
        if point["loss"] == loss and key in point:
            return point[key]
    if param.kind == "fixed":
        return param.value
    if param.kind == "categorical":  # no value of its own: Optuna samples it
        return None
    if param.log:
        return math.sqrt(param.low * param.high)
    return (param.low + param.high) / 2


def _moved_ranges(
    space: SearchSpace,
    loss: str,
    advice: TransferAdvice | None,
    shipped_points: Sequence[dict[str, Any]],
) -> tuple[SearchSpace, dict[str, Any]]:
    """The space with each transferred key moved toward history, and the first seed point's
    values of those keys for ``loss`` (history's centre moved from the shipped value, read from
    ``shipped_points``, by its weight)."""
    values: dict[str, Any] = {}
    if advice is None or not advice.centre:
        return space, values
    h = advice.weight
    for key in TRANSFER_KEYS:
        param = space_param(space, key, loss)
        if key not in advice.centre or param is None:
            continue
        shipped = _shipped_value(shipped_points, key, loss, param)
        if key in SWITCHES:
            value = advice.centre[key] if h >= MODE_WEIGHT else shipped
            value = None if value is None else snapped(param, value)
        elif not is_number(shipped):
            continue
        else:
            value = blend(key, float(advice.centre[key]), float(shipped), h)
            if param.kind == "categorical":  # choices stay; the point takes the nearest
                value = snapped(param, value)
            else:
                space, value = _ranged(space, key, loss, param, advice, value)
        if value is not None:
            values[key] = value
    return space, consistent(values, loss)


def _ranged(
    space: SearchSpace, key: str, loss: str, param: Param, advice: TransferAdvice, value: float
) -> tuple[SearchSpace, Any]:
    """The space with ``key``'s range moved toward history's by its weight and holding
    ``value`` (a fixed value becomes the range from it to ``value``), and ``value`` on it."""
    if param.kind == "fixed":
        if not is_number(param.value):
            return space, None
        whole = float(param.value).is_integer()
        value = float(round(value)) if whole else three_digits(value)
        if math.isclose(value, param.value):
            return space, param.value
        low, high = sorted((float(param.value), value))
        step = 1.0 if whole else None
        return space.narrowed(key, low, high, loss=loss, log=key == "lr", step=step), value
    h = advice.weight
    hist_low, hist_high = history_range(advice, key)
    low = min(blend(key, hist_low, param.low, h), value)
    high = max(blend(key, hist_high, param.high, h), value)
    low, high = _on_grid(param, low, high, key)
    if not low < high:
        return space, snapped(param, value)
    space = space.narrowed(key, low, high, loss=loss)
    return space, snapped(space_param(space, key, loss), value)


def _on_grid(param: Param, low: float, high: float, key: str) -> tuple[float, float]:
    """``[low, high]`` widened onto the param's step grid (anchored at its old low), whole for
    an int, and inside the key's domain."""
    if param.kind == "int":
        low, high = math.floor(low), math.ceil(high)
    if param.step is not None:
        anchor, step = param.low, param.step
        low = anchor + math.floor((low - anchor) / step + 1e-9) * step
        high = anchor + math.ceil((high - anchor) / step - 1e-9) * step
    elif param.kind == "float":  # a continuous range: bounds a reader can read (3 digits)
        low, high = three_digits(low, math.floor), three_digits(high, math.ceil)
    if key == "lr":
        high = min(high, 1.0)
    low = max(low, param.step or (1 if param.kind == "int" else 1e-12))
    if param.kind == "int":
        return int(round(low)), int(round(high))
    return tidy(low), tidy(high)


def _trial_points(space: SearchSpace, loss: str, advice: TransferAdvice | None) -> list[dict]:
    """The best trials of the nearest tasks, each moved onto the space, as seed points (up to
    :data:`TRANSFER_POINTS` - 1, none while history's share is under
    :data:`EXTRA_POINTS_WEIGHT`)."""
    if advice is None or advice.weight < EXTRA_POINTS_WEIGHT:
        return []
    points: list[dict[str, Any]] = []
    for trial in advice.trials:
        point = as_point(space, loss, trial.config)
        if point is not None and point not in points:
            points.append(point)
        if len(points) == TRANSFER_POINTS - 1:
            break
    return points
