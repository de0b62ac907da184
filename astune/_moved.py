"""Old import paths of modules that moved into packages, kept importable.

A Ray experiment saved before the move pickles its objects by module path
(``astune.skip.ASSkip``); unpickling it on ``--resume`` imports that path again, as does a
user's script. Each old path loads the module at its new home under the old name too, with a
DeprecationWarning naming the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from importlib.machinery import ModuleSpec
from types import ModuleType

MOVED: dict[str, str] = {
    "astune.probe": "astune.recommend.probe",
    "astune.difficulty": "astune.recommend.difficulty",
    "astune.backbone_registry": "astune.backbones.registry",
    "astune.csc_metrics": "astune.metrics.csc",
    "astune.objectives": "astune.metrics.objectives",
    "astune.skip": "astune.speed.skip",
    "astune.prune": "astune.speed.prune",
}
"""Old dotted path -> the module's home since the third layout."""


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path and hands back the module of its new one (the same object)."""

    def find_spec(self, fullname: str, path: object, target: object = None) -> ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module executed when its new path was imported."""


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (after the standard finders: it only answers
    for the old paths, which no file holds any longer)."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())
