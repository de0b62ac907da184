"""What the API functions share: the arguments a call was given, as a settings dataclass's
fields."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from os import PathLike
from typing import Any


def call_arguments(
    function: Callable[..., Any],
    values: Mapping[str, Any],
    *,
    skip: Iterable[str] = (),
    lists: Iterable[str] = (),
) -> dict[str, Any]:
    """The parameters of ``function`` read from ``values`` (its ``locals()``), less ``skip``:
    paths as strings, and each name in ``lists`` given as a sequence joined by commas, as its
    flag spells it (``losses=["as_softmax", "softmax"]`` is ``--losses as_softmax,softmax``)."""
    names = [n for n in inspect.signature(function).parameters if n not in set(skip)]
    out = {n: str(values[n]) if isinstance(values[n], PathLike) else values[n] for n in names}
    for name in lists:
        value = out.get(name)
        if isinstance(value, Sequence) and not isinstance(value, str):
            out[name] = ",".join(str(item) for item in value)
    return out
