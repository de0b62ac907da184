"""A registry entry's hub source: ``datasets.load_dataset`` with the entry's config, revision and
data folder, and the hub's label ids mapped by name to the registry's.

``$ASTUNE_HUB_MIRROR`` names a local mirror of the hub for machines without it: the same call
then reads ``MIRROR/<repo id>/<revision>`` (``main`` when the entry names none), a snapshot as
``hf download REPO --repo-type dataset --revision REV --local-dir ...`` writes it, with its
``README.md`` configs and its data folders.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from astune.data.errors import DataError
from astune.data.spec import DatasetSpec

HUB_MIRROR_ENV = "ASTUNE_HUB_MIRROR"
PARQUET_EXPORT_REVISION = "refs/convert/parquet"  # the hub's parquet export of any repository
# What is known of the hub sources (hub_status): the hub's listings as of 2026-11, not loads run
# here (this project's machines cannot reach the hub); `astune datasets --check` checks them
# online, and the tests load the same layouts from a local mirror with datasets 5.
HUB_DATA_FILES = (
    "data files (no loading script) in the hub's listing of 2026-11; datasets 4+ reads those"
)
HUB_PARQUET_EXPORT = (
    "a script repository (datasets 4+ refuses it), read from the hub's parquet export at "
    "refs/convert/parquet (listing of 2026-11)"
)


def hub_load_call(spec: DatasetSpec) -> tuple[str, dict[str, str]]:
    """The path and keyword arguments of ``datasets.load_dataset`` for ``spec``'s hub source:
    its repository id with ``revision``, or its snapshot folder in the mirror (the revision is
    the folder then); ``name`` and ``data_dir`` as the entry gives them (None left out)."""
    if spec.hub_id is None:
        raise ValueError(f"dataset {spec.name!r} has no hub source.")
    kwargs = {"name": spec.hub_config, "data_dir": spec.hub_data_dir}
    mirror = os.environ.get(HUB_MIRROR_ENV)
    if mirror:
        path = str(Path(mirror) / spec.hub_id / (spec.hub_revision or "main"))
    else:
        path, kwargs["revision"] = spec.hub_id, spec.hub_revision
    return path, {key: value for key, value in kwargs.items() if value is not None}


def load_hub(spec: DatasetSpec) -> Any:
    """``spec``'s hub source as a ``datasets.DatasetDict``; DataError (one line) when the
    mirror lacks it; the errors of ``datasets`` otherwise (the caller words them)."""
    import datasets

    path, kwargs = hub_load_call(spec)
    if os.environ.get(HUB_MIRROR_ENV) and not Path(path).is_dir():
        raise DataError(
            f"{HUB_MIRROR_ENV} has no snapshot of {spec.hub_source}: expected the folder {path}"
        )
    return datasets.load_dataset(path, **kwargs)


def hub_label_names(spec: DatasetSpec, hub: Any) -> tuple[str, ...] | None:
    """The names of the label column's ClassLabel feature in the hub's train split (of its
    sequence, for token and multi-label columns), or None when it has none."""
    train = hub[spec.split_names.get("train") or "train"]
    feature = train.features.get(spec.label_column)
    names = getattr(getattr(feature, "feature", feature), "names", None)
    return tuple(names) if names else None


def map_labels_by_name(
    spec: DatasetSpec, hub_names: Sequence[str] | None
) -> tuple[DatasetSpec, list[int] | None]:
    """The spec to load with and the registry id of each hub label id (None: the ids agree).

    A registry entry without label names takes the hub's. One with names keeps its own ids:
    the hub's are mapped by name, and a hub name the registry lacks is a DataError."""
    if not hub_names:
        return spec, None
    if spec.label_names is None:
        names = tuple(hub_names)
        return dataclasses.replace(spec, label_names=names, num_labels=len(names)), None
    if tuple(hub_names) == spec.label_names:
        return spec, None
    index = {name: i for i, name in enumerate(spec.label_names)}
    unknown = [name for name in hub_names if name not in index]
    if unknown:
        shown = ", ".join(map(repr, unknown[:5])) + (" ..." if len(unknown) > 5 else "")
        raise DataError(
            f"hub:{spec.hub_source} has {spec.label_column} names {shown} that {spec.name!r} "
            f"lacks ({len(spec.label_names)} names in astune.data.registry); the hub's labels "
            "changed: bring the data as local files with their own dataset.json"
        )
    return spec, [index[name] for name in hub_names]


def remap_labels(rows: list[dict], column: str, ids: Sequence[int]) -> list[dict]:
    """``rows`` with each label id (an int, or a list of them) of ``column`` replaced by
    ``ids[id]``; values that are no label id (negative: ignored positions) stay."""

    def one(value: Any) -> Any:
        if isinstance(value, int) and 0 <= value < len(ids):
            return ids[value]
        return value

    out = []
    for row in rows:
        value = row.get(column)
        mapped = [one(v) for v in value] if isinstance(value, list) else one(value)
        out.append({**row, column: mapped})
    return out
