"""Datasets: the registry, loading from local files or the hub, and tokenization per task.

``import astune.data`` stays light: torch is imported on first use of the encoding names, and
``datasets`` / ``transformers`` only inside the functions that need them.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from astune.data.errors import DataError
from astune.data.listing import format_datasets_table
from astune.data.loading import ENV_DATA_DIR, LoadedData, load_dataset_splits
from astune.data.registry import REGISTRY, get_spec
from astune.data.resolve import DatasetRef, resolve_dataset
from astune.data.spec import METRICS, DatasetSpec
from astune.losses.catalogue import TASKS

_LAZY = {
    "EncodedData": "astune.data.encoding",
    "EncodedSplit": "astune.data.encoding",
    "IGNORE_INDEX": "astune.data.encoding",
    "encode_splits": "astune.data.encoding",
    "model_inputs": "astune.data.encoding",
    "majority_baseline": "astune.data.baseline",
    "MediaData": "astune.data.media_encoding",
    "encode_media": "astune.data.media_encoding",
}

__all__ = [
    "DataError",
    "DatasetRef",
    "DatasetSpec",
    "ENV_DATA_DIR",
    "EncodedData",
    "EncodedSplit",
    "IGNORE_INDEX",
    "LoadedData",
    "MediaData",
    "METRICS",
    "REGISTRY",
    "TASKS",
    "encode_media",
    "encode_splits",
    "format_datasets_table",
    "get_spec",
    "load_dataset_splits",
    "majority_baseline",
    "model_inputs",
    "resolve_dataset",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'astune.data' has no attribute {name!r}")
