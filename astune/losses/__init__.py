"""The AS-Softmax loss family (torch only: no Ray or MLflow imports here)."""

from astune.losses.as_softmax import (
    ASSoftmaxLoss,
    DeltaSchedule,
    MaskStats,
    as_softmax_loss,
    as_softmax_with_stats,
)

__all__ = [
    "ASSoftmaxLoss",
    "DeltaSchedule",
    "MaskStats",
    "as_softmax_loss",
    "as_softmax_with_stats",
]
