"""Old import paths of modules and packages that moved, kept importable.

A Ray experiment saved before a move pickles its objects by module path
(``astune.skip.ASSkip``, ``astune.search.trainable.train_trial``); unpickling it on
``--resume`` imports that path again, as does a user's script. Each old path loads the module
at its new home under the old name too, with a DeprecationWarning naming the new path.

The packages renamed in the fourth layout gave their names to the Python API
(``astune.search(...)``, ``astune.recommend(...)``, ...): importing an old path still sets it as
an attribute of ``astune``, which the package's ``__setattr__`` refuses for those names
(``astune/__init__.py``), so the functions stay what the names are.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from importlib.machinery import ModuleSpec
from types import ModuleType

REMOVED_IN = "0.3.0"
"""The release that drops the old paths below and the other shims kept for earlier layouts
(``TrainConfig.speed``): each deprecation message names it (docs/contract.md)."""

MOVED: dict[str, str] = {
    "astune.probe": "astune.history.probe",
    "astune.difficulty": "astune.history.difficulty",
    "astune.backbone_registry": "astune.backbones.registry",
    "astune.csc_metrics": "astune.metrics.csc",
    "astune.objectives": "astune.metrics.objectives",
    "astune.skip": "astune.speed.skip",
    "astune.prune": "astune.speed.prune",
    # issue 61: astune/tuning by job (a path of the fourth layout, astune.search.*, moves on
    # through MOVED_PACKAGES to one of these, then here: new_home follows the chain)
    "astune.tuning.searcher": "astune.tuning.searchers.searcher",
    "astune.tuning.algorithms": "astune.tuning.searchers.algorithms",
    "astune.tuning.mo_halving": "astune.tuning.searchers.mo_halving",
    "astune.tuning.stop": "astune.tuning.lifecycle.stop",
    "astune.tuning.ray_watch": "astune.tuning.lifecycle.ray_watch",
    "astune.tuning.resume": "astune.tuning.lifecycle.resume",
    "astune.tuning.ending": "astune.tuning.lifecycle.ending",
    "astune.tuning.backfill": "astune.tuning.lifecycle.backfill",
    "astune.tuning.scratch": "astune.tuning.lifecycle.scratch",
    "astune.tuning.trial_errors": "astune.tuning.lifecycle.trial_errors",
    "astune.tuning.confirm": "astune.tuning.confirmation.confirm",
    "astune.tuning.confirm_summary": "astune.tuning.confirmation.confirm_summary",
    # issue 70: the history that starts a search in one package; recommendation/ keeps delta
    "astune.recommendation.probe": "astune.history.probe",
    "astune.recommendation.difficulty": "astune.history.difficulty",
    "astune.recommendation.transfer": "astune.history.transfer",
    "astune.recommendation.reference": "astune.history.reference",
    "astune.recommendation.portfolio": "astune.history.portfolio",
    "astune.recommendation.portfolio_sources": "astune.history.portfolio_sources",
    "astune.recommendation.portfolio_space": "astune.history.portfolio_space",
    "astune.recommendation.trial_history": "astune.history.trial_history",
    "astune.recommendation.history": "astune.recommendation.delta_history",
}
"""Old dotted path -> the module's home since the third layout, or since issue 61 for the
modules of ``astune.tuning`` that went into its packages by job, or since issue 70 for the
history that starts a search (``astune.history``)."""
MOVED_PACKAGES: dict[str, str] = {
    "astune.search": "astune.tuning",
    "astune.recommend": "astune.recommendation",
    "astune.confirm": "astune.confirmation",
    "astune.export": "astune.exporting",
}
"""Old package -> its home since the fourth layout: the package and every module under it."""


def _next_home(name: str) -> str | None:
    """Where ``name`` went in one move (None: it did not move then)."""
    if name in MOVED:
        return MOVED[name]
    for old, new in MOVED_PACKAGES.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return None


def new_home(name: str) -> str | None:
    """Where the module once imported as ``name`` lives now (None: it did not move), through
    every move since: ``astune.search.stop`` became ``astune.tuning.stop`` in the fourth layout,
    which is ``astune.tuning.lifecycle.stop`` now."""
    seen = [name]
    while (nxt := _next_home(seen[-1])) is not None:
        if nxt in seen:
            raise RuntimeError("astune._moved maps in a circle: " + " -> ".join([*seen, nxt]))
        seen.append(nxt)
    return seen[-1] if len(seen) > 1 else None


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path and hands back the module of its new one (the same object)."""

    def __init__(self) -> None:
        self.specs: dict[str, ModuleSpec | None] = {}  # old path -> its module's own spec

    def find_spec(self, fullname: str, path: object, target: object = None) -> ModuleSpec | None:
        if new_home(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        new = new_home(spec.name)
        assert new is not None  # find_spec answered for it
        warnings.warn(
            f"{spec.name} moved to {new}; the old path goes in astune {REMOVED_IN}",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(new)
        self.specs[spec.name] = module.__spec__  # the import system sets the old path's over it
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run (the module executed when its new path was imported): its own spec
        back, so that it stays the module of its new path."""
        module.__spec__ = self.specs.pop(module.__spec__.name)


def install() -> None:
    """Put the finder first on ``sys.meta_path``, once: a renamed package's folder holds its
    modules, which the path finder would otherwise load a second time under the old names
    through the package's ``__path__``. It answers for the old paths alone."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedModules())
