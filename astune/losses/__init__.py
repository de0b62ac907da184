"""The AS-Softmax loss family (torch only: no Ray or MLflow imports here).

The names below load on first use, so ``import astune.losses.catalogue`` (names, parameters,
ranges; what the CLI, configs and search spaces read) does not import torch.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "ASSoftmaxLoss": "astune.losses.as_softmax",
    "DeltaSchedule": "astune.losses.delta",
    "EmaDelta": "astune.losses.delta",
    "TargetMaskDelta": "astune.losses.delta",
    "build_delta_schedule": "astune.losses.delta",
    "MaskStats": "astune.losses.as_softmax",
    "as_softmax_loss": "astune.losses.as_softmax",
    "as_softmax_with_stats": "astune.losses.as_softmax",
    "AMSoftmaxLoss": "astune.losses.baselines",
    "ASVariantLoss": "astune.losses.baselines",
    "Entmax15Loss": "astune.losses.baselines",
    "LabelSmoothingLoss": "astune.losses.baselines",
    "SoftmaxLoss": "astune.losses.baselines",
    "SparsemaxLoss": "astune.losses.baselines",
    "SparseSoftmaxLoss": "astune.losses.baselines",
    "TSoftmaxLoss": "astune.losses.baselines",
    "am_softmax_loss": "astune.losses.baselines",
    "as_variant_loss": "astune.losses.baselines",
    "as_variant_with_stats": "astune.losses.baselines",
    "entmax15_loss": "astune.losses.baselines",
    "label_smoothing_loss": "astune.losses.baselines",
    "softmax_loss": "astune.losses.baselines",
    "sparse_softmax_loss": "astune.losses.baselines",
    "sparsemax_loss": "astune.losses.baselines",
    "t_softmax_loss": "astune.losses.baselines",
    "MultiLabelASSoftmaxLoss": "astune.losses.multilabel",
    "MultiLabelCategoricalCrossEntropy": "astune.losses.multilabel",
    "multilabel_as_softmax_loss": "astune.losses.multilabel",
    "multilabel_as_softmax_with_stats": "astune.losses.multilabel",
    "multilabel_categorical_crossentropy": "astune.losses.multilabel",
    "LOSSES": "astune.losses.registry",
    "TASKS": "astune.losses.catalogue",
    "LossSpec": "astune.losses.registry",
    "ParamSpec": "astune.losses.catalogue",
    "build_loss": "astune.losses.registry",
    "loss_names": "astune.losses.catalogue",
    "loss_spec": "astune.losses.registry",
}

__all__ = [
    "ASSoftmaxLoss",
    "DeltaSchedule",
    "EmaDelta",
    "TargetMaskDelta",
    "build_delta_schedule",
    "MaskStats",
    "as_softmax_loss",
    "as_softmax_with_stats",
    # baselines
    "AMSoftmaxLoss",
    "ASVariantLoss",
    "Entmax15Loss",
    "LabelSmoothingLoss",
    "SoftmaxLoss",
    "SparsemaxLoss",
    "SparseSoftmaxLoss",
    "TSoftmaxLoss",
    "am_softmax_loss",
    "as_variant_loss",
    "as_variant_with_stats",
    "entmax15_loss",
    "label_smoothing_loss",
    "softmax_loss",
    "sparse_softmax_loss",
    "sparsemax_loss",
    "t_softmax_loss",
    # multi-label
    "MultiLabelASSoftmaxLoss",
    "MultiLabelCategoricalCrossEntropy",
    "multilabel_as_softmax_loss",
    "multilabel_as_softmax_with_stats",
    "multilabel_categorical_crossentropy",
    # registry
    "LOSSES",
    "TASKS",
    "LossSpec",
    "ParamSpec",
    "build_loss",
    "loss_names",
    "loss_spec",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'astune.losses' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
