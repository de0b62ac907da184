"""The values a user fixed in their own space file: history (the portfolio) never moves them.

A packaged space's fixed values (``epochs: 7`` in ``sst5.yaml``) are astune's defaults, which a
portfolio may widen; a value written in the user's own file, or in a file it ``extends`` that
is not packaged, is the user's (a batch size fixed for a card's memory, epochs fixed for a
budget). A categorical of one choice is fixed too."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astune.space.files import _read_yaml, _resolve_extends, parse_document, space_dir
from astune.space.params import Param, named


@dataclass(frozen=True)
class UserFixed:
    """``values``: fixed train and speed parameters (every loss); ``loss_values``: per loss,
    its fixed parameters (``{"as_softmax": {"delta": 0.3}}``)."""

    values: dict[str, Any] = field(default_factory=dict)
    loss_values: dict[str, dict[str, Any]] = field(default_factory=dict)

    def keys(self) -> tuple[str, ...]:
        """Every fixed name, train and loss parameters alike."""
        names = dict.fromkeys(self.values)
        for fixed in self.loss_values.values():
            names.update(dict.fromkeys(fixed))
        return tuple(names)

    def for_loss(self, loss: str) -> dict[str, Any]:
        """What a config of ``loss`` must hold: the common values and ``loss``'s own."""
        return {**self.values, **self.loss_values.get(loss, {})}

    def with_values(self, extra: Mapping[str, Any], *, without: Iterable[str] = ()) -> UserFixed:
        """These values less the names ``without``, and ``extra`` (a flag's, which wins)."""
        dropped = set(without)
        kept = {k: v for k, v in self.values.items() if k not in dropped}
        return UserFixed({**kept, **extra}, self.loss_values)

    def __bool__(self) -> bool:
        return bool(self.values or self.loss_values)


def user_fixed(path: Path) -> UserFixed:
    """What ``path`` and the files it extends fix, leaving out the packaged files (a child's
    value over its parent's, as ``extends`` merges them)."""
    chain: list[dict[str, Any]] = []
    packaged = space_dir().resolve()
    while path.resolve().parent != packaged:
        with named(path):
            doc = parse_document(_read_yaml(path))
        chain.append(doc)
        if "extends" not in doc:
            break
        path = _resolve_extends(doc["extends"], path)
    values: dict[str, Any] = {}
    loss_values: dict[str, dict[str, Any]] = {}
    for doc in reversed(chain):  # the user's own file last: its values win
        for section in ("params", "speed_params"):
            _merge_fixed(values, doc.get(section, {}))
        for loss, params in doc.get("loss_params", {}).items():
            _merge_fixed(loss_values.setdefault(loss, {}), params)
    return UserFixed(values, {k: v for k, v in loss_values.items() if v})


def _merge_fixed(into: dict[str, Any], params: Mapping[str, Param]) -> None:
    """``params``' fixed values into ``into``; a name they search again is no longer fixed."""
    for name, param in params.items():
        if param.fixed:
            into[name] = param.value
        elif param.kind == "categorical" and len(param.choices) == 1:
            into[name] = param.choices[0]
        else:
            into.pop(name, None)
