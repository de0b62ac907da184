"""The loss registry: ``build_loss(name, **params)``, the catalogue's losses bound to modules.

Names, parameters, ranges, defaults and tasks live in :mod:`astune.losses.catalogue` (torch-free,
the one source); this module only maps each name to its ``nn.Module`` class and checks the
parameters with the catalogue's :class:`ParamSpec` before building. Besides its parameters, every
loss takes the module option ``reduction``, and the single-label ones ``ignore_index``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from torch import nn

from astune.losses import baselines as bl
from astune.losses.as_softmax import ASSoftmaxLoss
from astune.losses.catalogue import CATALOGUE, LossInfo, ParamSpec, loss_info, loss_names
from astune.losses.multilabel import MultiLabelASSoftmaxLoss, MultiLabelCategoricalCrossEntropy

__all__ = ["LOSSES", "LossSpec", "ParamSpec", "build_loss", "loss_names", "loss_spec"]

_FACTORIES: Mapping[str, Callable[..., nn.Module]] = {
    "softmax": bl.SoftmaxLoss,
    "t_softmax": bl.TSoftmaxLoss,
    "label_smoothing": bl.LabelSmoothingLoss,
    "sparse_softmax": bl.SparseSoftmaxLoss,
    "sparsemax": bl.SparsemaxLoss,
    "entmax15": bl.Entmax15Loss,
    "am_softmax": bl.AMSoftmaxLoss,
    "as_variant": bl.ASVariantLoss,
    "as_softmax": ASSoftmaxLoss,
    "multilabel_softmax": MultiLabelCategoricalCrossEntropy,
    "multilabel_as_softmax": MultiLabelASSoftmaxLoss,
}


@dataclass(frozen=True)
class LossSpec:
    """A catalogue entry (``info``) bound to its module ``factory``."""

    info: LossInfo
    factory: Callable[..., nn.Module]

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def params(self) -> tuple[ParamSpec, ...]:
        return self.info.params

    @property
    def param_names(self) -> tuple[str, ...]:
        return self.info.param_names

    @property
    def tasks(self) -> tuple[str, ...]:
        return self.info.tasks

    @property
    def options(self) -> tuple[str, ...]:
        return self.info.options

    def defaults(self) -> dict[str, Any]:
        return self.info.defaults()

    def build(self, **params: Any) -> nn.Module:
        """The module with ``params`` over the defaults, each checked by its ParamSpec;
        ``ValueError`` for an unknown name or a value out of range."""
        accepted = self.param_names + self.options
        for key, value in params.items():
            if key not in accepted:
                raise ValueError(
                    f"unknown parameter {key!r} for loss {self.name!r}; "
                    f"it accepts: {', '.join(accepted)}."
                )
            if key in self.param_names:
                self.info.param(key).check(value)
        return self.factory(**{**self.defaults(), **params})


LOSSES: Mapping[str, LossSpec] = MappingProxyType(
    {name: LossSpec(info, _FACTORIES[name]) for name, info in CATALOGUE.items()}
)
"""Every loss of :func:`build_loss`, by name (the catalogue's order)."""


def loss_spec(name: str) -> LossSpec:
    """The :class:`LossSpec` of ``name``; ``ValueError`` listing the known names otherwise."""
    return LOSSES[loss_info(name).name]


def build_loss(name: str, **params: Any) -> nn.Module:
    """The loss module ``name`` with ``params`` over the catalogue's defaults.

    Raises:
        ValueError: an unknown loss name (the message lists the known ones), a parameter the loss
            does not take (the message lists those it takes), or a value out of range.
    """
    return loss_spec(name).build(**params)
