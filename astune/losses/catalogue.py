"""The loss registry, torch-free: every loss's name, parameters, tasks, whether it is an AS loss
and its factory, each declared once by :func:`register_loss` (the built-ins below, a user's own
from a plugin module: :mod:`astune.plugins`).

This is the one source that ``build_loss``, search spaces, configs, export, the ``losses``
listing and the dataset registry read; importing it costs nothing (no torch: a built-in's factory
is named as ``"module:attribute"`` and imported when a loss is first built), so the CLI and the
MLflow readers can use it freely. ``python -m astune losses`` prints the table of every loss
registered (a plugin's too). Defaults are the paper's SST5 settings (its Table "Parameter setting
of algorithm").

The paper gives no value for the AS-variant's logit margin; 1.0 is about the logit gap that
AS-Softmax's delta = 0.3 implies on SST5 (``log(n * delta + 1)`` with n = 5, Eq.
our_training_goal). delta is the paper's ``(0, 1]``: at 0 every class with ``p_i < p_t`` would be
masked, a degenerate loss the paper never uses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from astune._checks import check_choice, check_int, check_range

TEXT_TASKS = ("single_label", "pair", "token", "multi_label")
MEDIA_TASKS = ("image", "audio")
"""Single-label classification of image or audio files (a column of paths, or class folders)."""
TASKS = TEXT_TASKS + MEDIA_TASKS
"""Every task family a dataset can have; the single-label losses serve all but ``multi_label``."""
SINGLE_LABEL_TASKS = ("single_label", "pair", "token", *MEDIA_TASKS)
MULTI_LABEL_TASKS = ("multi_label",)


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: its ``kind`` (``float``, ``int``, ``bool``, or ``str`` with ``choices``),
    default and accepted range."""

    name: str
    kind: type
    default: float | int | bool | str | None
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()

    def check(self, value: Any) -> float | int | bool | str:
        """Return ``value`` after checking it; ``ValueError`` names it and the accepted range."""
        if self.kind is str:
            return check_choice(self.name, value, self.choices)
        if self.kind is bool:
            if not isinstance(value, bool):
                raise ValueError(f"{self.name} must be true or false, but got {value!r}.")
            return value
        if self.kind is int:
            return check_int(self.name, value, self.low, self.high)  # type: ignore[arg-type]
        return check_range(
            self.name, value, self.low, self.high, low_open=self.low_open, high_open=self.high_open
        )

    @property
    def interval(self) -> str:
        """The accepted range, e.g. ``"(0.0, inf)"`` (the choices of a ``str`` parameter)."""
        if self.kind is str:
            return "{" + ", ".join(self.choices) + "}"
        left = "(" if self.low_open or self.low is None else "["
        right = ")" if self.high_open or self.high is None else "]"
        low = "-inf" if self.low is None else self.low
        return f"{left}{low}, {'inf' if self.high is None else self.high}{right}"


DELTA = ParamSpec("delta", float, 0.3, 0.0, 1.0, low_open=True)
"""AS-Softmax's margin: class ``i`` is masked when ``p_t - p_i > delta``; the paper's ``(0, 1]``."""
WARMUP_RATIO = ParamSpec("warmup_ratio", float, 0.0, 0.0, 1.0)
"""The fraction ``r`` of training kept at ``delta = 1``: a training-loop key of the AS losses."""
DELTA_SCHEDULES = ("fixed", "target-mask", "ema")
"""How delta moves after the warm-up (astune/losses/delta.py): ``fixed`` (the paper's),
``target-mask`` (the masked ratio follows a target curve), ``ema`` (an average of the margin)."""
LOSS_KERNELS = ("auto", "triton", "torch")
"""Which implementation computes AS-Softmax, single- and multi-label (``--loss-kernel``):
``auto`` is the fused Triton kernel on CUDA (its ``-m gpu`` tests passed on an H100,
benchmarks/RESULTS.md), ``torch`` elsewhere."""
KERNEL_OPTIONS = ("kernel", "overwrite_logits")
"""The module options of a loss with a fused kernel (``LossInfo.fused``)."""
DELTA_CONTROL = (
    ParamSpec("delta_schedule", str, "fixed", choices=DELTA_SCHEDULES),
    # target-mask: the masked ratio the target curve reaches at the end of training, the
    # controller's gain (delta moved per unit of masked-ratio error) and its bound per step
    ParamSpec("mask_target", float, 0.5, 0.0, 1.0, low_open=True),
    ParamSpec("delta_gain", float, 0.5, 0.0, low_open=True),
    ParamSpec("delta_max_step", float, 0.02, 0.0, 1.0, low_open=True),
    # both adaptive schedules: the lowest delta they may reach; ema: the average's momentum
    ParamSpec("delta_min", float, 0.05, 0.0, 1.0, low_open=True),
    ParamSpec("delta_momentum", float, 0.9, 0.0, 1.0, high_open=True),
)
"""The adaptive delta's training-loop keys of the AS losses; optional in a search space's
``loss_params`` (left out: these defaults)."""


@dataclass(frozen=True)
class LossInfo:
    """A loss of the catalogue: its searchable ``params``, the ``tasks`` it serves, whether it is
    an AS loss (AS-Speed and the delta warm-up apply), and the module ``options`` not searched."""

    name: str
    params: tuple[ParamSpec, ...] = ()
    tasks: tuple[str, ...] = SINGLE_LABEL_TASKS
    is_as: bool = False
    fused: bool = False  # a fused Triton kernel: the module takes KERNEL_OPTIONS
    # the module's class or function, or its "module:attribute" (imported on first build)
    factory: Callable[..., Any] | str | None = field(default=None, compare=False)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    @property
    def options(self) -> tuple[str, ...]:
        """Module options every call may pass besides the parameters."""
        multi = self.tasks == MULTI_LABEL_TASKS
        plain = ("reduction",) if multi else ("ignore_index", "reduction")
        return plain + KERNEL_OPTIONS if self.fused else plain

    @property
    def config_keys(self) -> tuple[str, ...]:
        """The trial-config keys this loss uses: its parameters, plus the delta warm-up and the
        delta schedule of an AS loss (training-loop keys, not ``build_loss`` arguments)."""
        return self.param_names + ((WARMUP_RATIO.name,) + self.optional_keys if self.is_as else ())

    @property
    def optional_keys(self) -> tuple[str, ...]:
        """The config keys a search space may leave out (the schedule of an AS loss's delta)."""
        return tuple(p.name for p in DELTA_CONTROL) if self.is_as else ()

    def param(self, name: str) -> ParamSpec:
        for spec in self.params:
            if spec.name == name:
                return spec
        raise ValueError(
            f"loss {self.name!r} takes no parameter {name!r}; it takes: "
            f"{', '.join(self.param_names) or 'none'}."
        )

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}


_REGISTRY: dict[str, LossInfo] = {}
LOSS_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
"""What a loss's name may be: a lower-case identifier (it is a YAML key and a CLI value)."""
RESERVED_PARAMS = frozenset(
    ("loss", "lr", "batch_size", "epochs", "seed", "dataset", "backbone", "reduction",
     "ignore_index", WARMUP_RATIO.name, *KERNEL_OPTIONS, *(p.name for p in DELTA_CONTROL))
)  # fmt: skip
"""Names a loss's parameter may not take: trial-config keys and module options."""


def register_loss(
    name: str,
    *,
    params: Sequence[ParamSpec] = (),
    tasks: Sequence[str] = SINGLE_LABEL_TASKS,
    is_as: bool = False,
    fused: bool = False,
    factory: Callable[..., Any] | str | None = None,
) -> Any:
    """Declare the loss ``name`` once (returns its :class:`LossInfo`; without ``factory``, a
    class decorator that returns the class): its searchable ``params`` (each a :class:`ParamSpec`
    with its default and range), the ``tasks`` it serves, whether it is an AS loss (AS-Speed,
    AS-Skip and the delta warm-up apply; its module takes ``delta`` and ``set_delta``) and its
    ``factory``, which builds the ``nn.Module`` from the parameters and ``reduction`` (and
    ``ignore_index`` for a single-label loss). Without ``factory`` it is a class decorator::

        @register_loss("focal", params=(ParamSpec("gamma", float, 2.0, 0.0),))
        class FocalLoss(nn.Module): ...

    Registering the same name with the same factory again changes nothing (a module imported
    twice); ValueError (one line, naming the loss and what is wrong) for a name taken by
    another factory, a bad name or task, or a parameter whose name is reserved, repeated, or
    whose default is outside its own range."""
    if factory is None:

        def decorate(found: Callable[..., Any]) -> Callable[..., Any]:
            register_loss(name, params=params, tasks=tasks, is_as=is_as, fused=fused, factory=found)
            return found

        return decorate
    info = LossInfo(name, tuple(params), tuple(tasks), bool(is_as), bool(fused), factory)
    _check_new_loss(info)
    _REGISTRY[name] = info
    return info


def _check_new_loss(info: LossInfo) -> None:
    where = f"loss {info.name!r}"
    if not isinstance(info.name, str) or not LOSS_NAME.match(info.name):
        raise ValueError(f"{where}: a loss's name must match {LOSS_NAME.pattern}")
    known = _REGISTRY.get(info.name)
    if known is not None and known.factory != info.factory:
        raise ValueError(f"{where} is already registered (by {_factory_name(known.factory)})")
    if not info.tasks or any(task not in TASKS for task in info.tasks):
        raise ValueError(f"{where}: tasks {list(info.tasks)} must be some of {', '.join(TASKS)}")
    names = [p.name if isinstance(p, ParamSpec) else p for p in info.params]
    for spec, pname in zip(info.params, names):
        if not isinstance(spec, ParamSpec):
            raise ValueError(f"{where}: parameter {pname!r} must be a ParamSpec")
        if pname in RESERVED_PARAMS or names.count(pname) > 1:
            problem = "is reserved" if pname in RESERVED_PARAMS else "is declared twice"
            raise ValueError(f"{where}: parameter {pname!r} {problem}")
        try:
            spec.check(spec.default)
        except ValueError as err:
            raise ValueError(f"{where}: parameter {pname!r}: default {err}") from None
    if not (callable(info.factory) or (isinstance(info.factory, str) and ":" in info.factory)):
        raise ValueError(f"{where}: factory must be callable or 'module:attribute'")


def _factory_name(factory: Any) -> str:
    if isinstance(factory, str):
        return factory
    return f"{getattr(factory, '__module__', '?')}:{getattr(factory, '__qualname__', factory)}"


class LiveNames(Sequence[str]):
    """Loss names (or their parameters' names) chosen from the registry as it is now (a plugin
    may add to it later): a sequence like a tuple, read afresh each time."""

    def __init__(self, choose: Callable[[LossInfo], bool], *, params: bool = False):
        self._choose, self._params = choose, params  # params: the chosen losses' parameters

    def _names(self) -> tuple[str, ...]:
        chosen = [info for info in _REGISTRY.values() if self._choose(info)]
        if self._params:
            return tuple(dict.fromkeys(p.name for info in chosen for p in info.params))
        return tuple(info.name for info in chosen)

    def __getitem__(self, index: Any) -> Any:
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __add__(self, other: Sequence[str]) -> tuple[str, ...]:
        return self._names() + tuple(other)

    def __eq__(self, other: object) -> bool:
        return self._names() == (tuple(other) if isinstance(other, Sequence) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._names())


_BASELINES = "astune.losses.baselines"
register_loss("softmax", factory=f"{_BASELINES}:SoftmaxLoss")
register_loss(
    "t_softmax",
    params=(ParamSpec("tau", float, 5.0, 0.0, low_open=True),),
    factory=f"{_BASELINES}:TSoftmaxLoss",
)
register_loss(
    "label_smoothing",
    params=(ParamSpec("epsilon", float, 0.3, 0.0, 1.0, high_open=True),),
    factory=f"{_BASELINES}:LabelSmoothingLoss",
)
register_loss(
    "sparse_softmax",
    params=(ParamSpec("k", int, 4, 1),),
    factory=f"{_BASELINES}:SparseSoftmaxLoss",
)
register_loss("sparsemax", factory=f"{_BASELINES}:SparsemaxLoss")
register_loss("entmax15", factory=f"{_BASELINES}:Entmax15Loss")
register_loss(
    "am_softmax",
    params=(ParamSpec("s", float, 10.0, 0.0, low_open=True), ParamSpec("m", float, 0.3, 0.0)),
    factory=f"{_BASELINES}:AMSoftmaxLoss",
)
register_loss(
    "as_variant",
    params=(ParamSpec("margin", float, 1.0, 0.0, low_open=True),),
    factory=f"{_BASELINES}:ASVariantLoss",
)
register_loss(
    "as_softmax",
    params=(DELTA,),
    is_as=True,
    fused=True,
    factory="astune.losses.as_softmax:ASSoftmaxLoss",
)
register_loss(
    "multilabel_softmax",
    tasks=MULTI_LABEL_TASKS,
    factory="astune.losses.multilabel:MultiLabelCategoricalCrossEntropy",
)
register_loss(
    "multilabel_as_softmax",
    params=(DELTA,),
    tasks=MULTI_LABEL_TASKS,
    is_as=True,
    fused=True,
    factory="astune.losses.multilabel:MultiLabelASSoftmaxLoss",
)

CATALOGUE: Mapping[str, LossInfo] = MappingProxyType(_REGISTRY)
"""Every loss of :func:`astune.losses.build_loss`, by name (registration order), live."""
AS_LOSSES = LiveNames(lambda info: info.is_as)
"""The AS losses: AS-Speed, AS-Skip and the delta warm-up apply to these."""
SOFTMAX_LOSSES = ("softmax", "multilabel_softmax")
"""The plain-softmax baseline of each task family."""
MULTILABEL_LOSSES = LiveNames(lambda info: info.tasks == MULTI_LABEL_TASKS)
LOSS_PARAM_NAMES = LiveNames(lambda info: not info.is_as, params=True)
"""Parameters of the baseline losses (and of a plugin's non-AS losses), which a flat trial
config carries (``tau: 5``), live."""


def loss_info(name: str) -> LossInfo:
    """The :class:`LossInfo` of ``name``; ``ValueError`` listing the known names otherwise."""
    return CATALOGUE[check_choice("loss", name, CATALOGUE)]


def loss_names(task: str | None = None) -> tuple[str, ...]:
    """The names of the losses that serve ``task`` (one of :data:`TASKS`), or of all losses."""
    if task is None:
        return tuple(CATALOGUE)
    check_choice("task", task, TASKS)
    return tuple(name for name, info in CATALOGUE.items() if task in info.tasks)


def family_loss(name: str, task: str) -> str:
    """``name``'s counterpart for ``task``: ``softmax`` <-> ``multilabel_softmax`` and
    ``as_softmax`` <-> ``multilabel_as_softmax``; other names are returned unchanged."""
    check_choice("task", task, TASKS)
    to_multi = {"softmax": "multilabel_softmax", "as_softmax": "multilabel_as_softmax"}
    swap = to_multi if task in MULTI_LABEL_TASKS else {v: k for k, v in to_multi.items()}
    return swap.get(name, name)


def format_losses_table() -> str:
    """The registry as ``python -m astune losses`` prints it: a loss a line, with its
    parameters (default and range), tasks, whether it is an AS loss and where it comes from."""
    rows = [("loss", "parameters (default, range)", "tasks", "AS", "from")]
    for info in _REGISTRY.values():
        params = ", ".join(f"{p.name}={p.default} {p.interval}" for p in info.params) or "-"
        origin = _factory_name(info.factory).split(":")[0]
        rows.append((info.name, params, ",".join(info.tasks), "yes" if info.is_as else "", origin))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows
    )
