"""The AS-Softmax loss family (torch only: no Ray or MLflow imports here).

The names below load on first use, so ``import astune.losses.catalogue`` (names, parameters,
ranges; what the CLI, configs and search spaces read) does not import torch.
"""

from __future__ import annotations

from astune._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "as_softmax": ("ASSoftmaxLoss", "as_softmax_loss", "as_softmax_with_stats"),
        "as_base": ("ASLossModule", "MaskStats"),
        "delta": ("DeltaSchedule", "EmaDelta", "TargetMaskDelta", "build_delta_schedule"),
        "baselines": (
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
        ),
        "multilabel": (
            "MultiLabelASSoftmaxLoss",
            "MultiLabelCategoricalCrossEntropy",
            "multilabel_as_softmax_loss",
            "multilabel_as_softmax_with_stats",
            "multilabel_categorical_crossentropy",
        ),
        "registry": ("LOSSES", "LossSpec", "build_loss", "loss_spec"),
        "catalogue": ("TASKS", "ParamSpec", "loss_names", "register_loss"),
    },
)
