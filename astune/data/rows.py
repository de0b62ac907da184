"""Checking raw rows and turning them into the canonical row form every source shares.

Canonical rows have the keys ``text`` (and ``text_pair`` for pairs), ``tokens`` or ``path``
(image and audio files; audio adds ``sampling_rate``), and ``label``: an int (single_label,
pair, image, audio), a list of word tag ids (token) or a sorted list of label ids
(multi_label).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from numbers import Integral
from pathlib import Path
from typing import Any

from astune.data.errors import DataError
from astune.data.media import media_item
from astune.data.spec import DatasetSpec
from astune.losses.catalogue import MEDIA_TASKS
from astune.metrics.scores import IGNORE_INDEX

_LIST_LABELS = ("token", "multi_label")


def check_columns(rows: Sequence[dict[str, Any]], columns: Sequence[str], where: str) -> None:
    """DataError naming the first of ``columns`` missing from a row, and the columns present."""
    for number, row in enumerate(rows, 1):
        for column in columns:
            if column not in row:
                present = ", ".join(map(str, row)) or "(none)"
                at = "" if number == 1 else f" (row {number})"
                raise DataError(
                    f"column {column!r} not found in {where}{at}; columns present: {present}"
                )


def infer_label_space(
    splits: dict[str, Sequence[dict[str, Any]]], task: str, column: str
) -> tuple[int, tuple[str, ...] | None]:
    """``(num_labels, label_names)`` seen in the data: the sorted names if labels are strings,
    else ``max id + 1`` with no names."""
    values = []
    for rows in splits.values():
        for row in rows:
            if is_missing(row[column]):
                continue  # normalize_rows names the row; it is no class
            value = _as_list(row[column]) if task in _LIST_LABELS else row[column]
            values.extend(value if isinstance(value, list) else [value])
    if any(isinstance(v, str) for v in values):
        names = tuple(sorted({str(v) for v in values}))
        return len(names), names
    ids = [int(v) for v in values if isinstance(v, (Integral, float)) and not _is_nan(v)]
    return max(max(ids, default=0) + 1, 1), None


def normalize_rows(
    rows: Sequence[dict[str, Any]], spec: DatasetSpec, where: str, root: Path | None = None
) -> list[dict]:
    """Canonical rows of ``rows``; DataError naming the row and value that breaks the spec.

    Image and audio rows become ``{"path", "label"}`` (audio adds ``"sampling_rate"``), with
    relative paths taken from ``root``; each file's header is opened here (``astune.data.media``).
    """
    if not rows:
        raise DataError(f"{where} has no rows")
    check_columns(rows, spec.required_columns(), where)
    names = {n: i for i, n in enumerate(spec.label_names or ())}
    out = []
    for number, row in enumerate(rows, 1):
        at = f"{where} (row {number})"
        _check_present(row, spec, at)
        label = row[spec.label_column]
        if spec.task == "token":
            tokens = _tokens(row[spec.tokens_column], spec.tokens_column, at)
            tags = [  # an ignored token (-100) stays ignored: no loss, no score
                IGNORE_INDEX if v == IGNORE_INDEX else _label_id(v, names, spec.num_labels, at)
                for v in _label_list(label, at)
            ]
            if len(tags) != len(tokens):
                raise DataError(
                    f"{at} has {len(tokens)} tokens but {len(tags)} labels; they must match"
                )
            out.append({"tokens": tokens, "label": tags})
            continue
        if spec.task in MEDIA_TASKS:
            label_id = _label_id(label, names, spec.num_labels, at)
            column = spec.required_columns()[0]
            out.append({**media_item(row[column], root, spec.task, at), "label": label_id})
            continue
        item = {"text": _text(row[spec.text_column], spec.text_column, at)}
        if spec.task == "pair":
            item["text_pair"] = _text(row[spec.text_pair_column], spec.text_pair_column, at)
        if spec.task == "multi_label":
            ids = {_label_id(v, names, spec.num_labels, at) for v in _label_list(label, at)}
            item["label"] = sorted(ids)
        else:
            item["label"] = _label_id(label, names, spec.num_labels, at)
        out.append(item)
    return out


def _check_present(row: dict[str, Any], spec: DatasetSpec, at: str) -> None:
    """DataError when a cell the task reads (label, text, tokens, file) holds no value."""
    for column in spec.required_columns():
        if is_missing(row[column]):
            raise DataError(
                f"{at}: {column!r} is missing (an empty cell, a null); every row needs a value "
                f"in {column!r}"
            )


def is_missing(value: Any) -> bool:
    """A cell without a value: JSON null or Parquet's empty value (None), an empty CSV cell
    (pandas' NaN, or its NA / NaT in typed columns)."""
    return value is None or _is_nan(value) or type(value).__name__ in ("NAType", "NaTType")


def _label_id(value: Any, names: dict[str, int], num_labels: int, at: str) -> int:
    if isinstance(value, str) and names:
        if value not in names:
            shown = ", ".join(list(names)[:10]) + (", ..." if len(names) > 10 else "")
            raise DataError(f"label {value!r} in {at} is not one of label_names ({shown})")
        return names[value]
    is_int = isinstance(value, Integral) and not isinstance(value, bool)
    if not is_int and not (isinstance(value, float) and value.is_integer()):
        raise DataError(
            f"label {value!r} in {at} must be an integer class id in [0, {num_labels - 1}]"
        )
    if not 0 <= value < num_labels:
        raise DataError(
            f"label {int(value)} in {at} is out of range; accepted: "
            f"[0, {num_labels - 1}] (num_labels={num_labels})"
        )
    return int(value)


def _label_list(value: Any, at: str) -> list:
    value = _as_list(value)
    if not isinstance(value, list):
        raise DataError(f"labels in {at} must be a list of class ids, but got {value!r:.60}")
    return value


def _as_list(value: Any) -> Any:
    """Lists stored as JSON text (CSV cells) become lists; anything else is returned as is."""
    if isinstance(value, str) and value.startswith("["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return list(value) if isinstance(value, tuple) else value


def _text(value: Any, column: str, at: str) -> str:
    if not isinstance(value, str):
        raise DataError(f"column {column!r} in {at} must hold text, but got {value!r:.60}")
    return value


def _tokens(value: Any, column: str, at: str) -> list[str]:
    value = _as_list(value)
    if not isinstance(value, list) or not value or not all(isinstance(t, str) for t in value):
        raise DataError(
            f"column {column!r} in {at} must hold a non-empty list of words, but got {value!r:.60}"
        )
    return value


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)
