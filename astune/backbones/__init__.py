"""Backbones: the registry of aliases (hub ids or offline packages; no transformers import)
and the models and heads built from them per task (transformers on first use)."""

from __future__ import annotations

from astune._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "registry": (
            "BACKBONES",
            "DEFAULT_BACKBONE",
            "Backbone",
            "format_backbones_table",
            "hub_id_of",
            "offline_minilm_path",
            "resolve_backbone",
        ),
        "models": (
            "BackboneUnavailableError",
            "WEIGHT_FILES",
            "build_model",
            "load_processor",
            "load_tokenizer",
            "model_logits",
        ),
        "heads": ("init_head_from_embeddings",),
    },
)
