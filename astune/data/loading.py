"""Loading a dataset's train/validation/test rows from a local folder or the Hugging Face hub.

Sources, in order: ``data_dir/<name>``, then ``$ASTUNE_DATA_DIR/<name>``, then the registry
entry's hub id. ``name_or_path`` may also be a folder of the user's own data with a dataset.json
(which of the two a value is: :func:`astune.data.resolve.resolve_dataset`). A folder without a
validation split gets one carved from train: seeded, stratified by label, ``validation_fraction``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astune._checks import check_int
from astune.config import TRAIN_FIELDS
from astune.data.errors import DataError
from astune.data.files import read_dataset_json, read_rows, split_file
from astune.data.media import (
    check_class_labels,
    class_folder_rows,
    default_media_columns,
    has_class_folders,
    infer_media_task,
)
from astune.data.resolve import DatasetRef, resolve_dataset
from astune.data.rows import check_columns, infer_label_space, normalize_rows
from astune.data.spec import SPLITS, DatasetSpec, column_keys
from astune.losses.catalogue import MEDIA_TASKS

logger = logging.getLogger(__name__)

ENV_DATA_DIR = "ASTUNE_DATA_DIR"
CARVE_SEED = 0  # fixed, so every trial and every run sees the same carved validation split


@dataclass
class LoadedData:
    """The rows of one dataset. ``splits`` maps train/validation/test to canonical rows (see
    ``astune.data.rows``); ``source`` is the local folder path or ``hub:<id>[<config>]``."""

    spec: DatasetSpec
    splits: dict[str, list[dict[str, Any]]]
    source: str
    notes: tuple[str, ...] = ()

    def sizes(self) -> dict[str, int]:
        return {name: len(rows) for name, rows in self.splits.items()}


def load_dataset_splits(
    name_or_path: str | os.PathLike | DatasetRef,
    *,
    data_dir: str | os.PathLike | None = None,
    max_train_samples: int | None = None,
    max_eval_samples: int | None = None,
    seed: int = 0,
    validation_fraction: float = TRAIN_FIELDS["validation_fraction"].default,
) -> LoadedData:
    """Load, check and subset a dataset (a ``--dataset`` value, or one resolved already);
    DataError (a ValueError) before any training if bad.

    ``max_train_samples`` / ``max_eval_samples`` keep a random subset of that size drawn with
    ``seed`` (rows stay in file order); the eval limit applies to validation and test each.
    A folder without a validation split gets ``validation_fraction`` of train, stratified by
    label with a fixed seed; ``notes`` and a logged warning say so.
    """
    for key, value in (
        ("max_train_samples", max_train_samples),
        ("max_eval_samples", max_eval_samples),
    ):
        if value is not None:
            check_int(key, value, 1)
    check_int("seed", seed)
    TRAIN_FIELDS["validation_fraction"].check(validation_fraction)
    ref = name_or_path if isinstance(name_or_path, DatasetRef) else resolve_dataset(name_or_path)
    loaded = _load_full(ref, data_dir, validation_fraction)
    for note in loaded.notes:
        logger.warning(note)
    limits = {"train": max_train_samples, "validation": max_eval_samples, "test": max_eval_samples}
    splits = {s: _subset(rows, limits[s], seed) for s, rows in loaded.splits.items()}
    return dataclasses.replace(loaded, splits=splits)


def _load_full(ref: DatasetRef, data_dir: str | os.PathLike | None, fraction: float) -> LoadedData:
    if ref.folder is not None:
        return _load_folder(ref.folder, None, fraction)
    candidates = local_candidates(ref.name, data_dir)
    for folder in candidates:
        if folder.is_dir():
            return _load_folder(folder, ref.spec, fraction)
    return _load_hub(ref.spec, candidates)


def local_candidates(name: str, data_dir: str | os.PathLike | None = None) -> list[Path]:
    """The folders looked at for ``name``: ``data_dir/name``, then ``$ASTUNE_DATA_DIR/name``."""
    roots = []
    if data_dir is not None:
        if not Path(data_dir).is_dir():
            raise DataError(
                f"data_dir {str(data_dir)!r} is not a folder; expected a folder "
                f"holding <name>/train.jsonl, validation.jsonl, test.jsonl"
            )
        roots.append(Path(data_dir))
    if os.environ.get(ENV_DATA_DIR):
        roots.append(Path(os.environ[ENV_DATA_DIR]))
    out: list[Path] = []
    for root in roots:
        if root / name not in out:
            out.append(root / name)
    return out


def _load_folder(folder: Path, base: DatasetSpec | None, fraction: float) -> LoadedData:
    """Rows of ``folder/{train,validation,test}.*``; columns from its dataset.json if present;
    a missing validation split is carved from train (``fraction``, stratified, fixed seed)."""
    fields, notes = _folder_fields(folder, base)
    task = fields.get("task", base.task if base is not None else None)
    if task in MEDIA_TASKS and any(has_class_folders(folder, s) for s in SPLITS):
        fields = {**default_media_columns(task), **fields}
    present = [s for s in SPLITS if s != "validation" or _has_split(folder, s)]
    paths, raw = {}, {}
    for split in present:
        paths[split], raw[split] = _split_rows(folder, split, task, fields)
    names_given = "label_names" in fields or (base is not None and base.label_names)
    if task in MEDIA_TASKS and not names_given:
        _check_class_folders(folder, fields, raw)
    transform = _HUB_TRANSFORMS.get(base.hub_transform or "") if base is not None else None
    if transform is not None:  # a local copy with the hub's columns
        raw = {s: [transform(row) for row in rows] for s, rows in raw.items()}
    spec = _folder_spec(folder, fields, base, raw, paths)
    splits = {s: normalize_rows(raw[s], spec, str(paths[s]), folder) for s in present}
    if "validation" not in splits:
        n_train = len(splits["train"])
        splits.update(carve_validation(splits["train"], fraction))
        if not splits["validation"]:  # nothing to evaluate on: never a silent empty split
            raise DataError(
                f"{folder} has no validation split, and {fraction:g} of its {n_train} train "
                "rows (per label, rounded) is none; add a validation split or raise "
                "--validation-fraction"
            )
        notes += (
            f"{folder} has no validation split: carved {len(splits['validation'])} of its "
            f"{n_train} train rows ({fraction:g}, stratified by label, seed {CARVE_SEED}) as "
            f"validation; set the share with --validation-fraction",
        )
    splits = {s: splits[s] for s in SPLITS}
    return LoadedData(spec=spec, splits=splits, source=str(folder), notes=notes)


def _folder_fields(folder: Path, base: DatasetSpec | None) -> tuple[dict, tuple[str, ...]]:
    """The DatasetSpec fields of ``folder``'s dataset.json (none for a registry copy without
    one), or for class folders without one the task their files make, and the note saying so."""
    has_json = (folder / "dataset.json").is_file()
    if base is None and not has_json and has_class_folders(folder, "train"):
        task = infer_media_task(folder)
        return {"task": task}, (f"{folder} has no dataset.json: task {task!r}, from its files",)
    return (read_dataset_json(folder) if base is None or has_json else {}), ()


def _check_class_folders(folder: Path, fields: dict, raw: dict[str, list[dict]]) -> None:
    """Where train's class folders define the classes (every split in class folders, no
    label_names), a class only another split has would mean nothing: DataError naming it."""
    if all(has_class_folders(folder, split) for split in raw):
        label = fields.get("label_column", "label")
        check_class_labels(folder, {s: {row[label] for row in rows} for s, rows in raw.items()})


def _split_rows(folder: Path, split: str, task: str | None, fields: dict) -> tuple[Path, list]:
    """The file (or class folder) of ``split`` and its raw rows."""
    if task in MEDIA_TASKS and has_class_folders(folder, split):
        column = fields[column_keys(task)[0]]
        rows = class_folder_rows(folder, split, task, column)
        label = fields.get("label_column", "label")
        return folder / split, [{column: r[column], label: r["label"]} for r in rows]
    path = split_file(folder, split)
    return path, read_rows(path)


def _has_split(folder: Path, split: str) -> bool:
    if has_class_folders(folder, split):
        return True
    try:
        split_file(folder, split)
    except DataError:
        return False
    return True


def carve_validation(train: list[dict], fraction: float) -> dict[str, list[dict]]:
    """Split canonical ``train`` rows into ``train`` and ``validation``: ``round(fraction * n)``
    rows of each class (token and multi-label rows, whose labels are lists: one group) drawn
    with :data:`CARVE_SEED`; both keep the file order."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(train):
        label = row.get("label")
        groups[repr(label) if isinstance(label, int) else ""].append(i)
    rng = random.Random(CARVE_SEED)
    taken: set[int] = set()
    for key in sorted(groups):
        members = groups[key]
        rng.shuffle(members)
        taken.update(members[: round(fraction * len(members))])
    return {
        "train": [row for i, row in enumerate(train) if i not in taken],
        "validation": [row for i, row in enumerate(train) if i in taken],
    }


def _folder_spec(
    folder: Path, fields: dict, base: DatasetSpec | None, raw: dict, paths: dict
) -> DatasetSpec:
    if base is not None:
        if fields.get("task", base.task) != base.task:
            raise DataError(
                f"{folder / 'dataset.json'} says task {fields['task']!r} but "
                f"{base.name!r} is a {base.task!r} dataset"
            )
        fields = {k: v for k, v in fields.items() if k != "task"}
        if "num_labels" in fields and "label_names" not in fields:
            fields["label_names"] = None
        return dataclasses.replace(base, **fields)
    missing = [k for k in column_keys(fields["task"]) if k not in fields]
    if missing:
        raise DataError(
            f"{folder / 'dataset.json'} must name {', '.join(map(repr, missing))} "
            f"for task {fields['task']!r}"
        )
    if "num_labels" not in fields:
        for split, rows in raw.items():
            check_columns(rows, [fields["label_column"]], str(paths[split]))
        num, names = infer_label_space(raw, fields["task"], fields["label_column"])
        fields = {**fields, "num_labels": num, "label_names": names}
    return DatasetSpec(name=folder.name, **fields)


def load_hub_splits(spec: DatasetSpec) -> LoadedData:
    """``spec``'s rows from its hub source alone, no local folder looked at (``astune prepare
    data``); DataError in one line when it cannot be read."""
    return _load_hub(spec, None)


def _load_hub(spec: DatasetSpec, tried: list[Path] | None) -> LoadedData:
    """Rows of ``spec``'s hub source (:mod:`astune.data.hub`), split as ``spec.split_names``,
    label ids as the registry's; a local-only entry fails at once, naming where to get it.
    ``tried``: the local folders looked at first (None: the hub was asked for, alone)."""
    from astune.data.hub import hub_label_names, load_hub, map_labels_by_name, remap_labels

    looked = ", ".join(str(p) for p in tried or ()) or "no data dir set"
    no_copy = "" if tried is None else f"no local copy of {spec.name!r} (looked in: {looked}) and "
    layout = "train.jsonl, validation.jsonl, test.jsonl"
    if spec.task in MEDIA_TASKS:
        layout = f"{{train,validation,test}}/<label>/<{spec.task} file>, or {layout} naming files"
    hint = (
        f"point at local files with --data-dir DIR or {ENV_DATA_DIR} (DIR/{spec.name}/{layout}), "
        "or pass --dataset FOLDER (a folder with a dataset.json)"
    )
    if spec.local_only:
        where = f"; the data: {spec.data_source}" if spec.data_source else ""
        raise DataError(
            f"{no_copy or f'{spec.name!r} has '}no hub source known to load with datasets >= 4, "
            f"so it is local-only{where}; {hint}"
        )
    source = f"hub:{spec.hub_source}"
    try:
        hub = load_hub(spec)
    except DataError:
        raise
    except Exception as err:  # offline: ConnectionError; missing repo: DatasetNotFoundError
        reason = " ".join(f"{type(err).__name__}: {err}".split())[:300]
        raise DataError(
            f"{no_copy}{source} could not be loaded ({reason})" + (f"; {hint}" if no_copy else "")
        ) from err
    spec, ids = map_labels_by_name(spec, hub_label_names(spec, hub))
    raw = _hub_splits(spec, hub)
    if ids is not None:
        raw = {s: remap_labels(rows, spec.label_column, ids) for s, rows in raw.items()}
    splits = {s: normalize_rows(raw[s], spec, f"{source} split {s}") for s in SPLITS}
    return LoadedData(spec=spec, splits=splits, source=source)


def _hub_splits(spec: DatasetSpec, hub: Any) -> dict[str, list[dict]]:
    """Hub splits by ``spec.split_names``; splits mapped to None are carved from train."""
    raw = {}
    for split in SPLITS:
        hub_name = spec.split_names.get(split)
        if hub_name is not None:
            if hub_name not in hub:
                raise DataError(
                    f"hub:{spec.hub_source} has no split {hub_name!r}; it has {', '.join(hub)}"
                )
            raw[split] = hub[hub_name].to_list()
    carved = [s for s in ("test", "validation") if s not in raw]
    raw.update(_carve(raw["train"], carved, spec.holdout_fraction))
    transform = _HUB_TRANSFORMS.get(spec.hub_transform or "", None)
    if transform is not None:
        raw = {s: [transform(row) for row in rows] for s, rows in raw.items()}
    return raw


def _carve(train: list[dict], names: list[str], fraction: float) -> dict[str, list[dict]]:
    """Take ``fraction`` of the remaining train rows for each of ``names`` in turn (fixed seed);
    returns the carved splits and the rest as ``train``, both in the original order."""
    if not names:
        return {"train": train}
    order = list(range(len(train)))
    random.Random(CARVE_SEED).shuffle(order)
    out = {}
    for name in names:
        n = round(fraction * len(order))
        out[name], order = [train[i] for i in sorted(order[:n])], order[n:]
    out["train"] = [train[i] for i in sorted(order)]
    return out


def _wos_two_levels(row: dict) -> dict:
    """WOS-46985 as 141-way multi-label: the domain (7) and the area (134, offset by 7); a row
    that has its ``labels`` already is left as it is."""
    if "labels" in row or "label_level_1" not in row:
        return row
    return {**row, "labels": [row["label_level_1"], 7 + row["label"]]}


_HUB_TRANSFORMS = {"wos_two_levels": _wos_two_levels}


def _subset(rows: list[dict], limit: int | None, seed: int) -> list[dict]:
    if limit is None or limit >= len(rows):
        return rows
    keep = sorted(random.Random(seed).sample(range(len(rows)), limit))
    return [rows[i] for i in keep]
