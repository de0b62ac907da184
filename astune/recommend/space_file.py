"""`astune recommend --write-space`: the dataset's search space narrowed to the
recommendation, with the recommendation as the first config evaluated."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from astune.recommend.result import Recommendation
from astune.recommend.schedules import ScheduleAdvice
from astune.space.params import named, parse_param
from astune.space.space import SearchSpace, load_space


def write_space(rec: Recommendation, dataset: str, path: str | Path) -> Path:
    """The dataset's search space with delta narrowed to the recommended range (and r to
    +-0.1 around its recommendation where the space searches it) and the recommended adaptive
    schedule offered beside ``fixed`` (:func:`_with_schedule`), written as YAML."""
    from astune.data.resolve import resolve_dataset

    space = load_space(dataset=resolve_dataset(dataset).registry_name)
    task = rec.difficulty.task
    if task is not None:
        space = space.for_task(task)
    loss = "multilabel_as_softmax" if task == "multi_label" else "as_softmax"
    space = space.narrowed("delta", rec.low, rec.high, loss=loss)
    warm = space.loss_params.get(loss, {}).get("warmup_ratio")
    if warm is not None and warm.kind in ("float", "int"):
        r = rec.warmup_ratio
        low, high = round(max(0.0, r - 0.1), 2), round(min(1.0, r + 0.1), 2)
        space = space.narrowed("warmup_ratio", low, high, loss=loss)
    space = _with_schedule(space, loss, rec.schedule)
    return _with_seed_point(space, loss, rec).dump(path)


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


def _with_seed_point(space: SearchSpace, loss: str, rec: Recommendation) -> SearchSpace:
    """The recommendation itself as the first config the search evaluates (when it lies on the
    space's grid); its delta schedule and the schedule's parameters where the space searches
    them and holds the values."""
    params = space.loss_params.get(loss, {})
    point: dict[str, Any] = {"loss": loss, "delta": rec.delta}
    wanted = {"warmup_ratio": rec.warmup_ratio, "delta_schedule": rec.schedule.schedule}
    for key, value in {**wanted, **rec.schedule.params}.items():
        if key in params and params[key].contains(value):
            point[key] = value
    if loss not in space.losses or not params["delta"].contains(rec.delta):
        return space
    return dataclasses.replace(space, points=(point, *space.points))
