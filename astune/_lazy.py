"""A package's public names, listed once and loaded on first use (PEP 562).

``import astune.losses`` or ``import astune.data`` then costs only this file: torch,
transformers and ``datasets`` load when a name that needs them is first read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from importlib import import_module
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, Sequence[str]]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for ``package``, whose ``exports`` map each
    submodule (relative, e.g. ``"as_softmax"``, or absolute for a name kept where it moved
    from, e.g. ``"astune.history.difficulty"``) to the public names it defines."""
    where = {
        name: module if module.startswith("astune.") else f"{package}.{module}"
        for module, names in exports.items()
        for name in names
    }

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(where[name]), name)

    def __dir__() -> list[str]:
        return sorted(where)

    return list(where), __getattr__, __dir__
