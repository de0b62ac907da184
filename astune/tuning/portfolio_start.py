"""A search starts from what is known (issue 62): the portfolio of configs that won on past
tasks of its backbone (the packaged prior and the store's searches,
:mod:`astune.recommendation.portfolio`) runs first, in a space widened to hold them; the
searcher is told their results and goes on. The space is written beside the search, as
``--warm-start``'s is, so that ``--resume`` reads it again rather than choosing anew.
``--no-portfolio`` searches the space as given."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from astune.tuning.settings import SearchSettings
from astune.tuning.warm_start import space_beside

if TYPE_CHECKING:
    from astune.data.media_encoding import TrainData
    from astune.recommendation.portfolio import PortfolioEntry
    from astune.space.space import SearchSpace


def portfolio_space_path(settings: SearchSettings) -> Path:
    """``<storage>/<name>.portfolio.yaml`` beside a local search's Ray folder, else under the
    warm start's folder (remote storage)."""
    return space_beside(settings, "portfolio")


def portfolio_start(
    settings: SearchSettings, space: "SearchSpace", data: "TrainData", *, tracking_uri: str
) -> tuple[SearchSettings, "SearchSpace", list[str]]:
    """``settings`` searching ``space`` (the flags applied, the data read) widened to hold the
    portfolio, which its seed points start with, and the console's lines (where each first
    trial came from); the space as given when nothing of the backbone was recorded. A value
    the flags fix (``--epochs``, the seed) stays fixed."""
    from astune.recommendation.portfolio import config_text
    from astune.recommendation.portfolio_sources import portfolio_for
    from astune.recommendation.portfolio_space import with_portfolio
    from astune.recommendation.reference import reference_file
    from astune.recommendation.transfer import TaskProfile
    from astune.space.space import load_space
    from astune.store.reader import Store

    target = TaskProfile(
        difficulty=None,
        task=data.spec.task,
        train_size=settings.max_train_samples or len(data.splits["train"]),
        backbone=settings.backbone,
        num_layers=settings.num_layers,
    )
    entries = portfolio_for(
        target,
        store=Store(tracking_uri),
        reference=reference_file(settings.reference),
        losses=list(space.losses),
    )
    fixed = ("epochs",) if settings.epochs is not None else ()
    entries = _distinct(entries, fixed)
    if not entries:
        return settings, space, [f"portfolio: none (nothing recorded on {settings.backbone})"]
    path = portfolio_space_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    with_portfolio(space, entries, keep=fixed).dump(path)
    widened = load_space(path)  # as a resume reads it: its source is the file
    lines = [f"portfolio: trials 1-{len(entries)} run what won on past tasks ({path.name})"]
    lines += [f"  {i}. {config_text(e.config)} ({e.source})" for i, e in enumerate(entries, 1)]
    return dataclasses.replace(settings, space=str(path)), widened, lines


def _distinct(entries: list["PortfolioEntry"], fixed: tuple[str, ...]) -> list["PortfolioEntry"]:
    """The entries that still differ once the keys a flag fixes are left out (the first kept)."""
    seen: list[dict] = []
    out = []
    for entry in entries:
        config = {k: v for k, v in entry.config.items() if k not in fixed}
        if config not in seen:
            seen.append(config)
            out.append(entry)
    return out
