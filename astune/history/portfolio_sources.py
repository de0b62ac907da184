"""The past tasks a portfolio learns from (:mod:`astune.history.portfolio`): the packaged
prior's recorded tables and every search in the user's MLflow store, each with its configs'
scores. No probe runs: a portfolio weighs tasks by family, training rows and backbone, the
difficulty of each left unknown (so alike for all)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from astune._text import counted, listed, plural
from astune.history.difficulty import Difficulty
from astune.history.portfolio import (
    PORTFOLIO_SIZE,
    SIZE_FACTOR,
    PortfolioEntry,
    SourceTask,
    at_nearest_size,
    build_portfolio,
)
from astune.history.transfer import TaskProfile
from astune.history.trial_history import config_of, finished_searches, profile_of
from astune.store.conventions import TASK_TAG
from astune.store.reader import Store, dataset_of, objective, search_mode

if TYPE_CHECKING:
    from astune.space.space import SearchSpace


def prior_tasks(path: str | Path, *, exclude: Iterable[str] = ()) -> list[SourceTask]:
    """The tasks of a reference file (the packaged prior: one per recorded table, and one per
    dataset of the full-size study, named ``prior <dataset> at full size``), leaving out the
    datasets named in ``exclude``; ValueError (one line) for a file that cannot be read."""
    from astune.history.reference import reference_searches

    out = []
    for entry in reference_searches(path, exclude=exclude):
        profile = TaskProfile(
            difficulty=None,  # weighed without a probe, as the store's searches are
            task=entry["task"],
            train_size=entry["train_size"],
            backbone=entry["backbone"],
            num_layers=entry["num_layers"],
            max_length=entry.get("max_length"),  # files before issue 70 do not record it
        )
        scored = [(t["config"], t["score"]) for t in entry["trials"] if "score" in t]
        # "prior sst5 at full size": no parentheses, which the console's source lists use
        recorded = f" at {entry['recorded']}" if entry.get("recorded") else ""
        name = f"prior {entry['dataset']}{recorded}"
        task = SourceTask.from_scores(
            name, entry["dataset"], profile, scored, mode=entry.get("mode", "max")
        )
        out += [task] if task is not None else []
    return out


def store_tasks(store: Store, *, exclude: Iterable[str] = ()) -> list[SourceTask]:
    """Every search of ``store`` with finished trials as a task (its datasets in ``exclude``
    left out): its trials' configs and objectives, in its mode."""
    skip = set(exclude)
    out = []
    for parent, trials, name in finished_searches(store):
        dataset = dataset_of(parent) or ""
        if dataset in skip:
            continue
        task_tag = parent.data.tags.get(TASK_TAG) or None
        unknown = Difficulty(dataset, task=task_tag, value=None, sd=0.0)
        profile = profile_of(trials[0], parent, unknown)
        scored = [(config_of(t), s) for t in trials if (s := objective(t)) is not None]
        task = SourceTask.from_scores(
            f"search {name!r}", dataset, profile, scored, mode=search_mode(parent)
        )
        out += [task] if task is not None else []
    return out


def portfolio_for(
    target: TaskProfile,
    *,
    store: Store,
    reference: str | Path | None,
    exclude: Iterable[str] = (),
    losses: list[str] | None = None,
    size: int = PORTFOLIO_SIZE,
) -> list[PortfolioEntry]:
    """The portfolio for ``target`` from the store's searches and the reference file's tasks
    (None: the store's alone), the datasets in ``exclude`` left out of both."""
    tasks = store_tasks(store, exclude=exclude)
    if reference is not None:
        tasks += prior_tasks(reference, exclude=exclude)
    return build_portfolio(target, tasks, size=size, losses=losses)


def shipped_space(dataset: str, task: str | None) -> "SearchSpace":
    """The space a search of ``dataset`` runs without ``--space``: its packaged file (the
    default one for a folder), for ``task``."""
    from astune.data.resolve import resolve_dataset
    from astune.space.space import load_space

    space = load_space(dataset=resolve_dataset(dataset).registry_name)
    return space if task is None else space.for_task(task)


class SearchPortfolio(NamedTuple):
    """The portfolio a search runs first, one line on the scale it was learnt at (or, when it
    is empty, on the backbones history holds), and ``why_none``: for a portfolio empty though
    history holds the backbone's tasks, the line saying why."""

    entries: list[PortfolioEntry]
    scale: str | None
    why_none: str | None = None


def search_portfolio(
    target: TaskProfile,
    space: "SearchSpace",
    *,
    store: Store,
    reference: str | Path | None,
) -> SearchPortfolio:
    """The portfolio a search of ``space`` runs first, as ``search`` and ``recommend`` both
    compute it: of the space's losses, for ``target`` with its difficulty left unknown (the
    sources' is: no probe runs for them), the store read once."""
    tasks = store_tasks(store)
    if reference is not None:
        tasks += prior_tasks(reference)
    unknown = dataclasses.replace(target, difficulty=None)
    entries = build_portfolio(unknown, tasks, losses=list(space.losses))
    same = [t for t in tasks if t.profile.backbone == target.backbone]
    if not same:  # nothing on this backbone: which backbones history holds
        return SearchPortfolio(entries, other_backbones_note(tasks))
    used = at_nearest_size(target, same)
    if not entries:  # the backbone's past tasks hold configs of other losses only
        return SearchPortfolio(entries, None, other_losses_note(list(space.losses), used))
    return SearchPortfolio(entries, scale_note(target, used, set_aside=len(same) - len(used)))


def other_losses_note(searched: list[str], tasks: list[SourceTask]) -> str:
    """For a search whose losses no past task of its backbone (``tasks``) has a config of: the
    line naming the losses they were recorded with."""
    recorded = sorted({str(c.get("loss")) for t in tasks for c in t.configs if c.get("loss")})
    return (
        f"portfolio: none: past tasks on {tasks[0].profile.backbone} were recorded with "
        f"{listed(recorded)}, not with the {plural(len(searched), 'loss')} searched "
        f"({listed(searched)})"
    )


def other_backbones_note(tasks: list[SourceTask]) -> str | None:
    """For a backbone with no past task: the line naming the backbones history holds, and the
    flag that starts from it (None when it holds none)."""
    others = sorted({t.profile.backbone for t in tasks if t.profile.backbone})
    if not others:
        return None
    flags = " or ".join(f"--backbone {name}" for name in others)
    return f"portfolio: past tasks were recorded on {listed(others)}: {flags} starts from them"


def scale_note(target: TaskProfile, tasks: list[SourceTask], *, set_aside: int = 0) -> str | None:
    """The training rows, layers and tokens ``tasks`` were recorded at beside ``target``'s,
    saying plainly which of them ``target`` lies outside, and how many tasks of other sizes
    were ``set_aside`` (None: no task); for a target more than :data:`SIZE_FACTOR` times the
    largest task's rows, that their learning rates have run high at such sizes."""
    if not tasks:
        return None
    recorded, yours, outside = [], [], []
    for what, noun in (("train_size", "training row"), ("num_layers", "layer"),
                       ("max_length", "token")):  # fmt: skip
        name = plural(2, noun)
        values = sorted({v for t in tasks if (v := getattr(t.profile, what)) is not None})
        mine = getattr(target, what)
        if len(values) == 1:
            recorded.append(counted(values[0], noun))
        elif values:
            recorded.append(f"{values[0]:,}-{values[-1]:,} {name}")
        elif what == "num_layers":  # every task kept all of its backbone's layers (None)
            recorded.append("all layers")
        if mine is None:
            yours.append(f"all {name}" if what == "num_layers" else f"{name} unknown")
            continue
        yours.append(counted(mine, noun))
        if values and not values[0] <= mine <= values[-1]:
            outside.append(name)
    line = (
        f"portfolio: learnt on {counted(len(tasks), 'past task')} of {', '.join(recorded)}; "
        f"this search: {', '.join(yours)}"
    )
    if set_aside:
        line += f" ({counted(set_aside, 'task')} recorded at other sizes set aside)"
    if outside:
        line += f". Outside them in {listed(outside)}: its configs won at another scale"
        sizes = [t.profile.train_size for t in tasks if t.profile.train_size]
        # Beyond the size band a portfolio learns within, as on the whole of SST-5 (4.3x the
        # tables' largest), where the full-size study measured their learning rates running high.
        if target.train_size and sizes and target.train_size > SIZE_FACTOR * max(sizes):
            line += (
                "; on larger runs their learning rates have run high (docs/searching.md): "
                "keep lower ones in your space"
            )
    return line
