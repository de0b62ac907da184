"""What the benchmark scripts share: where their results go, the line naming the machine they
ran on, and the configs (TrainConfig, SearchSettings) they build from their flags."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import platform
import subprocess
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]
"""The checkout's root: the folder ``python -m benchmarks.<study>.<script>`` runs from."""
SEARCH_LIBRARIES = ("ray", "optuna", "mlflow")
"""Besides torch, the libraries whose versions a search benchmark's numbers depend on."""

FLAG_FIELDS = (
    "dataset",
    "data_dir",
    "space",
    "backbone",
    "num_layers",
    "max_length",
    "max_train_samples",
    "max_eval_samples",
    "epochs",
    "batch_size",
    "lr",
    "eval_every",
    "seed",
    "device",
    "precision",
    "compile",
    "num_samples",
    "max_concurrent",
    "cpus_per_trial",
)
"""The flags that mean the config field of their name in every script (``--max-train-samples``
is TrainConfig's and SearchSettings' ``max_train_samples``): what :func:`config_from_args`
copies."""

Config = TypeVar("Config")


def config_from_args(kind: type[Config], args: argparse.Namespace, **fields: Any) -> Config:
    """A validated ``kind`` (a dataclass with ``validate``: TrainConfig, SearchSettings) from the
    flags of ``args`` named in :data:`FLAG_FIELDS` that ``kind`` has, then ``fields`` (which win).
    """
    takes = {f.name for f in dataclasses.fields(kind)}  # type: ignore[arg-type]
    flags = vars(args)
    given = {name: flags[name] for name in FLAG_FIELDS if name in takes and name in flags}
    return kind(**{**given, **fields}).validate()  # type: ignore[attr-defined]


def add_scale_args(p: argparse.ArgumentParser, **defaults: Any) -> None:
    """``--backbone`` ... ``--threads``, the scale flags of the seed-comparison benchmarks;
    ``defaults`` overrides a flag's default by its dest."""
    flags = {
        "backbone": (str, "minilm", None),
        "num_layers": (int, 2, None),
        "max_train_samples": (int, 400, None),
        "max_eval_samples": (int, 200, None),
        "max_length": (int, 64, None),
        "epochs": (float, 3, None),
        "batch_size": (int, 16, None),
        "lr": (float, 5e-4, None),
        "eval_every": (int, 5, "optimizer steps between evaluations"),
        "threads": (int, None, "torch threads (default: torch's)"),
    }
    for dest, (kind, default, help_) in flags.items():
        flag = "--" + dest.replace("_", "-")
        p.add_argument(flag, type=kind, default=defaults.get(dest, default), help=help_)


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


OUTPUTS = (
    ":(exclude,glob)benchmarks/*/results/**",
    ":(exclude)benchmarks/search_efficiency/tables",
)
"""Git pathspecs of what benchmarks write: changes there do not make a checkout dirty."""


def commit() -> str:
    """The commit of this checkout (with ``+dirty`` when it has changes outside the studies'
    results/ folders and the tables, where a script's own outputs and the tables being recorded
    live)."""
    root = ROOT
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", ".", *OUTPUTS],
        cwd=root,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return head + ("+dirty" if dirty else "")
