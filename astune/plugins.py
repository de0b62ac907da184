"""A user's own losses without forking astune: plugin modules that register them.

A plugin is a module that calls :func:`astune.losses.catalogue.register_loss` when imported
(``@register_loss(...)`` on its class). It is named by its import name (``my_losses``) or by
the path of its file (``./my_losses.py``) in ``--plugin`` of ``train``, ``search`` and
``confirm``, in ``plugins=`` of the Python API and in a config's ``plugins`` key; or a package
declares it once in its metadata, as pytest and MLflow plugins do::

    [project.entry-points."astune.plugins"]
    my_losses = "my_package.losses"

Every plugin a run names is imported before anything of the run is checked, in the driver and
again in each trial's process (a search ships the plugins' files to every node); one that fails
to import is one line naming it.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType

ENTRY_POINT_GROUP = "astune.plugins"
"""The entry-point group a package declares its plugin modules in."""

_LOADED: dict[str, ModuleType] = {}


class PluginError(ValueError):
    """A plugin that cannot be imported, or whose registration is malformed (one line)."""


def is_path(name: str) -> bool:
    """Whether ``name`` names a file (``*.py`` or a path) rather than an importable module."""
    return name.endswith(".py") or "/" in name or "\\" in name


def plugin_names(value: object) -> tuple[str, ...]:
    """``value`` (a list of names, or one comma-separated string) as a tuple of plugin names;
    PluginError naming it otherwise."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(
        isinstance(i, str) and i.strip() for i in items
    ):
        raise PluginError(f"plugins must be a list of module names or .py paths, but got {value!r}")
    return tuple(str(Path(i.strip()).resolve()) if is_path(i) else i.strip() for i in items)


def load_plugins(names: Iterable[str] = (), *, installed: bool = True) -> tuple[ModuleType, ...]:
    """Import each of ``names`` (module names or ``.py`` paths) once, and with ``installed``
    every module of the :data:`ENTRY_POINT_GROUP` group; PluginError (one line naming the
    plugin) for one that fails to import or register."""
    modules = [load_plugin(name) for name in names]
    if installed:
        for name, value in _installed():
            modules.append(load_plugin(value, label=f"entry point {name!r}"))
    return tuple(modules)


@functools.cache
def _installed() -> tuple[tuple[str, str], ...]:
    """The :data:`ENTRY_POINT_GROUP` group's (name, module) pairs, read from the installed
    packages' metadata once a process (every config check asks)."""
    return tuple((point.name, point.value) for point in entry_points(group=ENTRY_POINT_GROUP))


def load_plugin(name: str, *, label: str | None = None) -> ModuleType:
    """The plugin ``name`` imported (once); ``label`` names it in an error."""
    key = str(Path(name).resolve()) if is_path(name) else name
    if key in _LOADED:
        return _LOADED[key]
    where = label or f"plugin {name!r}"
    # A path the driver named is not on a cluster's other nodes: there its file, shipped by
    # Ray's runtime environment, imports by its stem.
    by_file = is_path(name) and (Path(name).is_file() or not _importable(Path(name).stem))
    try:
        module = _import_file(Path(name)) if by_file else importlib.import_module(_stem(name))
    except PluginError:
        raise
    except Exception as err:  # any failure of a user's module is that module's, in one line
        first = (str(err).splitlines() or [""])[0]
        raise PluginError(f"{where}: cannot import it ({type(err).__name__}: {first})") from None
    _LOADED[key] = module
    return module


def _stem(name: str) -> str:
    return Path(name).stem if is_path(name) else name


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _import_file(path: Path) -> ModuleType:
    """The module of the file at ``path``, imported under its file's stem."""
    if not path.is_file():
        raise FileNotFoundError(f"no such file {path}")
    spec = importlib.util.spec_from_file_location(path.stem, path.resolve())
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # pickled objects of it find it by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(path.stem, None)
        raise
    return module


def shipped_paths(names: Iterable[str]) -> list[str]:
    """The files or package folders of the plugins ``names`` (already loaded) that a cluster's
    workers need: what Ray's runtime environment ``py_modules`` uploads to every node."""
    out = []
    for name in names:
        load_plugin(name)
        top = sys.modules[_stem(name).split(".")[0]]  # a package ships whole
        origin = Path(top.__file__ or "")
        out.append(str((origin.parent if origin.name == "__init__.py" else origin).resolve()))
    return list(dict.fromkeys(out))
