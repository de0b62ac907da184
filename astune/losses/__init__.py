"""The AS-Softmax loss family (torch only: no Ray or MLflow imports here)."""

from astune.losses.as_softmax import (
    ASSoftmaxLoss,
    DeltaSchedule,
    MaskStats,
    as_softmax_loss,
    as_softmax_with_stats,
)
from astune.losses.baselines import (
    AMSoftmaxLoss,
    ASVariantLoss,
    Entmax15Loss,
    LabelSmoothingLoss,
    SoftmaxLoss,
    SparsemaxLoss,
    SparseSoftmaxLoss,
    TSoftmaxLoss,
    am_softmax_loss,
    as_variant_loss,
    as_variant_with_stats,
    entmax15_loss,
    label_smoothing_loss,
    softmax_loss,
    sparse_softmax_loss,
    sparsemax_loss,
    t_softmax_loss,
)
from astune.losses.multilabel import (
    MultiLabelASSoftmaxLoss,
    MultiLabelCategoricalCrossEntropy,
    multilabel_as_softmax_loss,
    multilabel_as_softmax_with_stats,
    multilabel_categorical_crossentropy,
)
from astune.losses.registry import (
    LOSSES,
    TASKS,
    LossSpec,
    ParamSpec,
    build_loss,
    loss_names,
    loss_spec,
)

__all__ = [
    "ASSoftmaxLoss",
    "DeltaSchedule",
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
