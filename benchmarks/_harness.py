"""What the benchmark scripts share: where their results go and the line naming the machine they
ran on."""

from __future__ import annotations

import importlib
import os
import platform
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
"""The folder of the saved results (JSON, PNG) that benchmarks/RESULTS.md cites."""
SEARCH_LIBRARIES = ("ray", "optuna", "mlflow")
"""Besides torch, the libraries whose versions a search benchmark's numbers depend on."""


def machine_line(
    device: Any = "cpu", *, threads: int | None = None, libraries: tuple[str, ...] = ()
) -> str:
    """The machine a benchmark ran on, in one line: the GPU's name, or the CPU's model, its CPUs
    and (given) torch's ``threads``; then the versions of Python, torch and ``libraries``.
    ``device``: a torch device or its name, or "auto" (the GPU if there is one, as a config's)."""
    import torch

    if str(device) == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if torch.device(device).type == "cuda":
        where = torch.cuda.get_device_name()
    else:
        where = f"{cpu_model()}, {os.cpu_count()} CPUs"
        if threads is not None:
            where += f", {threads} torch thread{'s' if threads != 1 else ''}"
    versions = [f"Python {platform.python_version()}", f"torch {torch.__version__}"]
    versions += [f"{name} {importlib.import_module(name).__version__}" for name in libraries]
    return f"{where}; {', '.join(versions)}"


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
