"""Search-space parameters: the error type, one parameter spec (:class:`Param`) and its checks.

Which keys a space may hold, and the values each accepts, come from the one tables of astune:
the training fields of :data:`astune.config.TRAIN_FIELDS` and the losses' parameters of
:mod:`astune.losses.catalogue`. A parameter spec must stay inside its key's range, so that every
value Optuna samples is a valid config value.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from os import PathLike
from typing import TYPE_CHECKING, Any

from astune.config import INFOBATCH_FIELDS, SPEED_FIELDS, TRAIN_FIELDS
from astune.losses.catalogue import CATALOGUE, DELTA_CONTROL, WARMUP_RATIO, ParamSpec

if TYPE_CHECKING:  # only for type hints: this module never imports optuna or ray
    import optuna

TRAIN_PARAMS = (
    "lr",
    "batch_size",
    "epochs",
    "seed",
    "weight_decay",
    "lr_warmup_ratio",
    "max_grad_norm",
    "dropout",
    "length_window",
    "fresh_head",
    *INFOBATCH_FIELDS,
)
"""The keys of a space's ``params`` section (TrainConfig fields; InfoBatch's apply to any loss)."""


# The keys of ``speed_params`` (AS-Speed and AS-Skip, AS losses only) are config's SPEED_FIELDS;
# AS-Skip's (SKIP_FIELDS) are optional in a space (else the config's defaults), sampled only when
# ``as_skip`` is true.
class _LossKeys(Mapping[str, tuple[str, ...]]):
    """Loss name -> its ``loss_params`` keys, read from the registry as it is now (a plugin's
    loss included)."""

    def __getitem__(self, name: str) -> tuple[str, ...]:
        return CATALOGUE[name].config_keys

    def __iter__(self) -> Iterator[str]:
        return iter(CATALOGUE)

    def __len__(self) -> int:
        return len(CATALOGUE)


LOSS_KEYS: Mapping[str, tuple[str, ...]] = _LossKeys()
"""Loss name -> its ``loss_params`` keys: its parameters, plus ``warmup_ratio`` for an AS loss."""


class _LossKeyNames:
    """Whether a name is a ``loss_params`` key of some loss (live)."""

    def __contains__(self, name: object) -> bool:
        return any(name in keys for keys in LOSS_KEYS.values())


LOSS_KEY_NAMES = _LossKeyNames()
_TRAIN_DOMAINS = {name: TRAIN_FIELDS[name] for name in TRAIN_PARAMS + SPEED_FIELDS}
_AS_LOOP_DOMAINS = {WARMUP_RATIO.name: WARMUP_RATIO, **{p.name: p for p in DELTA_CONTROL}}


class _Domains(Mapping[str, ParamSpec]):
    """Every searchable key's accepted range: the training fields', the registered losses'
    parameters' (live) and the AS losses' loop keys'."""

    def _all(self) -> dict[str, ParamSpec]:
        losses = {p.name: p for info in CATALOGUE.values() for p in info.params}
        return {**_TRAIN_DOMAINS, **losses, **_AS_LOOP_DOMAINS}

    def __getitem__(self, name: str) -> ParamSpec:
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


DOMAINS: Mapping[str, ParamSpec] = _Domains()
"""The values each key accepts: the config's and the catalogue's ParamSpec, not a copy."""

_KINDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {  # kind -> (required, optional) keys
    "float": (frozenset({"low", "high"}), frozenset({"log", "step"})),
    "int": (frozenset({"low", "high"}), frozenset({"log", "step"})),
    "categorical": (frozenset({"choices"}), frozenset()),
    "fixed": (frozenset({"value"}), frozenset()),
}


class SpaceError(ValueError):
    """An invalid search space; its one-line message names the file, the parameter, the problem."""

    def __init__(self, file: str | PathLike, where: str, problem: str):
        self.file, self.where, self.problem = str(file), where, problem
        super().__init__(f"{file}: {where}: {problem}" if where else f"{file}: {problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:  # Ray ships errors between processes
        return type(self), (self.file, self.where, self.problem)


class Invalid(Exception):
    """A problem found before the file name is known; ``named`` turns it into SpaceError."""

    def __init__(self, where: str, problem: str):
        super().__init__(where, problem)
        self.where, self.problem = where, problem


@contextmanager
def named(source: str | PathLike) -> Iterator[None]:
    try:
        yield
    except Invalid as exc:
        raise SpaceError(source, exc.where, exc.problem) from None


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


def parse_param(name: str, spec: Any, where: str) -> Param:
    """Parse and check one parameter spec; raises ``Invalid`` naming ``where``."""
    if _is_scalar(spec):
        spec = {"type": "fixed", "value": spec}
    if not isinstance(spec, Mapping):
        raise Invalid(where, f"expected a mapping with a 'type' key or a scalar, got {spec!r}")
    kind = spec.get("type")
    if kind not in _KINDS:
        raise Invalid(where, f"unknown kind {kind!r}; expected one of {', '.join(_KINDS)}")
    required, optional = _KINDS[kind]
    keys = set(spec) - {"type"}
    if missing := sorted(required - keys):
        raise Invalid(where, f"missing key {missing[0]!r} for kind {kind}")
    if extra := sorted(keys - required - optional, key=str):
        allowed = ", ".join(sorted(required | optional))
        raise Invalid(where, f"unexpected key {extra[0]!r} for kind {kind} (allowed: {allowed})")
    param = _BUILDERS[kind](spec, where)
    _check_domain(name, param, where)
    return param


def _range_param(kind: str, spec: Mapping[str, Any], where: str) -> Param:
    is_int = kind == "int"
    low, high = spec["low"], spec["high"]
    for key, v in (("low", low), ("high", high)):
        if not _is_number(v) or (is_int and not isinstance(v, int)):
            raise Invalid(
                where, f"{key} must be {'an integer' if is_int else 'a number'}, got {v!r}"
            )
    if low > high:
        raise Invalid(where, f"low {low} must be <= high {high}")
    log, step = spec.get("log", False), spec.get("step")
    if not isinstance(log, bool):
        raise Invalid(where, f"log must be true or false, got {log!r}")
    if log and low <= 0:
        raise Invalid(where, f"log: true needs low > 0, got low {low}")
    if step is not None:
        _check_step(step, low, high, log, is_int, where)
    if not is_int:
        low, high, step = float(low), float(high), None if step is None else float(step)
    return Param(kind, low=low, high=high, log=log, step=step)


def _check_step(step: Any, low: float, high: float, log: bool, is_int: bool, where: str) -> None:
    """Reject a step that Optuna would silently correct: the range must be a multiple of it."""
    if not _is_number(step) or step <= 0 or (is_int and not isinstance(step, int)):
        raise Invalid(
            where, f"step must be a positive {'integer' if is_int else 'number'}, got {step!r}"
        )
    if log and step != 1:
        raise Invalid(where, "log: true cannot be combined with a step (Optuna's rule)")
    span = decimal.Decimal(str(high)) - decimal.Decimal(str(low))
    if span % decimal.Decimal(str(step)) != 0:
        raise Invalid(where, f"step {step} does not divide the range [{low}, {high}]")


def _categorical_param(spec: Mapping[str, Any], where: str) -> Param:
    choices = spec["choices"]
    if not isinstance(choices, list) or not choices:
        raise Invalid(where, f"choices must be a non-empty list, got {choices!r}")
    for i, c in enumerate(choices):
        if not _is_scalar(c):
            raise Invalid(where, f"choices[{i}] must be a number, string, bool or null, got {c!r}")
        if any(_same(c, d) for d in choices[:i]):
            raise Invalid(where, f"choices[{i}] repeats {c!r}")
    return Param("categorical", choices=tuple(choices))


def _fixed_param(spec: Mapping[str, Any], where: str) -> Param:
    if not _is_scalar(spec["value"]):
        raise Invalid(where, f"value must be a number, string, bool or null, got {spec['value']!r}")
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
    if domain.kind is int and param.kind == "float":
        raise Invalid(where, f"{name} takes integers; use type int, categorical or fixed")
    if domain.kind is bool and param.kind in ("float", "int"):
        raise Invalid(where, f"{name} takes true/false; use type categorical or fixed")
    if domain.kind is str and param.kind in ("float", "int"):
        raise Invalid(
            where, f"{name} takes one of {', '.join(domain.choices)}; use type categorical or fixed"
        )
    for value in param.bounds():
        try:
            domain.check(value)
        except ValueError as exc:
            raise Invalid(where, str(exc).rstrip(".")) from None
