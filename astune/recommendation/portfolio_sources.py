"""The past tasks a portfolio learns from (:mod:`astune.recommendation.portfolio`): the packaged
prior's recorded tables and every search in the user's MLflow store, each with its configs'
scores. No probe runs: a portfolio weighs tasks by family, training rows and backbone, the
difficulty of each left unknown (so alike for all)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from astune.recommendation.difficulty import Difficulty
from astune.recommendation.portfolio import (
    PORTFOLIO_SIZE,
    PortfolioEntry,
    SourceTask,
    build_portfolio,
)
from astune.recommendation.transfer import TaskProfile
from astune.recommendation.trial_history import config_of, finished_searches, profile_of
from astune.store.conventions import TASK_TAG
from astune.store.reader import Store, dataset_of, objective, search_mode


def prior_tasks(path: str | Path, *, exclude: Iterable[str] = ()) -> list[SourceTask]:
    """The tasks of a reference file (the packaged prior: one per recorded table), leaving out
    the datasets named in ``exclude``; ValueError (one line) for a file that cannot be read."""
    from astune.recommendation.reference import reference_searches

    out = []
    for entry in reference_searches(path, exclude=exclude):
        profile = TaskProfile(
            difficulty=None,  # weighed without a probe, as the store's searches are
            task=entry["task"],
            train_size=entry["train_size"],
            backbone=entry["backbone"],
            num_layers=entry["num_layers"],
        )
        scored = [(t["config"], t["score"]) for t in entry["trials"] if "score" in t]
        name = f"prior {entry['dataset']}"
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
