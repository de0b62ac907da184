"""The loss catalogue, torch-free: every loss's name, parameters, tasks and whether it is an AS
loss.

This is the one source that ``build_loss``, search spaces, configs, export and the dataset registry
read; importing it costs nothing (no torch), so the CLI and the MLflow readers can use it freely.
Defaults are the paper's SST5 settings (its Table "Parameter setting of algorithm"):

=========================  ==========================  ==============================
name                       parameters (default)        tasks
=========================  ==========================  ==============================
``softmax``                --                          single_label, pair, token
``t_softmax``              ``tau`` > 0 (5.0)           single_label, pair, token
``label_smoothing``        ``epsilon`` in [0, 1) (0.3) single_label, pair, token
``sparse_softmax``         ``k`` >= 1 (4)              single_label, pair, token
``sparsemax``              --                          single_label, pair, token
``entmax15``               --                          single_label, pair, token
``am_softmax``             ``s`` > 0 (10), ``m`` >= 0  single_label, pair, token
                           (0.3)
``as_variant``             ``margin`` > 0 (1.0)        single_label, pair, token
``as_softmax``             ``delta`` in (0, 1] (0.3)   single_label, pair, token
``multilabel_softmax``     --                          multi_label
``multilabel_as_softmax``  ``delta`` in (0, 1] (0.3)   multi_label
=========================  ==========================  ==============================

The paper gives no value for the AS-variant's logit margin; 1.0 is about the logit gap that
AS-Softmax's delta = 0.3 implies on SST5 (``log(n * delta + 1)`` with n = 5, Eq.
our_training_goal). delta is the paper's ``(0, 1]``: at 0 every class with ``p_i < p_t`` would be
masked, a degenerate loss the paper never uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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


_INFOS = (
    LossInfo("softmax"),
    LossInfo("t_softmax", (ParamSpec("tau", float, 5.0, 0.0, low_open=True),)),
    LossInfo("label_smoothing", (ParamSpec("epsilon", float, 0.3, 0.0, 1.0, high_open=True),)),
    LossInfo("sparse_softmax", (ParamSpec("k", int, 4, 1),)),
    LossInfo("sparsemax"),
    LossInfo("entmax15"),
    LossInfo(
        "am_softmax",
        (ParamSpec("s", float, 10.0, 0.0, low_open=True), ParamSpec("m", float, 0.3, 0.0)),
    ),
    LossInfo("as_variant", (ParamSpec("margin", float, 1.0, 0.0, low_open=True),)),
    LossInfo("as_softmax", (DELTA,), is_as=True, fused=True),
    LossInfo("multilabel_softmax", tasks=MULTI_LABEL_TASKS),
    LossInfo("multilabel_as_softmax", (DELTA,), tasks=MULTI_LABEL_TASKS, is_as=True, fused=True),
)

CATALOGUE: Mapping[str, LossInfo] = MappingProxyType({info.name: info for info in _INFOS})
"""Every loss of :func:`astune.losses.build_loss`, by name."""
AS_LOSSES = tuple(name for name, info in CATALOGUE.items() if info.is_as)
"""The AS losses: AS-Speed, AS-Skip and the delta warm-up apply to these."""
SOFTMAX_LOSSES = ("softmax", "multilabel_softmax")
"""The plain-softmax baseline of each task family."""
MULTILABEL_LOSSES = tuple(n for n, info in CATALOGUE.items() if info.tasks == MULTI_LABEL_TASKS)
LOSS_PARAM_NAMES = tuple(
    dict.fromkeys(p.name for info in CATALOGUE.values() for p in info.params if not info.is_as)
)
"""Parameters of the baseline losses, which a flat trial config carries (``tau: 5``)."""


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
