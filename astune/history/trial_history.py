"""The store's searches as reference trials for the transfer
(:mod:`astune.history.transfer`): each search's finished trials ranked by objective, its
best quarter kept, placed at its dataset's difficulty, task family, training rows and
backbone."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from astune.history.difficulty import Difficulty
from astune.history.transfer import TRANSFER_KEYS, ReferenceTrial, TaskProfile, ranked
from astune.store.conventions import PARENT_TAG
from astune.store.reader import Store, dataset_of, finished_trials, objective, param, search_mode

if TYPE_CHECKING:
    from mlflow.entities import Run

CONFIG_KEYS = ("loss", *TRANSFER_KEYS, "delta", "warmup_ratio")
"""The trial params a reference trial keeps."""


def store_trials(
    store: Store, difficulty_of: Callable[[str, "Run"], Difficulty]
) -> list[ReferenceTrial]:
    """The best quarter of every search of the store with finished trials."""
    out: list[ReferenceTrial] = []
    for parent, trials, name in finished_searches(store):
        dataset = dataset_of(parent) or ""
        difficulty = difficulty_of(dataset, parent)
        mode = search_mode(parent)
        scored = [(config_of(t), objective(t)) for t in trials]
        profile = profile_of(trials[0], parent, difficulty)
        out += ranked(f"search {name!r}", dataset, profile, scored, mode=mode)
    return out


def finished_searches(store: Store) -> Iterator[tuple["Run", list["Run"], str]]:
    """Every search of ``store`` with finished trials: its parent run, those trials and its
    experiment's name."""
    by_parent: dict[str, list[Run]] = {}
    for run in finished_trials(store.trials()):
        by_parent.setdefault(run.data.tags.get(PARENT_TAG, ""), []).append(run)
    for parent in store.searches():
        trials = by_parent.get(parent.info.run_id, [])
        if trials:
            yield parent, trials, store.experiment_name(parent.info.experiment_id)


def config_of(trial: "Run") -> dict[str, Any]:
    """The trial's :data:`CONFIG_KEYS` params that apply to it."""
    values = {key: param(trial, key) for key in CONFIG_KEYS}
    return {k: v for k, v in values.items() if v is not None}


def profile_of(trial: "Run", parent: "Run", difficulty: Difficulty) -> TaskProfile:
    """The task a trial ran on: its dataset's difficulty and family, its training rows (the
    ``max_train_samples`` it ran with, else the samples it saw per epoch) and its backbone
    (the trial's params, else its search's)."""

    def value(key: str) -> Any:
        found = param(trial, key)
        return found if found is not None else param(parent, key)

    rows = value("max_train_samples")
    if rows is None:
        seen, epochs = trial.data.metrics.get("samples_seen"), value("epochs")
        rows = round(seen / epochs) if seen and epochs else None
    return TaskProfile(
        difficulty=difficulty.value,
        task=difficulty.task,
        train_size=int(rows) if rows else None,
        backbone=str(value("backbone") or ""),
        num_layers=value("num_layers"),
        max_length=value("max_length"),
    )
