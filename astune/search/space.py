"""YAML search spaces -> an Optuna define-by-run space for Ray Tune's ``OptunaSearch``.

The file format is documented in the header of ``astune/search_spaces/default.yaml``. In short:
``losses`` lists the losses searched, ``params`` the shared training parameters,
``loss_params.<loss>`` the parameters sampled only when that loss is chosen, ``speed_params`` the
AS-Speed switch and its parameters (AS losses only; ``lam`` and ``max_accum_steps`` only when
``as_speed`` is true), and ``seed_points`` the configs evaluated first. A parameter is
``{type: float|int, low, high, log?, step?}``, ``{type: categorical, choices}`` or
``{type: fixed, value}`` (a bare scalar is shorthand for ``fixed``).

Optuna parameter names are the flat trial-config keys (``loss``, ``lr``, ``delta``, ``lam`` ...),
so the config Ray hands a trainable needs no renaming. Two losses searched together that share a
parameter name (``as_softmax`` and ``multilabel_as_softmax`` both take ``delta``) must therefore
give it the same spec; they never meet in practice, since a space may not mix single-label and
multi-label losses.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from astune._checks import check_choice, check_int, check_range

if TYPE_CHECKING:  # only for type hints: this module never imports optuna or ray
    import optuna

# Loss name -> the trial-config keys it uses. Stand-in for ``astune.losses.registry.LOSSES``
# (``spec.param_names``); when this module switches to it, keep adding ``warmup_ratio`` to the
# AS losses, since it is a training-loop key (the delta warm-up), not a ``build_loss`` argument.
LOSS_PARAMS: dict[str, tuple[str, ...]] = {
    "softmax": (),
    "t_softmax": ("tau",),
    "label_smoothing": ("epsilon",),
    "sparse_softmax": ("k",),
    "sparsemax": (),
    "entmax15": (),
    "am_softmax": ("s", "m"),
    "as_variant": ("margin",),
    "as_softmax": ("delta", "warmup_ratio"),
    "multilabel_softmax": (),
    "multilabel_as_softmax": ("delta", "warmup_ratio"),
}
MULTILABEL_LOSSES = frozenset({"multilabel_softmax", "multilabel_as_softmax"})
AS_LOSSES = frozenset({"as_softmax", "multilabel_as_softmax"})  # the losses AS-Speed applies to
TASKS = ("single_label", "token", "pair", "multi_label")
TRAIN_PARAMS = (
    "lr",
    "batch_size",
    "epochs",
    "seed",
    "weight_decay",
    "lr_warmup_ratio",
    "max_grad_norm",
    "dropout",
)
SPEED_PARAMS = ("as_speed", "lam", "max_accum_steps")
_LOSS_PARAM_NAMES = frozenset(n for names in LOSS_PARAMS.values() for n in names)

_KINDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {  # kind -> (required, optional) keys
    "float": (frozenset({"low", "high"}), frozenset({"log", "step"})),
    "int": (frozenset({"low", "high"}), frozenset({"log", "step"})),
    "categorical": (frozenset({"choices"}), frozenset()),
    "fixed": (frozenset({"value"}), frozenset()),
}
_SCHEDULER_KEYS = ("type", "grace_period", "reduction_factor", "max_t")
DEFAULT_SCHEDULER = {"type": "asha", "grace_period": 1, "reduction_factor": 3}
_ML_SWAP = {"softmax": "multilabel_softmax", "as_softmax": "multilabel_as_softmax"}


class SpaceError(ValueError):
    """An invalid search space; its one-line message names the file, the parameter, the problem."""

    def __init__(self, file: str | PathLike, where: str, problem: str):
        self.file, self.where, self.problem = str(file), where, problem
        super().__init__(f"{file}: {where}: {problem}" if where else f"{file}: {problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:  # Ray ships errors between processes
        return type(self), (self.file, self.where, self.problem)


class _Invalid(Exception):
    """A problem found before the file name is known; ``_named`` turns it into SpaceError."""

    def __init__(self, where: str, problem: str):
        super().__init__(where, problem)
        self.where, self.problem = where, problem


@contextmanager
def _named(source: str | PathLike) -> Iterator[None]:
    try:
        yield
    except _Invalid as exc:
        raise SpaceError(source, exc.where, exc.problem) from None


# ----------------------------------------------------------------------------------- domains
@dataclass(frozen=True)
class _Domain:
    """The values a config key accepts, checked with the helpers of ``astune._checks``."""

    kind: str  # "float", "int" or "bool"
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def check(self, name: str, value: Any) -> None:
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be true or false, but got {value!r}.")
        elif self.kind == "int":
            check_int(name, value, self.low, self.high)  # type: ignore[arg-type]
        else:
            check_range(
                name, value, self.low, self.high, low_open=self.low_open, high_open=self.high_open
            )


DOMAINS: dict[str, _Domain] = {
    "lr": _Domain("float", 0.0, 1.0, low_open=True),
    "batch_size": _Domain("int", 1),
    "epochs": _Domain("float", 0.0, low_open=True),  # TrainConfig takes fractional epochs
    "seed": _Domain("int", 0),
    "weight_decay": _Domain("float", 0.0),
    "lr_warmup_ratio": _Domain("float", 0.0, 1.0),
    "max_grad_norm": _Domain("float", 0.0, low_open=True),
    "dropout": _Domain("float", 0.0, 1.0, high_open=True),
    "as_speed": _Domain("bool"),
    "lam": _Domain("float", 0.0, low_open=True),
    "max_accum_steps": _Domain("int", 1),
    "delta": _Domain("float", 0.0, 1.0),
    "warmup_ratio": _Domain("float", 0.0, 1.0),
    "tau": _Domain("float", 0.0, low_open=True),
    "epsilon": _Domain("float", 0.0, 1.0, high_open=True),
    "k": _Domain("int", 1),
    "s": _Domain("float", 0.0, low_open=True),
    "m": _Domain("float", 0.0),
    "margin": _Domain("float", 0.0, low_open=True),
}


# ------------------------------------------------------------------------------------ params
@dataclass(frozen=True)
class Param:
    """One parameter: a ``float``/``int`` range, ``categorical`` choices or a ``fixed`` value."""

    kind: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()
    value: Any = None

    @property
    def fixed(self) -> bool:
        return self.kind == "fixed"

    def bounds(self) -> tuple[Any, ...]:
        """The values a domain must accept for every sample to be valid."""
        if self.kind in ("float", "int"):
            return (self.low, self.high)
        return self.choices if self.kind == "categorical" else (self.value,)

    def suggest(self, trial: optuna.Trial, name: str) -> Any:
        """Sample (or, when ``fixed``, return) a value through ``trial.suggest_*``."""
        if self.kind == "float":
            return trial.suggest_float(name, self.low, self.high, log=self.log, step=self.step)
        if self.kind == "int":
            return trial.suggest_int(name, self.low, self.high, log=self.log, step=self.step or 1)
        if self.kind == "categorical":
            return trial.suggest_categorical(name, list(self.choices))
        return self.value

    def contains(self, value: Any) -> bool:
        """Whether a sample could equal ``value`` (Optuna's own test for float steps)."""
        if self.kind == "fixed":
            return _same(value, self.value)
        if self.kind == "categorical":
            return any(_same(value, c) for c in self.choices)
        if not _is_number(value) or (self.kind == "int" and not isinstance(value, int)):
            return False
        if not self.low <= value <= self.high:  # type: ignore[operator]
            return False
        if self.step is None:
            return True
        k = (value - self.low) / self.step
        return abs(k - round(k)) < 1.0e-8

    def describe(self) -> str:
        if self.kind in ("float", "int"):
            extra = (" log" if self.log else "") + (f" step {self.step}" if self.step else "")
            return f"{self.kind} in [{self.low}, {self.high}]{extra}"
        if self.kind == "categorical":
            return f"one of {list(self.choices)}"
        return f"fixed {self.value!r}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind}
        if self.kind in ("float", "int"):
            out.update(low=self.low, high=self.high)
            if self.log:
                out["log"] = True
            if self.step is not None:
                out["step"] = self.step
        elif self.kind == "categorical":
            out["choices"] = list(self.choices)
        else:
            out["value"] = self.value
        return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _same(a: Any, b: Any) -> bool:
    """Equality that keeps ``True`` and ``1`` apart."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _parse_param(name: str, spec: Any, where: str) -> Param:
    """Parse and check one parameter spec; raises ``_Invalid`` naming ``where``."""
    if _is_scalar(spec):
        spec = {"type": "fixed", "value": spec}
    if not isinstance(spec, Mapping):
        raise _Invalid(where, f"expected a mapping with a 'type' key or a scalar, got {spec!r}")
    kind = spec.get("type")
    if kind not in _KINDS:
        raise _Invalid(where, f"unknown kind {kind!r}; expected one of {', '.join(_KINDS)}")
    required, optional = _KINDS[kind]
    keys = set(spec) - {"type"}
    if missing := sorted(required - keys):
        raise _Invalid(where, f"missing key {missing[0]!r} for kind {kind}")
    if extra := sorted(keys - required - optional, key=str):
        allowed = ", ".join(sorted(required | optional))
        raise _Invalid(where, f"unexpected key {extra[0]!r} for kind {kind} (allowed: {allowed})")
    param = _BUILDERS[kind](spec, where)
    _check_domain(name, param, where)
    return param


def _range_param(kind: str, spec: Mapping[str, Any], where: str) -> Param:
    is_int = kind == "int"
    low, high = spec["low"], spec["high"]
    for key, v in (("low", low), ("high", high)):
        if not _is_number(v) or (is_int and not isinstance(v, int)):
            raise _Invalid(
                where, f"{key} must be {'an integer' if is_int else 'a number'}, got {v!r}"
            )
    if low > high:
        raise _Invalid(where, f"low {low} must be <= high {high}")
    log, step = spec.get("log", False), spec.get("step")
    if not isinstance(log, bool):
        raise _Invalid(where, f"log must be true or false, got {log!r}")
    if log and low <= 0:
        raise _Invalid(where, f"log: true needs low > 0, got low {low}")
    if step is not None:
        _check_step(step, low, high, log, is_int, where)
    if not is_int:
        low, high, step = float(low), float(high), None if step is None else float(step)
    return Param(kind, low=low, high=high, log=log, step=step)


def _check_step(step: Any, low: float, high: float, log: bool, is_int: bool, where: str) -> None:
    """Reject a step that Optuna would silently correct: the range must be a multiple of it."""
    if not _is_number(step) or step <= 0 or (is_int and not isinstance(step, int)):
        raise _Invalid(
            where, f"step must be a positive {'integer' if is_int else 'number'}, got {step!r}"
        )
    if log and step != 1:
        raise _Invalid(where, "log: true cannot be combined with a step (Optuna's rule)")
    span = decimal.Decimal(str(high)) - decimal.Decimal(str(low))
    if span % decimal.Decimal(str(step)) != 0:
        raise _Invalid(where, f"step {step} does not divide the range [{low}, {high}]")


def _categorical_param(spec: Mapping[str, Any], where: str) -> Param:
    choices = spec["choices"]
    if not isinstance(choices, list) or not choices:
        raise _Invalid(where, f"choices must be a non-empty list, got {choices!r}")
    for i, c in enumerate(choices):
        if not _is_scalar(c):
            raise _Invalid(where, f"choices[{i}] must be a number, string, bool or null, got {c!r}")
        if any(_same(c, d) for d in choices[:i]):
            raise _Invalid(where, f"choices[{i}] repeats {c!r}")
    return Param("categorical", choices=tuple(choices))


def _fixed_param(spec: Mapping[str, Any], where: str) -> Param:
    if not _is_scalar(spec["value"]):
        raise _Invalid(
            where, f"value must be a number, string, bool or null, got {spec['value']!r}"
        )
    return Param("fixed", value=spec["value"])


_BUILDERS = {
    "float": lambda spec, where: _range_param("float", spec, where),
    "int": lambda spec, where: _range_param("int", spec, where),
    "categorical": _categorical_param,
    "fixed": _fixed_param,
}


def _check_domain(name: str, param: Param, where: str) -> None:
    domain = DOMAINS.get(name)
    if domain is None:
        return
    if domain.kind == "int" and param.kind == "float":
        raise _Invalid(where, f"{name} takes integers; use type int, categorical or fixed")
    if domain.kind == "bool" and param.kind in ("float", "int"):
        raise _Invalid(where, f"{name} takes true/false; use type categorical or fixed")
    for value in param.bounds():
        try:
            domain.check(name, value)
        except ValueError as exc:
            raise _Invalid(where, str(exc).rstrip(".")) from None


# ---------------------------------------------------------------------------------- sections
def _parse_params(raw: Any, where: str, allowed: Iterable[str], hint: str) -> dict[str, Param]:
    """A ``name -> spec`` mapping whose names must be in ``allowed``."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _Invalid(where, f"expected a mapping of parameter specs, got {raw!r}")
    allowed = tuple(allowed)
    out = {}
    for name, spec in raw.items():
        if name not in allowed:
            raise _Invalid(f"{where}.{name}", _misplaced(name, allowed, hint))
        out[name] = _parse_param(name, spec, f"{where}.{name}")
    return out


def _misplaced(name: Any, allowed: tuple[str, ...], hint: str) -> str:
    if name in _LOSS_PARAM_NAMES:
        return f"{name!r} is a loss parameter; put it under loss_params.<loss>"
    if name in SPEED_PARAMS:
        return f"{name!r} is an AS-Speed parameter; put it under speed_params"
    if name in TRAIN_PARAMS:
        return f"{name!r} is a training parameter; put it under params"
    return f"unknown parameter {name!r}; {hint} takes: {', '.join(allowed) or 'no parameters'}"


def _parse_loss_params(raw: Any) -> dict[str, dict[str, Param]]:
    if not isinstance(raw, Mapping):
        raise _Invalid("loss_params", f"expected a mapping of loss name -> parameters, got {raw!r}")
    out = {}
    for loss, specs in raw.items():
        if loss not in LOSS_PARAMS:
            raise _Invalid(f"loss_params.{loss}", f"unknown loss {loss!r}; {_known_losses()}")
        out[loss] = _parse_params(specs, f"loss_params.{loss}", LOSS_PARAMS[loss], f"loss {loss!r}")
    return out


def _known_losses() -> str:
    return f"known losses: {', '.join(LOSS_PARAMS)}"


def _parse_losses(raw: Any, where: str = "losses") -> tuple[str, ...]:
    if isinstance(raw, str):  # the CLI's "a,b,c"
        raw = [name.strip() for name in raw.split(",") if name.strip()]
    if not isinstance(raw, (list, tuple)) or not raw:
        raise _Invalid(where, f"expected a non-empty list of loss names, got {raw!r}")
    for name in raw:
        if not isinstance(name, str) or name not in LOSS_PARAMS:
            raise _Invalid(where, f"unknown loss {name!r}; {_known_losses()}")
    return tuple(dict.fromkeys(raw))


def _parse_scheduler(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise _Invalid("scheduler", f"expected a mapping, got {raw!r}")
    for key in raw:
        if key not in _SCHEDULER_KEYS:
            raise _Invalid(
                f"scheduler.{key}", f"unknown key; expected one of {', '.join(_SCHEDULER_KEYS)}"
            )
    checks = {
        "type": lambda v: check_choice("scheduler.type", v, ("asha", "none")),
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
        raise _Invalid(where, str(exc).rstrip(".")) from None


def _parse_points(raw: Any) -> tuple[dict[str, Any], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _Invalid("seed_points", f"expected a list of mappings, got {raw!r}")
    for i, point in enumerate(raw):
        if not isinstance(point, Mapping) or not all(isinstance(k, str) for k in point):
            raise _Invalid(
                f"seed_points[{i}]", f"expected a mapping of parameter -> value, got {point!r}"
            )
    return tuple(dict(point) for point in raw)


_SECTIONS = {
    "description": lambda v: _as_invalid("description", _check_str, v),
    "extends": lambda v: _as_invalid("extends", _check_str, v),
    "metric": lambda v: _as_invalid("metric", _check_str, v),
    "mode": lambda v: _as_invalid("mode", lambda x: check_choice("mode", x, ("min", "max")), v),
    "num_samples": lambda v: _as_invalid(
        "num_samples", lambda x: check_int("num_samples", x, 1), v
    ),
    "scheduler": _parse_scheduler,
    "losses": _parse_losses,
    "params": lambda v: _parse_params(v, "params", TRAIN_PARAMS, "params"),
    "loss_params": _parse_loss_params,
    "speed_params": lambda v: _parse_params(v, "speed_params", SPEED_PARAMS, "speed_params"),
    "seed_points": _parse_points,
}


def _check_str(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value


def _parse_document(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Check one file's sections on their own (cross-section checks come after ``extends``)."""
    for key in raw:
        if key not in _SECTIONS:
            raise _Invalid(
                str(key), f"unknown top-level key; expected one of {', '.join(_SECTIONS)}"
            )
    return {key: _SECTIONS[key](value) for key, value in raw.items()}


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


def _resolve(path_or_name: str | PathLike | None, dataset: str | None) -> Path:
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


def _load_document(path: Path, stack: tuple[Path, ...] = ()) -> dict[str, Any]:
    with _named(path):
        doc = _parse_document(_read_yaml(path))
    if "extends" not in doc:
        return doc
    parent = _resolve_extends(doc.pop("extends"), path)
    if parent.resolve() in {p.resolve() for p in (*stack, path)}:
        raise SpaceError(path, "extends", f"circular extends through {parent}")
    return _merge(_load_document(parent, (*stack, path)), doc)


def load_space(
    path_or_name: str | PathLike | None = None, *, dataset: str | None = None
) -> SearchSpace:
    """Parse and validate a search space.

    Args:
        path_or_name: a YAML file, or the name of a packaged space (``"sst5"``, ``"default"``).
            ``None`` picks by ``dataset``.
        dataset: used when ``path_or_name`` is ``None``: the packaged ``<dataset>.yaml`` if there
            is one, else ``default.yaml``.

    Raises:
        SpaceError: the file is missing, malformed or invalid; the message names the file, the
            parameter and the problem.
    """
    path = _resolve(path_or_name, dataset)
    doc = _load_document(path)
    if "losses" not in doc:
        raise SpaceError(path, "losses", "missing; list the losses to search, e.g. [as_softmax]")
    fields_ = {k: v for k, v in doc.items() if k != "seed_points"}
    return SearchSpace(**fields_, points=doc.get("seed_points", ()), source=str(path))


# ------------------------------------------------------------------------------ SearchSpace
@dataclass(frozen=True)
class SearchSpace:
    """A validated search space; build it with :func:`load_space`.

    ``points`` holds every seed point of the file; :attr:`seed_points` those of the active
    losses. Every instance is checked on construction, so the ``with_*`` methods and
    ``dataclasses.replace`` cannot produce an invalid space.
    """

    losses: tuple[str, ...]
    params: dict[str, Param] = field(default_factory=dict)
    loss_params: dict[str, dict[str, Param]] = field(default_factory=dict)
    speed_params: dict[str, Param] = field(default_factory=dict)
    points: tuple[dict[str, Any], ...] = ()
    metric: str = "objective"
    mode: str = "max"
    num_samples: int = 20
    scheduler: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_SCHEDULER))
    description: str = ""
    source: str = "<memory>"

    def __post_init__(self) -> None:
        with _named(self.source):
            object.__setattr__(self, "losses", _parse_losses(self.losses))
        object.__setattr__(self, "scheduler", {**DEFAULT_SCHEDULER, **self.scheduler})
        self._check_losses()
        self._check_speed()
        self._check_shared_names()
        points = tuple(self._check_point(i, p) for i, p in enumerate(self.points))
        object.__setattr__(self, "points", points)

    # ---------------------------------------------------------------------- checks
    def _error(self, where: str, problem: str) -> SpaceError:
        return SpaceError(self.source, where, problem)

    def _check_losses(self) -> None:
        multi = [name for name in self.losses if name in MULTILABEL_LOSSES]
        if multi and len(multi) < len(self.losses):
            single = [name for name in self.losses if name not in MULTILABEL_LOSSES]
            raise self._error(
                "losses",
                f"mixes single-label losses ({', '.join(single)}) with "
                f"multi-label ones ({', '.join(multi)}); a dataset takes one family",
            )
        for loss in self.losses:
            given = self.loss_params.get(loss, {})
            for name in LOSS_PARAMS[loss]:
                if name not in given:
                    raise self._error(
                        f"loss_params.{loss}.{name}",
                        "missing; give a range or "
                        "{type: fixed, value: ...} for every parameter of a searched loss",
                    )

    def _check_speed(self) -> None:
        if not any(loss in AS_LOSSES for loss in self.losses):
            return
        switch = self.speed_params.get("as_speed")
        if switch is None:
            raise self._error(
                "speed_params.as_speed",
                "missing; an AS loss is searched "
                "(use {type: fixed, value: false} to leave AS-Speed off)",
            )
        for name in ("lam", "max_accum_steps"):
            if switch.contains(True) and name not in self.speed_params:
                raise self._error(f"speed_params.{name}", "missing; as_speed can be true")

    def _check_shared_names(self) -> None:
        """Losses searched together share one Optuna parameter per name, hence one spec."""
        first: dict[str, tuple[str, Param]] = {}
        for loss in self.losses:
            for name, param in self.loss_params.get(loss, {}).items():
                other, spec = first.setdefault(name, (loss, param))
                if spec != param:
                    raise self._error(
                        f"loss_params.{loss}.{name}",
                        f"differs from loss_params."
                        f"{other}.{name}; losses searched together must give a "
                        "shared parameter the same spec",
                    )

    def _check_point(self, i: int, point: Mapping[str, Any]) -> dict[str, Any]:
        """Check a seed point against the space; floats come back as floats."""
        where = f"seed_points[{i}]"
        loss = point.get("loss")
        if not isinstance(loss, str) or loss not in LOSS_PARAMS:
            problem = "missing 'loss'" if loss is None else f"unknown loss {loss!r}"
            raise self._error(f"{where}.loss", f"{problem}; {_known_losses()}")
        if LOSS_PARAMS[loss] and loss not in self.loss_params:
            raise self._error(f"{where}.loss", f"loss {loss!r} has no loss_params entry")
        allowed = self._point_params(loss)
        out: dict[str, Any] = {"loss": loss}
        for key, value in point.items():
            if key == "loss":
                continue
            param = allowed.get(key)
            if param is None:
                raise self._error(f"{where}.{key}", self._not_in_point(key, loss))
            if not param.contains(value):
                raise self._error(
                    f"{where}.{key}", f"{key}={value!r} is outside the space ({param.describe()})"
                )
            out[key] = float(value) if param.kind == "float" else value
        for key in ("lam", "max_accum_steps"):
            if key in point and point.get("as_speed") is not True:
                raise self._error(
                    f"{where}.{key}",
                    f"{key} is sampled only when as_speed is true; add as_speed: true to the point",
                )
        return out

    def _point_params(self, loss: str) -> dict[str, Param]:
        out = {**self.params, **self.loss_params.get(loss, {})}
        if loss in AS_LOSSES:
            out.update(self.speed_params)
        else:  # the config of a non-AS loss says as_speed: false
            out["as_speed"] = Param("fixed", value=False)
        return out

    def _not_in_point(self, key: str, loss: str) -> str:
        if key in _LOSS_PARAM_NAMES:
            return (
                f"{key!r} is not a parameter of loss {loss!r} (it takes: "
                f"{', '.join(LOSS_PARAMS[loss]) or 'none'})"
            )
        if key in SPEED_PARAMS and loss not in AS_LOSSES:
            return f"{key!r} applies to the AS losses only, not to {loss!r}"
        if key in SPEED_PARAMS:
            return f"{key!r} is not in this space's speed_params"
        if key in TRAIN_PARAMS:
            return f"{key!r} is not in this space's params"
        return f"unknown parameter {key!r}"

    # ------------------------------------------------------------------- sampling
    @property
    def seed_points(self) -> list[dict[str, Any]]:
        """The seed points of the active losses, in order: pass them as ``OptunaSearch(...,
        points_to_evaluate=space.seed_points)``, which enqueues them in the Optuna study."""
        return [dict(point) for point in self.points if point["loss"] in self.losses]

    def define_by_run(self, trial: optuna.Trial) -> dict[str, Any]:
        """Ray's define-by-run space: suggest the searched values through ``trial.suggest_*``
        and return the fixed ones, which ``OptunaSearch`` merges into the config.

        Conditional: a loss's parameters only when it is chosen; ``as_speed`` only for an AS
        loss (other losses get ``as_speed: False``); ``lam`` and ``max_accum_steps`` only when
        ``as_speed`` is true. The keys are the flat trial-config keys.
        """
        constants: dict[str, Any] = {}
        loss = trial.suggest_categorical("loss", list(self.losses))
        for name, param in {**self.params, **self.loss_params.get(loss, {})}.items():
            _sample(trial, name, param, constants)
        if loss not in AS_LOSSES:
            constants["as_speed"] = False
        elif _sample(trial, "as_speed", self.speed_params["as_speed"], constants):
            for name in ("lam", "max_accum_steps"):
                _sample(trial, name, self.speed_params[name], constants)
        return constants

    def param(self, name: str, loss: str = "as_softmax") -> Param:
        """The spec of ``name`` (a loss parameter is looked up under ``loss``)."""
        return self._section(name, loss)[1][name]

    # ------------------------------------------------------------------- variants
    def with_losses(self, names: str | Iterable[str]) -> SearchSpace:
        """The space over ``names`` (a list or ``"a,b,c"``), each loss keeping its parameters.

        A loss this space does not define takes the ``default.yaml`` entry (and AS-Speed its
        ``speed_params`` when missing here). Raises ``SpaceError`` for an unknown name.
        """
        with _named(self.source):
            wanted = _parse_losses(names if isinstance(names, str) else list(names))
        loss_params, speed = dict(self.loss_params), dict(self.speed_params)
        missing = [n for n in wanted if LOSS_PARAMS[n] and n not in loss_params]
        needs_speed = any(n in AS_LOSSES for n in wanted) and "as_speed" not in speed
        if missing or needs_speed:
            default = load_space("default")
            for name in missing:
                if name not in default.loss_params:
                    raise self._error(f"loss_params.{name}", "not defined here nor in default.yaml")
                loss_params[name] = default.loss_params[name]
            if needs_speed:
                speed = {**default.speed_params, **speed}
        return dataclasses.replace(self, losses=wanted, loss_params=loss_params, speed_params=speed)

    def for_task(self, task: str) -> SearchSpace:
        """This space with its losses swapped to the family of ``task`` (``softmax`` <->
        ``multilabel_softmax``, ``as_softmax`` <-> ``multilabel_as_softmax``)."""
        check_choice("task", task, TASKS)
        multi = task == "multi_label"
        if all((name in MULTILABEL_LOSSES) == multi for name in self.losses):
            return self
        swap = _ML_SWAP if multi else {v: k for k, v in _ML_SWAP.items()}
        for name in self.losses:
            if name not in swap and (name in MULTILABEL_LOSSES) != multi:
                raise self._error("losses", f"loss {name!r} does not apply to {task} tasks")
        return self.with_losses([swap.get(name, name) for name in self.losses])

    def with_fixed(self, **values: Any) -> SearchSpace:
        """The space with training parameters fixed (the CLI's ``--epochs``, ``--seed``); the
        seed points drop those keys."""
        params = dict(self.params)
        with _named(self.source):
            for name, value in values.items():
                if name not in TRAIN_PARAMS:
                    raise _Invalid(f"params.{name}", _misplaced(name, TRAIN_PARAMS, "params"))
                params[name] = _parse_param(
                    name, {"type": "fixed", "value": value}, f"params.{name}"
                )
        points = tuple({k: v for k, v in p.items() if k not in values} for p in self.points)
        return dataclasses.replace(self, params=params, points=points)

    def with_settings(
        self,
        *,
        num_samples: int | None = None,
        scheduler: str | None = None,
        metric: str | None = None,
        mode: str | None = None,
    ) -> SearchSpace:
        """The space with the CLI's ``--num-samples`` / ``--scheduler asha|none`` applied."""
        changes: dict[str, Any] = {}
        with _named(self.source):
            for key, value in (("num_samples", num_samples), ("metric", metric), ("mode", mode)):
                if value is not None:
                    changes[key] = _SECTIONS[key](value)
            if scheduler is not None:
                changes["scheduler"] = {**self.scheduler, **_parse_scheduler({"type": scheduler})}
        return dataclasses.replace(self, **changes)

    def narrowed(
        self, name: str, low: float, high: float, *, loss: str = "as_softmax"
    ) -> SearchSpace:
        """The space with ``name`` searched over ``[low, high]`` (keeping ``log``, and ``step``
        where it divides the new range); seed points outside it are dropped."""
        section, params = self._section(name, loss)
        old, where = params[name], f"{section}.{name}"
        kind = "int" if DOMAINS.get(name, _Domain("float")).kind == "int" else "float"
        spec: dict[str, Any] = {"type": kind, "low": low, "high": high}
        if old.kind == kind and old.log:
            spec["log"] = True
        if old.kind == kind and old.step is not None and _divides(old.step, low, high):
            spec["step"] = old.step
        with _named(self.source):
            new = _parse_param(name, spec, where)
        params = {**params, name: new}
        changes: dict[str, Any] = {"params": params} if section == "params" else {}
        if section == "speed_params":
            changes["speed_params"] = params
        elif section != "params":
            changes["loss_params"] = {**self.loss_params, loss: params}
        keep = tuple(p for p in self.points if not self._narrowed_out(p, section, name, loss, new))
        return dataclasses.replace(self, points=keep, **changes)

    def _narrowed_out(
        self, point: Mapping[str, Any], section: str, name: str, loss: str, new: Param
    ) -> bool:
        if name not in point or (section.startswith("loss_params") and point["loss"] != loss):
            return False
        return not new.contains(point[name])

    def _section(self, name: str, loss: str) -> tuple[str, dict[str, Param]]:
        if name in TRAIN_PARAMS:
            section, params = "params", self.params
        elif name in SPEED_PARAMS:
            section, params = "speed_params", self.speed_params
        elif loss in LOSS_PARAMS and name in LOSS_PARAMS[loss]:
            section, params = f"loss_params.{loss}", self.loss_params.get(loss, {})
        else:
            raise self._error(name, f"not a parameter of the space for loss {loss!r}")
        if name not in params:
            raise self._error(f"{section}.{name}", "not in this space")
        return section, params

    # ------------------------------------------------------------------------ output
    def to_dict(self) -> dict[str, Any]:
        """The resolved space as the YAML mapping ``load_space`` reads (no ``extends``)."""
        out: dict[str, Any] = {"description": self.description} if self.description else {}
        out.update(
            metric=self.metric,
            mode=self.mode,
            num_samples=self.num_samples,
            scheduler=dict(self.scheduler),
            losses=list(self.losses),
            params={n: p.to_dict() for n, p in self.params.items()},
            loss_params={
                loss: {n: p.to_dict() for n, p in ps.items()}
                for loss, ps in self.loss_params.items()
            },
            speed_params={n: p.to_dict() for n, p in self.speed_params.items()},
            seed_points=[dict(p) for p in self.points],
        )
        return out

    def dump(self, path: str | PathLike) -> Path:
        """Write the space as YAML (the format of ``default.yaml``) and return the path."""
        path = Path(path)
        header = f"# astune search space, resolved from {self.source}; format: see default.yaml\n"
        body = yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=100)
        path.write_text(header + body, encoding="utf-8")
        return path


def _sample(trial: optuna.Trial, name: str, param: Param, constants: dict[str, Any]) -> Any:
    value = param.suggest(trial, name)
    if param.fixed:
        constants[name] = value
    elif param.kind == "float" and param.step is not None:
        # Optuna returns low + i * step (0.15000000000000002); the returned constants override
        # the captured value in OptunaSearch, so the config and MLflow see 0.15.
        constants[name] = value = round(value, _decimals(param.low, param.step))
    return value


def _decimals(*values: float) -> int:
    return max(max(0, -int(decimal.Decimal(str(v)).as_tuple().exponent)) for v in values)


def _divides(step: float, low: float, high: float) -> bool:
    try:
        span = decimal.Decimal(str(high)) - decimal.Decimal(str(low))
        return span >= 0 and span % decimal.Decimal(str(step)) == 0
    except (decimal.InvalidOperation, TypeError, ValueError):
        return False
