"""Every arm of the search-efficiency benchmark by its name: the cold arms of :mod:`.arms`, the
warm ones of :mod:`.warm` and the portfolio arm of :mod:`.portfolio_arm`, which build on them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmarks.search_efficiency import arms
from benchmarks.search_efficiency.portfolio_arm import PORTFOLIO_ARMS, PortfolioStart, portfolio_arm
from benchmarks.search_efficiency.warm import warm_arm

NAMES = (*arms.ARMS, *arms.WARM_ARMS, *PORTFOLIO_ARMS)
"""Every arm, in the order the replay runs them by default."""


def build_arm(
    name: str,
    dataset: str,
    *,
    warm: Any = None,
    portfolios: Mapping[str, PortfolioStart] | None = None,
) -> arms.Arm:
    """The arm ``name`` on ``dataset``; the warm arms need ``warm`` (:func:`.warm.warm_start` of
    the dataset), the portfolio arms their source's start in ``portfolios`` (source ->
    :func:`.portfolio_arm.portfolio_start`); one clear error for an unknown arm."""
    check_arm(name)
    if name in arms.WARM_ARMS:
        if warm is None:
            raise ValueError(f"arm {name!r} needs the dataset's warm start (warm.warm_start)")
        return warm_arm(dataset, warm, fast=name == "astune-fast")
    if name in PORTFOLIO_ARMS:
        start = (portfolios or {}).get(PORTFOLIO_ARMS[name][0])
        if start is None:
            raise ValueError(f"arm {name!r} needs its portfolio (portfolio_arm.portfolio_start)")
        return portfolio_arm(dataset, start, name=name)
    if name == "by-hand":
        return arms.by_hand(dataset)
    return arms.astune_arm(dataset, fast=name == "astune-fast-cold")


def check_arm(name: str) -> str:
    """``name`` when it names an arm; else SystemExit naming the arms."""
    if name not in NAMES:
        raise SystemExit(f"unknown arm {name!r}: use one of {', '.join(NAMES)}")
    return name
