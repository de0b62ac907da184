"""The loss registry: ``build_loss(name, **params)`` and a description of every loss's parameters.

Defaults are the paper's SST5 settings (its Table "Parameter setting of algorithm"):

=========================  ==========================  ==============================
name                       parameters (default)        tasks
=========================  ==========================  ==============================
``softmax``                --                          single_label, token
``t_softmax``              ``tau`` > 0 (5.0)           single_label, token
``label_smoothing``        ``epsilon`` in [0, 1) (0.3) single_label, token
``sparse_softmax``         ``k`` >= 1 (4)              single_label, token
``sparsemax``              --                          single_label, token
``entmax15``               --                          single_label, token
``am_softmax``             ``s`` > 0 (10), ``m`` >= 0  single_label, token
                           (0.3)
``as_variant``             ``margin`` > 0 (1.0)        single_label, token
``as_softmax``             ``delta`` in [0, 1] (0.3)   single_label, token
``multilabel_softmax``     --                          multi_label
``multilabel_as_softmax``  ``delta`` in [0, 1] (0.3)   multi_label
=========================  ==========================  ==============================

The paper gives no value for the AS-variant's logit margin; 1.0 is about the logit gap that
AS-Softmax's delta = 0.3 implies on SST5 (``log(n * delta + 1)`` with n = 5, Eq.
our_training_goal). Besides its parameters, every loss takes the module option ``reduction``,
and the single-label ones ``ignore_index``; the search space holds the parameters only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from torch import nn

from astune._checks import check_choice, check_int, check_range
from astune.losses import baselines as bl
from astune.losses.as_softmax import ASSoftmaxLoss
from astune.losses.multilabel import MultiLabelASSoftmaxLoss, MultiLabelCategoricalCrossEntropy

TASKS = ("single_label", "token", "multi_label")
_SINGLE_LABEL_TASKS = ("single_label", "token")
_SINGLE_LABEL_OPTIONS = ("ignore_index", "reduction")


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a loss: its ``kind`` (``float`` or ``int``), default and accepted range."""

    name: str
    kind: type
    default: float | int
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def check(self, value: Any) -> float | int:
        """Return ``value`` after checking it; ``ValueError`` names it and the accepted range."""
        if self.kind is int:
            return check_int(self.name, value, self.low, self.high)
        return check_range(
            self.name, value, self.low, self.high, low_open=self.low_open, high_open=self.high_open
        )

    @property
    def interval(self) -> str:
        """The accepted range, e.g. ``"(0.0, inf)"``."""
        left = "(" if self.low_open or self.low is None else "["
        right = ")" if self.high_open or self.high is None else "]"
        low = "-inf" if self.low is None else self.low
        return f"{left}{low}, {'inf' if self.high is None else self.high}{right}"


@dataclass(frozen=True)
class LossSpec:
    """A loss of the registry: its module ``factory``, searchable ``params``, the ``tasks`` it
    applies to, and the module ``options`` that are not searched."""

    name: str
    factory: Callable[..., nn.Module]
    params: tuple[ParamSpec, ...] = ()
    tasks: tuple[str, ...] = _SINGLE_LABEL_TASKS
    options: tuple[str, ...] = _SINGLE_LABEL_OPTIONS

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def build(self, **params: Any) -> nn.Module:
        """The module with ``params`` over the defaults; ``ValueError`` for an unknown name."""
        accepted = self.param_names + self.options
        for key in params:
            if key not in accepted:
                raise ValueError(
                    f"unknown parameter {key!r} for loss {self.name!r}; "
                    f"it accepts: {', '.join(accepted)}."
                )
        return self.factory(**{**self.defaults(), **params})


def _delta() -> ParamSpec:
    return ParamSpec("delta", float, 0.3, 0.0, 1.0)


_SPECS = (
    LossSpec("softmax", bl.SoftmaxLoss),
    LossSpec("t_softmax", bl.TSoftmaxLoss, (ParamSpec("tau", float, 5.0, 0.0, low_open=True),)),
    LossSpec(
        "label_smoothing",
        bl.LabelSmoothingLoss,
        (ParamSpec("epsilon", float, 0.3, 0.0, 1.0, high_open=True),),
    ),
    LossSpec("sparse_softmax", bl.SparseSoftmaxLoss, (ParamSpec("k", int, 4, 1),)),
    LossSpec("sparsemax", bl.SparsemaxLoss),
    LossSpec("entmax15", bl.Entmax15Loss),
    LossSpec(
        "am_softmax",
        bl.AMSoftmaxLoss,
        (ParamSpec("s", float, 10.0, 0.0, low_open=True), ParamSpec("m", float, 0.3, 0.0)),
    ),
    LossSpec(
        "as_variant", bl.ASVariantLoss, (ParamSpec("margin", float, 1.0, 0.0, low_open=True),)
    ),
    LossSpec("as_softmax", ASSoftmaxLoss, (_delta(),)),
    LossSpec(
        "multilabel_softmax",
        MultiLabelCategoricalCrossEntropy,
        tasks=("multi_label",),
        options=("reduction",),
    ),
    LossSpec(
        "multilabel_as_softmax",
        MultiLabelASSoftmaxLoss,
        (_delta(),),
        tasks=("multi_label",),
        options=("reduction",),
    ),
)

LOSSES: Mapping[str, LossSpec] = MappingProxyType({spec.name: spec for spec in _SPECS})
"""Every loss of :func:`build_loss`, by name."""


def loss_spec(name: str) -> LossSpec:
    """The :class:`LossSpec` of ``name``; ``ValueError`` listing the known names otherwise."""
    return LOSSES[check_choice("loss", name, LOSSES)]


def loss_names(task: str | None = None) -> tuple[str, ...]:
    """The names of the losses that apply to ``task`` (one of :data:`TASKS`), or of all losses."""
    if task is None:
        return tuple(LOSSES)
    check_choice("task", task, TASKS)
    return tuple(name for name, spec in LOSSES.items() if task in spec.tasks)


def build_loss(name: str, **params: Any) -> nn.Module:
    """The loss module ``name`` with ``params`` over the defaults of the module docstring.

    Raises:
        ValueError: an unknown loss name (the message lists the known ones), a parameter the loss
            does not take (the message lists those it takes), or a value out of range.
    """
    return loss_spec(name).build(**params)
