"""The score of a trivial predictor, which a trained model must beat."""

from __future__ import annotations

import torch

from astune.data.media_encoding import TrainData
from astune.losses.catalogue import MEDIA_TASKS

# Predicting nothing (no entity, no label, no correction) scores 0 on these F1 metrics, and a
# constant prediction has Matthews correlation 0 by convention.
_ZERO_METRICS = ("f1", "micro_f1", "macro_f1", "correction_f1", "matthews")


def majority_baseline(encoded: TrainData, split: str = "validation") -> float:
    """The primary metric (a fraction in [0, 1]) on ``split`` of predicting the train split's
    majority class for accuracy tasks, or the empty / constant prediction for the others."""
    metric = encoded.spec.metric
    if metric in _ZERO_METRICS:
        return 0.0
    if metric != "accuracy" or encoded.spec.task not in ("single_label", "pair", *MEDIA_TASKS):
        raise ValueError(
            f"majority_baseline supports accuracy and {', '.join(_ZERO_METRICS)}, "
            f"but got metric {metric!r} for task {encoded.spec.task!r}"
        )
    train = encoded.splits["train"].labels
    majority = torch.bincount(train, minlength=encoded.spec.num_labels).argmax()
    return float((encoded.splits[split].labels == majority).double().mean())
