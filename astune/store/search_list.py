"""``astune status`` without ``--experiment``: the searches a store holds, one line each, newest
first: the experiment, its dataset, state (``stale`` for a RUNNING search whose driver stopped
giving heartbeats), trials, best objective and start; read in two requests (the searches, then
their trials), as ``astune status --experiment NAME`` reads one."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from astune.store.conventions import PARENT_TAG
from astune.store.reader import Store, best_so_far, objective, param, search_mode
from astune.store.status import is_stale

if TYPE_CHECKING:
    from mlflow.entities import Run

COLUMNS = ("search", "dataset", "state", "trials", "best", "started")
ONE_SEARCH = "python -m astune status --experiment NAME"


@dataclass(frozen=True)
class SearchLine:
    """One search of a store: its experiment (``--name``), dataset, state (the parent run's
    status in lower case, or ``stale``), trials begun (of ``num_samples``; None: unknown), best
    objective (None: none reported yet) and start (seconds since the epoch)."""

    experiment: str
    dataset: str | None
    state: str
    trials: int
    num_samples: int | None
    best: float | None
    started: float


def search_lines(tracking_uri: str | None = None) -> list[SearchLine]:
    """The newest search of each experiment in the store at ``tracking_uri``, newest first."""
    from astune.store.uri import resolve_tracking_uri

    store = Store(resolve_tracking_uri(tracking_uri))
    newest: dict[str, Run] = {}
    for parent in store.searches():  # newest first: an experiment's first is its newest
        newest.setdefault(parent.info.experiment_id, parent)
    trials: dict[str, list[Run]] = {}
    for run in store.trials(experiment_ids=list(newest)) if newest else []:
        trials.setdefault(run.data.tags.get(PARENT_TAG, ""), []).append(run)
    now = time.time()
    return [
        _line(store, parent, trials.get(parent.info.run_id, []), now) for parent in newest.values()
    ]


def _line(store: Store, parent: Run, trials: list[Run], now: float) -> SearchLine:
    best = best_so_far(trials, search_mode(parent))
    return SearchLine(
        experiment=store.experiment_name(parent.info.experiment_id),
        dataset=param(parent, "dataset"),
        state="stale" if is_stale(parent, now) else parent.info.status.lower(),
        trials=len(trials),
        num_samples=param(parent, "num_samples"),
        best=None if best is None else objective(best),
        started=(parent.info.start_time or 0) / 1000,
    )


def format_search_lines(lines: list[SearchLine], uri: str) -> str:
    """The table of ``lines`` under a heading naming the store ``uri``, and the command that
    shows one search trial by trial."""
    if not lines:
        return f"no astune search in {uri}"
    rows = [COLUMNS] + [
        (
            line.experiment,
            line.dataset or "-",
            line.state,
            f"{line.trials}/{line.num_samples}" if line.num_samples else str(line.trials),
            "-" if line.best is None else f"{line.best:.4g}",
            time.strftime("%Y-%m-%d %H:%M", time.localtime(line.started)),
        )
        for line in lines
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    table = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    head = f"searches in {uri}, newest first:"
    return "\n".join([head, *table, f"one search, trial by trial: {ONE_SEARCH}"])
