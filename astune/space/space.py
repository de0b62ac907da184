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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from astune._checks import check_choice
from astune.config import SKIP_FIELDS, SPEED_FIELDS
from astune.losses.catalogue import (
    AS_LOSSES,
    MULTI_LABEL_TASKS,
    MULTILABEL_LOSSES,
    TASKS,
    family_loss,
    loss_info,
)
from astune.metrics.objectives import modes, parse_objectives
from astune.space.checks import check_space
from astune.space.files import (
    SECTIONS,
    available_spaces,
    load_document,
    misplaced,
    parse_losses,
    parse_scheduler,
    resolve_space_file,
    space_dir,
)
from astune.space.params import (
    DOMAINS,
    LOSS_KEYS,
    TRAIN_PARAMS,
    Invalid,
    Param,
    SpaceError,
    named,
    parse_param,
)

if TYPE_CHECKING:  # only for type hints: this module never imports optuna or ray
    import optuna

__all__ = ["SearchSpace", "SpaceError", "available_spaces", "load_space", "space_dir"]
DEFAULT_SCHEDULER = {"type": "auto", "grace_period": 1, "reduction_factor": 3}


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
    path = resolve_space_file(path_or_name, dataset)
    doc = load_document(path)
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
    objectives: tuple[str, ...] = ()  # () or (metric,): the metric alone
    description: str = ""
    source: str = "<memory>"

    def __post_init__(self) -> None:
        with named(self.source):
            object.__setattr__(self, "losses", parse_losses(self.losses))
        object.__setattr__(self, "scheduler", {**DEFAULT_SCHEDULER, **self.scheduler})
        try:
            names = parse_objectives(self.objectives or (self.metric,), metric=self.metric)
        except ValueError as err:
            raise self._error("objectives", str(err)) from None
        object.__setattr__(self, "objectives", names)
        object.__setattr__(self, "points", check_space(self))

    @property
    def multi_objective(self) -> bool:
        """Costs are minimised beside the metric: a Pareto front, not one best trial."""
        return len(self.objectives) > 1

    @property
    def modes(self) -> list[str]:
        """Ray Tune's mode of each of :attr:`objectives` (``min`` for every cost)."""
        return modes(self.objectives, self.mode)

    @property
    def scheduler_type(self) -> str:
        """``asha`` or ``none``; ``auto`` is ``asha``: successive halving, ASHA on the metric
        for one objective, by non-dominated sorting of the metric and costs for several."""
        kind = self.scheduler["type"]
        return "asha" if kind == "auto" else kind

    def _error(self, where: str, problem: str) -> SpaceError:
        return SpaceError(self.source, where, problem)

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
        skip = self.speed_params.get("as_skip")
        if loss in AS_LOSSES and skip is not None and _sample(trial, "as_skip", skip, constants):
            for name in SKIP_FIELDS:
                if name in self.speed_params:
                    _sample(trial, name, self.speed_params[name], constants)
        return constants

    def param(self, name: str, loss: str = "as_softmax") -> Param:
        """The spec of ``name`` (a loss parameter is looked up under ``loss``)."""
        return self._section(name, loss)[1][name]

    # ------------------------------------------------------------------- variants
    def with_losses(self, names: str | Iterable[str]) -> SearchSpace:
        """The space over ``names`` (a list or ``"a,b,c"``), each loss keeping its parameters.

        A loss this space does not define takes the ``default.yaml`` entry, and one defined in
        neither (a plugin's) its parameters fixed at their registered defaults
        (:meth:`undefined_losses` names them); AS-Speed takes the ``default.yaml``
        ``speed_params`` when missing here. Raises ``SpaceError`` for an unknown name.
        """
        with named(self.source):
            wanted = parse_losses(names if isinstance(names, str) else list(names))
        loss_params, speed = dict(self.loss_params), dict(self.speed_params)
        missing = self._missing_here(wanted)
        needs_speed = any(n in AS_LOSSES for n in wanted) and "as_speed" not in speed
        if missing or needs_speed:
            default = load_space("default")
            for name in missing:
                entry = default.loss_params.get(name)
                loss_params[name] = _registered_defaults(name) if entry is None else entry
            if needs_speed:
                speed = {**default.speed_params, **speed}
        return dataclasses.replace(self, losses=wanted, loss_params=loss_params, speed_params=speed)

    def _missing_here(self, losses: Iterable[str]) -> list[str]:
        """Of ``losses``, those with parameters that this space does not define."""
        return [n for n in losses if LOSS_KEYS[n] and n not in self.loss_params]

    def undefined_losses(self, names: str | Iterable[str]) -> dict[str, dict[str, Any]]:
        """Of the losses ``names``, those with parameters that neither this space nor
        ``default.yaml`` defines: :meth:`with_losses` fixes them at these registered defaults."""
        with named(self.source):
            wanted = parse_losses(names if isinstance(names, str) else list(names))
        undefined = self._missing_here(wanted)
        if undefined:
            undefined = load_space("default")._missing_here(undefined)
        return {n: {k: p.value for k, p in _registered_defaults(n).items()} for n in undefined}

    def for_task(self, task: str) -> SearchSpace:
        """This space with its losses swapped to the family of ``task`` (``softmax`` <->
        ``multilabel_softmax``, ``as_softmax`` <-> ``multilabel_as_softmax``)."""
        check_choice("task", task, TASKS)
        multi = task in MULTI_LABEL_TASKS
        if all((name in MULTILABEL_LOSSES) == multi for name in self.losses):
            return self
        swapped = [family_loss(name, task) for name in self.losses]
        for old, new in zip(self.losses, swapped):
            if (new in MULTILABEL_LOSSES) != multi:
                raise self._error("losses", f"loss {old!r} does not apply to {task} tasks")
        return self.with_losses(swapped)

    def with_fixed(self, **values: Any) -> SearchSpace:
        """The space with training parameters fixed (the CLI's ``--epochs``, ``--seed``); the
        seed points drop those keys."""
        params = dict(self.params)
        with named(self.source):
            for name, value in values.items():
                if name not in TRAIN_PARAMS:
                    raise Invalid(f"params.{name}", misplaced(name, TRAIN_PARAMS, "params"))
                params[name] = parse_param(
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
        objectives: tuple[str, ...] | None = None,
    ) -> SearchSpace:
        """The space with the CLI's ``--num-samples``, ``--scheduler asha|none`` and
        ``--objectives`` applied."""
        changes: dict[str, Any] = {} if objectives is None else {"objectives": objectives}
        with named(self.source):
            for key, value in (("num_samples", num_samples), ("metric", metric), ("mode", mode)):
                if value is not None:
                    changes[key] = SECTIONS[key](value)
            if scheduler is not None:
                changes["scheduler"] = {**self.scheduler, **parse_scheduler({"type": scheduler})}
        return dataclasses.replace(self, **changes)

    def narrowed(
        self,
        name: str,
        low: float,
        high: float,
        *,
        loss: str = "as_softmax",
        log: bool | None = None,
        step: float | None = None,
    ) -> SearchSpace:
        """The space with ``name`` searched over ``[low, high]``: ``log`` and ``step`` as given,
        else kept from the old range (its step where it divides the new one); seed points
        outside it are dropped."""
        section, params = self._section(name, loss)
        old, where = params[name], f"{section}.{name}"
        domain = DOMAINS.get(name)
        kind = "int" if domain is not None and domain.kind is int else "float"
        spec: dict[str, Any] = {"type": kind, "low": low, "high": high}
        if log if log is not None else old.kind == kind and old.log:
            spec["log"] = True
        step = step if step is not None else old.step if old.kind == kind else None
        if step is not None and _divides(step, low, high):
            spec["step"] = step
        with named(self.source):
            new = parse_param(name, spec, where)
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
        elif name in SPEED_FIELDS:
            section, params = "speed_params", self.speed_params
        elif loss in LOSS_KEYS and name in LOSS_KEYS[loss]:
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
            # resolved, and objectives only when several: a space's digest (which --resume
            # compares) stays what it was before either key existed
            scheduler={**self.scheduler, "type": self.scheduler_type},
            losses=list(self.losses),
            params={n: p.to_dict() for n, p in self.params.items()},
            loss_params={
                loss: {n: p.to_dict() for n, p in ps.items()}
                for loss, ps in self.loss_params.items()
            },
            speed_params={n: p.to_dict() for n, p in self.speed_params.items()},
            seed_points=[dict(p) for p in self.points],
        )
        if self.multi_objective:
            out["objectives"] = list(self.objectives)
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


def _registered_defaults(loss: str) -> dict[str, Param]:
    """Every parameter ``loss`` must be given (not the optional delta schedule), fixed at the
    default its registration declares (an AS loss's warm-up at ``warmup_ratio``'s)."""
    info = loss_info(loss)
    specs = {
        key: info.param(key) if key in info.param_names else DOMAINS[key] for key in LOSS_KEYS[loss]
    }
    return {
        key: Param("fixed", value=spec.default)
        for key, spec in specs.items()
        if key not in info.optional_keys
    }
