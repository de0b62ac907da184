"""The checks a search space passes on construction (:class:`astune.space.space.SearchSpace`
calls :func:`check_space`): the losses, AS-Speed/AS-Skip, shared names and the seed points."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from astune.config import SKIP_FIELDS, SPEED_FIELDS
from astune.losses.catalogue import AS_LOSSES, MULTILABEL_LOSSES, loss_info
from astune.space.files import known_losses
from astune.space.params import LOSS_KEY_NAMES, LOSS_KEYS, TRAIN_PARAMS, Param, SpaceError


class SearchSpace(Protocol):
    """The fields of :class:`astune.space.space.SearchSpace` these checks read."""

    source: str
    losses: tuple[str, ...]
    params: dict[str, Param]
    loss_params: dict[str, dict[str, Param]]
    speed_params: dict[str, Param]
    points: tuple[dict[str, Any], ...]


def check_space(space: SearchSpace) -> tuple[dict[str, Any], ...]:
    """Raise SpaceError (naming the file, the parameter and the problem) on an invalid
    ``space``; return its seed points checked (floats as floats)."""
    check_losses(space)
    _check_speed(space)
    _check_shared_names(space)
    return tuple(_check_point(space, i, p) for i, p in enumerate(space.points))


def _error(space: SearchSpace, where: str, problem: str) -> SpaceError:
    return SpaceError(space.source, where, problem)


def check_losses(space: SearchSpace) -> None:
    multi = [name for name in space.losses if name in MULTILABEL_LOSSES]
    if multi and len(multi) < len(space.losses):
        single = [name for name in space.losses if name not in MULTILABEL_LOSSES]
        raise _error(
            space,
            "losses",
            f"mixes single-label losses ({', '.join(single)}) with "
            f"multi-label ones ({', '.join(multi)}); a dataset takes one family",
        )
    for loss in space.losses:
        given, optional = space.loss_params.get(loss, {}), loss_info(loss).optional_keys
        for name in LOSS_KEYS[loss]:
            if name not in given and name not in optional:
                raise _error(
                    space,
                    f"loss_params.{loss}.{name}",
                    "missing; give a range or "
                    "{type: fixed, value: ...} for every parameter of a searched loss",
                )


def _check_speed(space: SearchSpace) -> None:
    if not any(loss in AS_LOSSES for loss in space.losses):
        return
    switch = space.speed_params.get("as_speed")
    if switch is None:
        raise _error(
            space,
            "speed_params.as_speed",
            "missing; an AS loss is searched "
            "(use {type: fixed, value: false} to leave AS-Speed off)",
        )
    for name in ("lam", "max_accum_steps"):
        if switch.contains(True) and name not in space.speed_params:
            raise _error(space, f"speed_params.{name}", "missing; as_speed can be true")
    skip = space.speed_params.get("as_skip")
    for name in SKIP_FIELDS:
        if name in space.speed_params and (skip is None or not skip.contains(True)):
            raise _error(space, f"speed_params.{name}", "is sampled only when as_skip can be true")
    infobatch = space.params.get("infobatch")
    if infobatch is not None and infobatch.contains(True) and skip is not None:
        if skip.contains(True):
            raise _error(
                space,
                "params.infobatch",
                "can be true while speed_params.as_skip can be true, and a trial leaves "
                "samples out one way; fix one of them to false (skip_policy soft gives AS-Skip "
                "InfoBatch's pruning)",
            )


def _check_shared_names(space: SearchSpace) -> None:
    """Losses searched together share one Optuna parameter per name, hence one spec."""
    first: dict[str, tuple[str, Param]] = {}
    for loss in space.losses:
        for name, param in space.loss_params.get(loss, {}).items():
            other, spec = first.setdefault(name, (loss, param))
            if spec != param:
                raise _error(
                    space,
                    f"loss_params.{loss}.{name}",
                    f"differs from loss_params."
                    f"{other}.{name}; losses searched together must give a "
                    "shared parameter the same spec",
                )


def _check_point(space: SearchSpace, i: int, point: Mapping[str, Any]) -> dict[str, Any]:
    """Check a seed point against the space; floats come back as floats."""
    where = f"seed_points[{i}]"
    loss = point.get("loss")
    if not isinstance(loss, str) or loss not in LOSS_KEYS:
        problem = "missing 'loss'" if loss is None else f"unknown loss {loss!r}"
        raise _error(space, f"{where}.loss", f"{problem}; {known_losses()}")
    if LOSS_KEYS[loss] and loss not in space.loss_params:
        raise _error(space, f"{where}.loss", f"loss {loss!r} has no loss_params entry")
    allowed = _point_params(space, loss)
    out: dict[str, Any] = {"loss": loss}
    for key, value in point.items():
        if key == "loss":
            continue
        param = allowed.get(key)
        if param is None:
            raise _error(space, f"{where}.{key}", _not_in_point(space, key, loss))
        if not param.contains(value):
            raise _error(
                space,
                f"{where}.{key}",
                f"{key}={value!r} is outside the space ({param.describe()})",
            )
        out[key] = float(value) if param.kind == "float" else value
    for key in ("lam", "max_accum_steps"):
        if key in point and point.get("as_speed") is not True:
            raise _error(
                space,
                f"{where}.{key}",
                f"{key} is sampled only when as_speed is true; add as_speed: true to the point",
            )
    for key in SKIP_FIELDS:
        if key in point and point.get("as_skip") is not True:
            raise _error(
                space,
                f"{where}.{key}",
                f"{key} is sampled only when as_skip is true; add as_skip: true to the point",
            )
    return out


def _point_params(space: SearchSpace, loss: str) -> dict[str, Param]:
    out = {**space.params, **space.loss_params.get(loss, {})}
    if loss in AS_LOSSES:
        out.update(space.speed_params)
    else:  # the config of a non-AS loss says as_speed: false (and as_skip: false)
        out["as_speed"] = Param("fixed", value=False)
        out["as_skip"] = Param("fixed", value=False)
    return out


def _not_in_point(space: SearchSpace, key: str, loss: str) -> str:
    if key in LOSS_KEY_NAMES:
        return (
            f"{key!r} is not a parameter of loss {loss!r} (it takes: "
            f"{', '.join(LOSS_KEYS[loss]) or 'none'})"
        )
    if key in SPEED_FIELDS and loss not in AS_LOSSES:
        return f"{key!r} applies to the AS losses only, not to {loss!r}"
    if key in SPEED_FIELDS:
        return f"{key!r} is not in this space's speed_params"
    if key in TRAIN_PARAMS:
        return f"{key!r} is not in this space's params"
    return f"unknown parameter {key!r}"
