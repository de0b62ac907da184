"""The one reading of a ``--dataset`` value: a folder of the user's own data, or a registry name.

Precedence: a value naming an existing folder that holds a ``dataset.json`` or split files
(``train.jsonl``/``.csv``/``.parquet``) is that folder, even when it is also a registry name
(``./sst5`` next to you wins over the registry's ``sst5``); anything else is a registry name,
and an unknown one is an error listing the known names. Every command (``train``, ``search``,
``recommend``) resolves the value here, so they all read the same data and tag it the same.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from astune.backbones.registry import DEFAULT_BACKBONE
from astune.data.registry import get_spec
from astune.data.spec import DatasetSpec
from astune.losses.catalogue import MEDIA_TASKS

_MARKERS = ("dataset.json", "train.jsonl", "train.csv", "train.parquet")


@dataclass(frozen=True)
class DatasetRef:
    """A resolved ``--dataset``: ``name`` tags runs and names experiments; ``folder`` is the
    user's folder (absolute) or None; ``spec`` the registry entry or None for a folder."""

    name: str
    folder: Path | None = None
    spec: DatasetSpec | None = None

    @property
    def is_folder(self) -> bool:
        return self.folder is not None

    @property
    def registry_name(self) -> str | None:
        """The registry name, or None for a user folder (no packaged search space)."""
        return None if self.folder is not None else self.name


def is_dataset_folder(value: str | os.PathLike) -> bool:
    """Whether ``value`` is a folder holding a dataset.json, a train split file or a ``train``
    folder of class folders (the imagefolder/audiofolder layout)."""
    path = Path(value)
    if not path.is_dir():
        return False
    return any((path / marker).is_file() for marker in _MARKERS) or (path / "train").is_dir()


def resolve_dataset(value: str | os.PathLike) -> DatasetRef:
    """Resolve ``value`` by the module docstring's precedence; ValueError for an unknown name."""
    if is_dataset_folder(value):
        folder = Path(value).resolve()
        return DatasetRef(name=folder.name, folder=folder)
    spec = get_spec(str(value))  # raises the unknown-dataset error, listing the known names
    return DatasetRef(name=spec.name, spec=spec)


def default_backbone(backbone: str, spec: DatasetSpec | None) -> str:
    """``backbone``; for an image or audio registry entry (``spec``) with ``backbone`` left at
    :data:`DEFAULT_BACKBONE`, which cannot read its inputs, the entry's paper backbone
    (``wikiart``: ``vit-base``), as text entries get the paper's BERT."""
    if backbone != DEFAULT_BACKBONE or spec is None or spec.task not in MEDIA_TASKS:
        return backbone
    return spec.paper_backbone or backbone
