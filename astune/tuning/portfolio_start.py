"""A search starts from what is known (issue 62): the portfolio of configs that won on past
tasks of its backbone (the packaged prior and the store's searches,
:mod:`astune.history.portfolio`) runs first, in a space widened to hold them; the
searcher is told their results and goes on. The space is written beside the search, as
``--warm-start``'s is, so that ``--resume`` reads it again rather than choosing anew.
``--no-portfolio`` searches the space as given."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from astune._text import counted, plural, value_text
from astune.config import AS_SPEED_FIELDS
from astune.tuning.settings import SearchSettings
from astune.tuning.warm_start import space_beside

if TYPE_CHECKING:
    from astune.data.media_encoding import TrainData
    from astune.history.portfolio import PortfolioEntry
    from astune.space.space import SearchSpace
    from astune.space.user_fixed import UserFixed


def portfolio_space_path(settings: SearchSettings) -> Path:
    """``<storage>/<name>.portfolio.yaml`` beside a local search's Ray folder, else under the
    warm start's folder (remote storage)."""
    return space_beside(settings, "portfolio")


@dataclass(frozen=True)
class PortfolioStart:
    """A search that starts from the portfolio: its ``settings`` and ``space`` (the file beside
    the search), the console's ``lines``, and ``points``, how many of the space's first seed
    points are the portfolio's (`astune status` names their trials)."""

    settings: SearchSettings
    space: "SearchSpace"
    lines: list[str]
    points: int


def portfolio_start(
    settings: SearchSettings, space: "SearchSpace", data: "TrainData", *, tracking_uri: str
) -> PortfolioStart:
    """``settings`` searching ``space`` (the flags applied, the data read) widened to hold the
    portfolio, which its seed points start with, and the console's lines (where each first
    trial came from); the space as given when nothing of the backbone was recorded. What the
    user fixed (:func:`searched_as_fixed`) stays fixed: each config holds those values."""
    from astune.history.portfolio import config_text
    from astune.history.portfolio_sources import search_portfolio
    from astune.history.portfolio_space import portfolio_points, widened_for
    from astune.history.reference import reference_file
    from astune.history.space_points import with_points
    from astune.history.transfer import TaskProfile
    from astune.space.space import load_space
    from astune.store.reader import Store

    target = TaskProfile(
        difficulty=None,
        task=data.spec.task,
        train_size=settings.max_train_samples or len(data.splits["train"]),
        backbone=settings.backbone,
        num_layers=settings.num_layers,
        max_length=settings.max_length,
    )
    entries, scale, why_none = search_portfolio(
        target, space, store=Store(tracking_uri), reference=reference_file(settings.reference)
    )
    fixed = searched_as_fixed(settings)
    entries, merged = _distinct([_projected(e, fixed) for e in entries])
    if not entries:
        none = (
            [why_none]
            if why_none
            else [f"portfolio: none (nothing recorded on {settings.backbone})"]
        )
        return PortfolioStart(settings, space, none + ([scale] if scale else []), 0)
    path = portfolio_space_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    scheduler_line = None
    if settings.scheduler_object is None:  # a scheduler object is the user's to run
        space, scheduler_line = _portfolio_scheduler(space)
    space = widened_for(space, entries, keep=fixed.keys())
    points = portfolio_points(space, entries, keep=fixed.keys())
    with_points(space, points).dump(path)
    widened = load_space(path)  # as a resume reads it: its source is the file
    runs = min(len(points), widened.num_samples)  # the trials that run a portfolio config
    first = "trial 1 runs" if runs == 1 else f"trials 1-{runs} run"
    lines = [f"portfolio: {first} what won on past tasks ({path.name})"]
    lines += [
        f"  {i}. {config_text(e.config)} ({e.source}{'' if i <= runs else _NOT_RUN})"
        for i, e in enumerate(entries, 1)
    ]
    lines += [scale] if scale else []
    lines += [scheduler_line] if scheduler_line else []
    lines += _fixed_lines(fixed, merged)
    lines += _alone_line(widened.num_samples, len(points))
    settings = dataclasses.replace(settings, space=str(path))
    return PortfolioStart(settings, widened, lines, points=len(points))


_NOT_RUN = "; not run: past --num-samples"


def _alone_line(num_samples: int, configs: int) -> list[str]:
    """The line saying the search is the portfolio alone (or its first configs), if it is."""
    if num_samples > configs:
        return []
    within = f"portfolio: --num-samples {num_samples} is within its {counted(configs, 'config')}"
    if num_samples == configs:
        return [f"{within}: this search runs the portfolio alone"]
    first = "its first config" if num_samples == 1 else f"its first {num_samples}"
    return [f"{within}: this search runs {first} alone"]


PORTFOLIO_SCHEDULER = "none"
"""What ``scheduler: auto`` runs behind a portfolio with one objective: FIFO, no early stopping.
Chosen by leave-one-source-out over the recorded tables among ASHA (grace 1 or 2, reduction 2
or 3), asynchronous Hyperband and FIFO with 2, 4 or 6 portfolio configs: FIFO with 4 had the
least anytime regret area (benchmarks/search_efficiency/results/rules.json, issue 70)."""


def _portfolio_scheduler(space: "SearchSpace") -> tuple["SearchSpace", str | None]:
    """``space`` with :data:`PORTFOLIO_SCHEDULER` where its scheduler is ``auto`` and it has
    one objective (several keep successive halving by non-dominated sorting), and the line
    saying so; as it is otherwise (a scheduler the user chose)."""
    if space.scheduler.get("type") != "auto" or space.multi_objective:
        return space, None
    line = "portfolio: no early stopping (FIFO) behind it; --scheduler asha stops trials early"
    return space.with_settings(scheduler=PORTFOLIO_SCHEDULER), line


def searched_as_fixed(settings: SearchSettings) -> "UserFixed":
    """What the user fixed: their own space file's fixed values (not a packaged file's) and
    the flags that fix one (``--epochs``; the seed is the searcher's, never history's)."""
    from astune.space.files import resolve_space_file
    from astune.space.user_fixed import user_fixed

    fixed = user_fixed(resolve_space_file(settings.space, settings.dataset))
    flags = {"epochs": settings.epochs} if settings.epochs is not None else {}
    return fixed.with_values(flags, without=("seed",))  # a portfolio config names no seed


def _projected(entry: "PortfolioEntry", fixed: "UserFixed") -> "PortfolioEntry":
    """``entry`` holding the user's values for its loss; a lever the user turned off loses its
    own settings (AS-Speed's lambda and accumulation cap)."""
    config = {**entry.config, **fixed.for_loss(str(entry.config.get("loss")))}
    if config.get("as_speed") is False:
        config = {k: v for k, v in config.items() if k not in AS_SPEED_FIELDS}
    return dataclasses.replace(entry, config=config)


def _fixed_lines(fixed: "UserFixed", merged: int) -> list[str]:
    if not fixed:
        return []
    held = [f"{k} {value_text(v)}" for k, v in fixed.values.items()]
    held += [
        f"{k} {value_text(v)} ({loss})"
        for loss, kv in fixed.loss_values.items()
        for k, v in kv.items()
    ]
    lines = [f"portfolio: keeps what you fixed: {', '.join(held)}"]
    if merged:
        lines.append(
            f"portfolio: {merged} of its configs {plural(merged, 'become', verb=True)} the same "
            "as an earlier one once holding your values: run once"
        )
    return lines


def _distinct(entries: list["PortfolioEntry"]) -> tuple[list["PortfolioEntry"], int]:
    """The entries whose configs differ (the first kept), and how many were left out."""
    out: list["PortfolioEntry"] = []
    for entry in entries:
        if all(entry.config != kept.config for kept in out):
            out.append(entry)
    return out, len(entries) - len(out)
