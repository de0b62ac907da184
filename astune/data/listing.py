"""The registry as a text table, for the CLI's ``datasets`` subcommand."""

from __future__ import annotations

import os
from pathlib import Path

from astune.data.loading import ENV_DATA_DIR
from astune.data.registry import REGISTRY
from astune.data.spec import DatasetSpec

_HEADER = (
    "name",
    "task",
    "classes",
    "metric",
    "source",
    "local",
    "epochs/bs/lr",
    "delta/r",
    "lam/s",
    "paper softmax -> AS",
)


def format_datasets_table(data_dir: str | os.PathLike | None = None) -> str:
    """One line per registry entry; ``local`` says whether ``data_dir`` (default
    ``$ASTUNE_DATA_DIR``) holds a copy. Paper results are percentages; '-' where none."""
    root = data_dir if data_dir is not None else os.environ.get(ENV_DATA_DIR)
    rows = [_HEADER] + [_row(spec, root) for spec in REGISTRY.values()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADER))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    note = (
        "Also: a folder with train/validation/test (.jsonl, .csv or .parquet, or image/audio "
        "class folders <split>/<label>/<file>) and a dataset.json. Local copies: --data-dir "
        "DIR or " + ENV_DATA_DIR + " (DIR/<name>/)."
    )
    return "\n".join(lines + ["", note])


def _row(spec: DatasetSpec, root: str | os.PathLike | None) -> tuple[str, ...]:
    source = "local files only" if spec.local_only else spec.hub_source
    local = "yes" if root is not None and (Path(root) / spec.name).is_dir() else "no"
    metric = "/".join(spec.metrics)
    return (
        spec.name,
        spec.task,
        str(spec.num_labels),
        metric,
        source,
        local,
        _join(spec.epochs, spec.batch_size, spec.lr),
        _join(spec.delta, spec.warmup_ratio),
        _join(spec.lam, spec.max_accum_steps),
        _results(spec),
    )


def _join(*values: object) -> str:
    return (
        "-"
        if all(v is None for v in values)
        else "/".join("-" if v is None else f"{v:g}" for v in values)
    )


def _results(spec: DatasetSpec) -> str:
    if spec.softmax is None and spec.as_softmax is None:
        return "-"
    show = ["-" if v is None else f"{v:.2f}" for v in (spec.softmax, spec.as_softmax)]
    return " -> ".join(show)
