"""Metrics: the evaluation scores per task (numpy only), spelling correction's scores, and
what a search optimises (the primary metric and its costs)."""

from __future__ import annotations

from astune._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "scores": (
            "COMPUTED_METRICS",
            "IGNORE_INDEX",
            "accuracy",
            "check_metric_computed",
            "compute_metrics",
            "entity_f1",
            "entity_scores",
            "entity_spans",
            "is_csc",
            "matthews_corrcoef",
            "multilabel_f1",
            "pearson",
            "token_predictions",
        ),
        "csc": ("CSC_METRICS", "csc_scores"),
    },
)
