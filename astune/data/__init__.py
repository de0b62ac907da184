"""Datasets: the registry, loading from local files or the hub, and tokenization per task.

``import astune.data`` stays light: every name below loads on first use, torch with the
encoding names, and ``datasets`` / ``transformers`` only inside the functions that need them.
"""

from __future__ import annotations

from astune._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "errors": ("DataError",),
        "listing": ("format_datasets_table",),
        "loading": ("ENV_DATA_DIR", "LoadedData", "load_dataset_splits"),
        "registry": ("REGISTRY", "get_spec"),
        "resolve": ("DatasetRef", "resolve_dataset"),
        "spec": ("METRICS", "DatasetSpec"),
        "encoding": (
            "EncodedData",
            "EncodedSplit",
            "IGNORE_INDEX",
            "encode_splits",
            "model_inputs",
        ),
        "baseline": ("majority_baseline",),
        "media_encoding": ("MediaData", "encode_media"),
    },
)
