"""What the API functions share: the arguments a call was given, as a settings dataclass's
fields."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def call_arguments(
    function: Callable[..., Any], values: Mapping[str, Any], *, skip: Iterable[str] = ()
) -> dict[str, Any]:
    """The parameters of ``function`` read from ``values`` (its ``locals()``), less ``skip``."""
    names = [n for n in inspect.signature(function).parameters if n not in set(skip)]
    return {name: values[name] for name in names}
