"""The import graph of ``astune/``: no circles, between files or between packages, and
dependencies pointing one way (docs/architecture.md, "Floors"); and no circle anywhere else in
the repository either: ``benchmarks/`` (one package per study) and the tests' helpers.

The graph is read from the source with ``ast`` (module-level, function-level and TYPE_CHECKING
imports alike), so a lazy or type-only import cannot hide a circle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "astune"
BENCHMARKS = ROOT / "benchmarks"
TESTS = ROOT / "tests"

# Lower floors first: a module may import its own floor and those below, never one above.
FLOORS = (
    (
        "astune._checks",
        "astune._text",
        "astune.run_folder",
        "astune._device",
        "astune._private",
        "astune._signals",
        "astune._lazy",
        "astune._moved",
        "astune.losses.catalogue",
        "astune.checkpoint_policy",
        "astune.plugins",
    ),
    ("astune.losses", "astune.speed", "astune.metrics"),
    ("astune.data", "astune.backbones", "astune.config"),
    ("astune.training",),
    ("astune.space", "astune.store", "astune.history"),
    (
        "astune.tuning",
        "astune.confirmation",
        "astune.exporting",
        "astune.recommendation",
        "astune.analysis",
    ),
    ("astune.api",),
    ("astune.cli", "astune.__main__"),
)
READERS = (
    "astune.exporting",
    "astune.history",
    "astune.recommendation",
    "astune.analysis",
    "astune.store",
    "astune.confirmation",
    "astune.space",
)


def _module_name(path: Path, top: Path = ROOT) -> str:
    """The dotted name ``path`` imports as when ``top`` is on ``sys.path``."""
    parts = path.relative_to(top).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports: ``from pkg import sub`` is an edge to
    ``pkg.sub`` when that is a module, else to ``pkg``; names are cut back to the longest existing
    module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    return {_existing(m, modules) for m in found} - {None, name}


def import_graph(folder: Path = PACKAGE, top: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules it imports, for the modules under ``folder`` as they import with
    ``top`` on ``sys.path`` (edges to modules outside ``folder`` dropped)."""
    files = {_module_name(p, top): p for p in folder.rglob("*.py") if "__pycache__" not in p.parts}
    return {name: _imports(path, name, set(files)) for name, path in files.items()}


def _existing(module: str, modules: set[str]) -> str | None:
    while module and module not in modules:
        module = module.rpartition(".")[0]
    return module or None


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def floor_of(module: str) -> int:
    if module == "astune":  # the package's own __init__ re-exports the API
        return floor_of("astune.api")
    for level, prefixes in enumerate(FLOORS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return level
    raise AssertionError(f"{module} is on no floor of tests/test_imports.py: add it to FLOORS")


def unit_of(module: str) -> str:
    """The package or root module that ``module`` belongs to: ``astune.data.spec`` ->
    ``astune.data``; ``astune.config`` -> itself."""
    return ".".join(module.split(".")[:2])


def unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph between packages and root modules (imports inside one dropped)."""
    units: dict[str, set[str]] = {}
    for source, targets in graph.items():
        outside = {unit_of(t) for t in targets} - {unit_of(source)}
        units.setdefault(unit_of(source), set()).update(outside)
    return units


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle() -> None:
    graph = import_graph()
    assert len(graph) > 30  # the walk found the package
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_no_import_circle_in_the_benchmarks_or_the_tests_helpers() -> None:
    """The studies import as ``benchmarks.<study>.<module>`` from the root; the tests' helpers by
    their bare names, ``tests/`` being on ``sys.path`` under pytest."""
    for graph in (import_graph(BENCHMARKS), import_graph(TESTS, TESTS)):
        assert len(graph) > 10  # the walk found the modules
        cycle = find_cycle(graph)
        assert cycle is None, "import circle: " + " -> ".join(cycle or [])
    studies = unit_graph(import_graph(BENCHMARKS))
    cycle = find_cycle(studies)
    assert cycle is None, "circle between studies: " + " -> ".join(cycle or [])


def test_the_package_imports_no_benchmark_or_test() -> None:
    """astune depends on no output or helper of the repository around it (the packaged prior is
    a data file built by a study, never an import of one)."""
    outside = sorted(
        f"{name} imports {top}"
        for name, path in ((_module_name(p), p) for p in PACKAGE.rglob("*.py"))
        for top in _third_party(path) & {"benchmarks", "tests"}
    )
    assert outside == []


def test_no_benchmark_edits_sys_path() -> None:
    """A study runs as a module (``python -m benchmarks.<study>.<script>``), so none needs to
    put a folder on ``sys.path`` by hand."""
    editing = sorted(
        str(p.relative_to(ROOT)) for p in BENCHMARKS.rglob("*.py") if "sys.path" in p.read_text()
    )
    assert editing == []


def test_no_circle_between_packages_or_root_modules() -> None:
    """A circle between packages is one between floors' rooms even where no two files import
    each other (``data.registry`` -> ``backbones`` -> ``data.spec`` was one)."""
    planted = {"astune.a.x": {"astune.b.y"}, "astune.b.y": set(), "astune.b.z": {"astune.a.w"}}
    assert find_cycle(unit_graph(planted)) == ["astune.a", "astune.b", "astune.a"]
    cycle = find_cycle(unit_graph(import_graph()))
    assert cycle is None, "circle between packages: " + " -> ".join(cycle or [])


def test_imports_point_down_the_floors() -> None:
    graph = import_graph()
    upward = [
        f"{source} (floor {floor_of(source)}) imports {target} (floor {floor_of(target)})"
        for source, targets in sorted(graph.items())
        for target in sorted(targets)
        if floor_of(target) > floor_of(source)
    ]
    assert upward == []


def test_only_search_imports_ray() -> None:
    """Ray lives in ``astune.tuning`` alone (docs/architecture.md): read from the source, lazy
    imports too.
    ``astune._private`` holds the private Ray calls that search makes (one place for them all)."""
    importers = sorted(
        name
        for name, path in ((_module_name(p), p) for p in PACKAGE.rglob("*.py"))
        if "ray" in _third_party(path)
        and not name.startswith("astune.tuning")
        and name != "astune._private"
    )
    assert importers == []


def _third_party(path: Path) -> set[str]:
    """The top-level names of the absolute imports in ``path``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("module", READERS)
def test_readers_never_import_ray(module: str) -> None:
    code = f"import sys, {module}; print(sorted(m for m in ('ray', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "'ray'" not in out.stdout, f"{module} imports Ray"
