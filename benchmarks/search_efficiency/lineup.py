"""Every arm of the search-efficiency benchmark by its name: the cold arms of :mod:`.arms` and the
warm ones of :mod:`.warm`, which builds on them."""

from __future__ import annotations

from typing import Any

from benchmarks.search_efficiency import arms
from benchmarks.search_efficiency.warm import warm_arm


def build_arm(name: str, dataset: str, *, warm: Any = None) -> arms.Arm:
    """The arm ``name`` on ``dataset``; the warm arms need ``warm``
    (:func:`.warm.warm_start` of the dataset); one clear error for an unknown arm."""
    if name not in (*arms.ARMS, *arms.WARM_ARMS):
        raise SystemExit(
            f"unknown arm {name!r}: use one of {', '.join((*arms.ARMS, *arms.WARM_ARMS))}"
        )
    if name in arms.WARM_ARMS:
        if warm is None:
            raise ValueError(f"arm {name!r} needs the dataset's warm start (warm.warm_start)")
        return warm_arm(dataset, warm, fast=name == "astune-fast")
    if name == "by-hand":
        return arms.by_hand(dataset)
    return arms.astune_arm(dataset, fast=name == "astune-fast-cold")
