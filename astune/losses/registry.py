"""``build_loss(name, **params)``: the catalogue's losses built as modules.

Names, parameters, ranges, defaults, tasks and factories are registered once in
:mod:`astune.losses.catalogue` (torch-free, the one source: :func:`register_loss`); this module
imports a factory when its loss is first built and checks the parameters with the catalogue's
:class:`ParamSpec` before building. Besides its parameters, every
loss takes the module option ``reduction``, and the single-label ones ``ignore_index``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from torch import nn

from astune.losses.catalogue import CATALOGUE, LossInfo, ParamSpec, loss_info, loss_names

__all__ = ["LOSSES", "LossSpec", "ParamSpec", "build_loss", "loss_names", "loss_spec"]


@dataclass(frozen=True)
class LossSpec:
    """A catalogue entry (``info``) bound to its module ``factory``."""

    info: LossInfo

    @property
    def factory(self) -> Callable[..., nn.Module]:
        """The registered factory; a ``"module:attribute"`` one imported now."""
        found = self.info.factory
        if isinstance(found, str):
            module, _, attribute = found.partition(":")
            found = getattr(importlib.import_module(module), attribute)
        return found

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


class _Specs(Mapping[str, LossSpec]):
    """:data:`CATALOGUE` bound to :class:`LossSpec` (live: a plugin's loss appears here)."""

    def __getitem__(self, name: str) -> LossSpec:
        return LossSpec(CATALOGUE[name])

    def __iter__(self) -> Iterator[str]:
        return iter(CATALOGUE)

    def __len__(self) -> int:
        return len(CATALOGUE)


LOSSES: Mapping[str, LossSpec] = _Specs()
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
