"""Local files: split files (JSONL, CSV, Parquet) and the dataset.json that describes a folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from astune.data.errors import DataError
from astune.data.spec import TASK_METRICS
from astune.losses.catalogue import TASKS

FORMATS = (".jsonl", ".csv", ".parquet")
_JSON_KEYS = (
    "text_column",
    "text_pair_column",
    "tokens_column",
    "image_column",
    "audio_column",
    "label_column",
)


def split_file(folder: Path, split: str) -> Path:
    """The file holding ``split`` in ``folder``; DataError naming the accepted names if none."""
    for suffix in FORMATS:
        path = folder / f"{split}{suffix}"
        if path.is_file():
            return path
    accepted = ", ".join(f"{split}{s}" for s in FORMATS)
    raise DataError(f"split {split!r} not found in {folder}: expected one of {accepted}")


def read_rows(path: Path) -> list[dict[str, Any]]:
    """All rows of a JSONL, CSV or Parquet file as plain dicts (lists stay lists)."""
    if path.suffix == ".jsonl":
        return _read_jsonl(path)
    import pandas as pd

    try:
        frame = pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)
    except ValueError as err:  # pandas' ParserError, pyarrow's ArrowInvalid: a broken file
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        kind = "CSV" if path.suffix == ".csv" else "Parquet"
        raise DataError(f"{path} is not a readable {kind} file: {reason}") from None
    rows = frame.to_dict("records")
    for row in rows:  # Parquet list cells come back as numpy arrays
        for key, value in row.items():
            if hasattr(value, "tolist"):
                row[key] = value.tolist()
    return rows


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{path} line {number} is not valid JSON: {err.msg}") from None
            if not isinstance(row, dict):
                raise DataError(f"{path} line {number} must be a JSON object, got {row!r:.60}")
            rows.append(row)
    return rows


def read_dataset_json(folder: Path) -> dict[str, Any]:
    """The checked contents of ``folder/dataset.json`` as DatasetSpec keyword arguments.

    Only task, the column keys, label_names, num_labels and metric are read; other keys (source,
    licence, split sizes) are ignored; absent ones stay absent. ``num_labels`` is absent when the
    file gives neither it nor label_names (it is then counted from the data).
    """
    path = folder / "dataset.json"
    if not path.is_file():
        raise DataError(
            f"{folder} has no dataset.json; write one naming 'task' (one of "
            f"{', '.join(TASKS)}), the columns ({', '.join(_JSON_KEYS)}) and 'label_names'"
        )
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataError(f"{path} is not valid JSON: {err.msg} (line {err.lineno})") from None
    if not isinstance(raw, dict):
        raise DataError(f"{path} must hold a JSON object, got {type(raw).__name__}")
    return _spec_fields(raw, path)


def _spec_fields(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    task = raw.get("task")
    if task not in TASKS:
        raise DataError(f"{path}: 'task' must be one of {', '.join(TASKS)}, but got {task!r}")
    fields: dict[str, Any] = {"task": task}
    for key in _JSON_KEYS:
        if key in raw:
            if not isinstance(raw[key], str) or not raw[key]:
                raise DataError(f"{path}: {key!r} must be a column name, but got {raw[key]!r}")
            fields[key] = raw[key]
    names = raw.get("label_names")
    if names is not None:
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise DataError(f"{path}: 'label_names' must be a non-empty list of strings")
        fields["label_names"] = tuple(names)
        fields["num_labels"] = len(names)
    elif "num_labels" in raw:
        n = raw["num_labels"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise DataError(f"{path}: 'num_labels' must be an integer >= 1, but got {n!r}")
        fields["num_labels"] = n
    if "metric" in raw:
        if raw["metric"] not in TASK_METRICS[task]:  # what the task's evaluation computes
            accepted = ", ".join(TASK_METRICS[task])
            got = raw["metric"]
            raise DataError(
                f"{path}: 'metric' must be one of {accepted} for task {task!r}, but got {got!r}"
            )
        fields["metric"] = raw["metric"]
    return fields
