"""What makes a trial cheaper: AS-Speed's gradient accumulation (torch-free), AS-Skip's choice of
the samples to leave out, and the pruning policies (InfoBatch, soft pruning)."""

from __future__ import annotations

from astune._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "accumulation": ("ASSpeed",),
        "skip": ("ASSkip", "Visit", "planned_visits"),
        "prune": ("SoftPrune",),
    },
)
