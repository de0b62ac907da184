"""Search-space files: the sections of a YAML document, ``extends`` and where files are found.

The file format is documented in the header of ``astune/search_spaces/default.yaml``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from importlib import resources
from os import PathLike
from pathlib import Path
from typing import Any

import yaml

from astune._checks import check_choice, check_int, check_range
from astune.config import SPEED_FIELDS
from astune.space.params import (
    LOSS_KEY_NAMES,
    LOSS_KEYS,
    TRAIN_PARAMS,
    Invalid,
    Param,
    SpaceError,
    named,
    parse_param,
)

_SCHEDULER_KEYS = ("type", "grace_period", "reduction_factor", "max_t")
SCHEDULER_TYPES = ("auto", "asha", "hyperband", "none")
"""What stops trials early (``scheduler.type``, ``--scheduler``): ``asha`` (with several
objectives successive halving by non-dominated sorting), ``hyperband`` (Ray Tune's asynchronous
Hyperband, every bracket; one objective), ``none`` (FIFO); ``auto`` is ``asha`` (``none`` behind
a portfolio with one objective)."""
POPULATION_BASED = ("pbt", "pb2")
"""Ray Tune's population-based schedulers, refused by name and as objects: Ray Tune runs them
only without a search algorithm, and Optuna proposes every trial of an astune search."""


def population_based_refusal(what: str) -> str:
    """The one line that refuses a population-based scheduler, ``what`` naming it."""
    return (
        f"{what} (population-based training) cannot serve an astune search: Ray Tune runs it "
        "only without a search algorithm, and Optuna proposes every astune trial; use asha, "
        "hyperband or none"
    )


def check_not_population_based(name: Any) -> None:
    """ValueError (one line) for a population-based scheduler's name (:data:`POPULATION_BASED`)."""
    if name in POPULATION_BASED:
        raise ValueError(population_based_refusal(f"scheduler {name!r}"))


def _check_scheduler_type(value: Any) -> Any:
    check_not_population_based(value)
    return check_choice("scheduler.type", value, SCHEDULER_TYPES)


# ---------------------------------------------------------------------------------- sections
def _parse_params(raw: Any, where: str, allowed: Iterable[str], hint: str) -> dict[str, Param]:
    """A ``name -> spec`` mapping whose names must be in ``allowed``."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise Invalid(where, f"expected a mapping of parameter specs, got {raw!r}")
    allowed = tuple(allowed)
    out = {}
    for name, spec in raw.items():
        if name not in allowed:
            raise Invalid(f"{where}.{name}", misplaced(name, allowed, hint))
        out[name] = parse_param(name, spec, f"{where}.{name}")
    return out


def misplaced(name: Any, allowed: tuple[str, ...], hint: str) -> str:
    if name in LOSS_KEY_NAMES:
        return f"{name!r} is a loss parameter; put it under loss_params.<loss>"
    if name in SPEED_FIELDS:
        return f"{name!r} is an AS-Speed parameter; put it under speed_params"
    if name in TRAIN_PARAMS:
        return f"{name!r} is a training parameter; put it under params"
    return f"unknown parameter {name!r}; {hint} takes: {', '.join(allowed) or 'no parameters'}"


def _parse_loss_params(raw: Any) -> dict[str, dict[str, Param]]:
    if not isinstance(raw, Mapping):
        raise Invalid("loss_params", f"expected a mapping of loss name -> parameters, got {raw!r}")
    out = {}
    for loss, specs in raw.items():
        if loss not in LOSS_KEYS:
            raise Invalid(f"loss_params.{loss}", f"unknown loss {loss!r}; {known_losses()}")
        out[loss] = _parse_params(specs, f"loss_params.{loss}", LOSS_KEYS[loss], f"loss {loss!r}")
    return out


def known_losses() -> str:
    return f"known losses: {', '.join(LOSS_KEYS)}"


def parse_losses(raw: Any, where: str = "losses") -> tuple[str, ...]:
    if isinstance(raw, str):  # the CLI's "a,b,c"
        raw = [name.strip() for name in raw.split(",") if name.strip()]
    if not isinstance(raw, (list, tuple)) or not raw:
        raise Invalid(where, f"expected a non-empty list of loss names, got {raw!r}")
    for name in raw:
        if not isinstance(name, str) or name not in LOSS_KEYS:
            raise Invalid(where, f"unknown loss {name!r}; {known_losses()}")
    return tuple(dict.fromkeys(raw))


def parse_scheduler(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise Invalid("scheduler", f"expected a mapping, got {raw!r}")
    for key in raw:
        if key not in _SCHEDULER_KEYS:
            raise Invalid(
                f"scheduler.{key}", f"unknown key; expected one of {', '.join(_SCHEDULER_KEYS)}"
            )
    checks = {
        "type": _check_scheduler_type,
        "grace_period": lambda v: check_int("scheduler.grace_period", v, 1),
        "reduction_factor": lambda v: check_range(
            "scheduler.reduction_factor", v, 1, low_open=True
        ),
        "max_t": lambda v: check_int("scheduler.max_t", v, 1),
    }
    for key, value in raw.items():
        _as_invalid(f"scheduler.{key}", checks[key], value)
    return dict(raw)


def _as_invalid(where: str, check: Any, value: Any) -> Any:
    try:
        return check(value)
    except ValueError as exc:
        raise Invalid(where, str(exc).rstrip(".")) from None


def _parse_points(raw: Any) -> tuple[dict[str, Any], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise Invalid("seed_points", f"expected a list of mappings, got {raw!r}")
    for i, point in enumerate(raw):
        if not isinstance(point, Mapping) or not all(isinstance(k, str) for k in point):
            raise Invalid(
                f"seed_points[{i}]", f"expected a mapping of parameter -> value, got {point!r}"
            )
    return tuple(dict(point) for point in raw)


SECTIONS = {
    "description": lambda v: _as_invalid("description", _check_str, v),
    "extends": lambda v: _as_invalid("extends", _check_str, v),
    "metric": lambda v: _as_invalid("metric", _check_str, v),
    "mode": lambda v: _as_invalid("mode", lambda x: check_choice("mode", x, ("min", "max")), v),
    "num_samples": lambda v: _as_invalid(
        "num_samples", lambda x: check_int("num_samples", x, 1), v
    ),
    "scheduler": parse_scheduler,
    "objectives": lambda v: _as_invalid("objectives", _names, v),
    "losses": parse_losses,
    "params": lambda v: _parse_params(v, "params", TRAIN_PARAMS, "params"),
    "loss_params": _parse_loss_params,
    "speed_params": lambda v: _parse_params(v, "speed_params", SPEED_FIELDS, "speed_params"),
    "seed_points": _parse_points,
}


def _names(value: Any) -> tuple[str, ...]:
    """A list of names, or one comma-separated string (checked against the metric later)."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
        raise ValueError(f"expected a list of names, got {value!r}")
    return tuple(i.strip() for i in items)


def _check_str(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value


def parse_document(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Check one file's sections on their own (cross-section checks come after ``extends``)."""
    for key in raw:
        if key not in SECTIONS:
            raise Invalid(str(key), f"unknown top-level key; expected one of {', '.join(SECTIONS)}")
    return {key: SECTIONS[key](value) for key, value in raw.items()}


def _merge(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """``child`` over ``base``: mappings merge by key (a parameter's spec is replaced whole);
    lists and scalars (``losses``, ``seed_points``) are replaced."""
    out = {**base, **child}
    for key in ("params", "speed_params", "scheduler"):
        if key in base and key in child:
            out[key] = {**base[key], **child[key]}
    if "loss_params" in base and "loss_params" in child:
        merged = dict(base["loss_params"])
        for loss, specs in child["loss_params"].items():
            merged[loss] = {**merged.get(loss, {}), **specs}
        out["loss_params"] = merged
    return out


# ------------------------------------------------------------------------------- YAML files
class _Loader(yaml.SafeLoader):
    """Safe YAML that rejects duplicate keys and reads ``1e-5`` as a float (YAML 1.2)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, (str, int, float, bool)):
                continue  # an unhashable key fails in the base class with its own message
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


# PyYAML follows YAML 1.1, where 1e-5 (no dot) is a string: a trap for learning rates.
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpaceError(path, "", f"cannot read the file: {exc.strerror or exc}") from None
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}" if mark else ""
        raise SpaceError(path, where, f"malformed YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise SpaceError(path, "", f"malformed YAML: {exc}") from None
    if not isinstance(data, dict):
        got = "an empty file" if data is None else type(data).__name__
        raise SpaceError(
            path, "", f"the top level must be a mapping (losses, params, ...), got {got}"
        )
    return data


def space_dir() -> Path:
    """The folder of the packaged spaces (``astune/search_spaces``; ``search_spaces/`` at the
    repository root links to it)."""
    return Path(str(resources.files("astune").joinpath("search_spaces")))


def available_spaces() -> list[str]:
    """The names of the packaged spaces: ``default`` and one per dataset."""
    return sorted(p.stem for p in space_dir().glob("*.yaml"))


def resolve_space_file(path_or_name: str | PathLike | None, dataset: str | None) -> Path:
    if path_or_name is None:
        name = dataset if dataset and re.fullmatch(r"[\w.-]+", dataset) else "default"
        path = space_dir() / f"{name}.yaml"
        return path if path.is_file() else space_dir() / "default.yaml"
    text = str(path_or_name)
    if isinstance(path_or_name, PathLike) or text.endswith((".yaml", ".yml")) or "/" in text:
        if not Path(text).is_file():
            raise SpaceError(text, "", "no such file")
        return Path(text)
    path = space_dir() / f"{text}.yaml"
    if not path.is_file():
        names = ", ".join(available_spaces())
        raise SpaceError(
            text, "", f"no file and no packaged search space of that name (packaged: {names})"
        )
    return path


def _resolve_extends(value: str, child: Path) -> Path:
    """A path relative to the extending file, or a name: a sibling ``NAME.yaml``, else packaged."""
    if value.endswith((".yaml", ".yml")) or "/" in value:
        path = child.parent / value
    else:
        sibling = child.parent / f"{value}.yaml"
        path = sibling if sibling.is_file() else space_dir() / f"{value}.yaml"
    if not path.is_file():
        raise SpaceError(child, "extends", f"no search space {value!r} (looked for {path})")
    return path


def load_document(path: Path, stack: tuple[Path, ...] = ()) -> dict[str, Any]:
    with named(path):
        doc = parse_document(_read_yaml(path))
    if "extends" not in doc:
        return doc
    parent = _resolve_extends(doc.pop("extends"), path)
    if parent.resolve() in {p.resolve() for p in (*stack, path)}:
        raise SpaceError(path, "extends", f"circular extends through {parent}")
    return _merge(load_document(parent, (*stack, path)), doc)
