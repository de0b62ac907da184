"""The Pareto front of a multi-objective search, read from its trial runs in MLflow.

Only trials that ran to the end count (FINISHED, not stopped early by the scheduler, every
objective logged): a trial stopped after one evaluation looks cheap on every cost and would
otherwise dominate. Each point carries the trial's best ``objective`` (the metric of the
checkpoint it keeps) and the whole run's costs (the latest value of each, logged at its last
evaluation).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from astune.metrics.objectives import PRIMARY, front, modes, parse_objectives
from astune.store.conventions import LOST_TAG, STOPPED_EARLY_TAG
from astune.store.reader import objective, param, search_mode, trial_id

if TYPE_CHECKING:
    from mlflow.entities import Run

PARETO_TAG = "astune.pareto"  # "true" on the runs of the front's trials
PARETO_CSV = "pareto.csv"
PARETO_PNG = "pareto.png"


@dataclass(frozen=True)
class FrontPoint:
    """One finished trial: its run, its params (as MLflow logged them) and its objectives."""

    run_id: str
    trial_id: str
    values: dict[str, float]  # objective name -> value (the metric first)
    params: dict[str, str] = field(default_factory=dict)

    @property
    def loss(self) -> str:
        return self.params.get("loss", "")

    def flag(self, name: str) -> bool:
        """Whether the boolean param ``name`` (``as_speed``, ``as_skip``) is on."""
        return self.params.get(name, "False").lower() == "true"


def finished_points(runs: Iterable[Run], objectives: Sequence[str]) -> list[FrontPoint]:
    """The trials that ran to the end with every objective finite, oldest first."""
    points = []
    # in the order the search started them (fANOVA's forest depends on the order of its trials)
    for run in sorted(runs, key=lambda r: (r.info.start_time or 0, r.info.run_id)):
        tags = run.data.tags
        if run.info.status != "FINISHED" or tags.get(STOPPED_EARLY_TAG) == "true":
            continue
        if tags.get(LOST_TAG) == "true":
            continue
        values = {objectives[0]: objective(run)}
        values.update({name: run.data.metrics.get(name) for name in objectives[1:]})
        if any(v is None or not math.isfinite(v) for v in values.values()):
            continue
        points.append(FrontPoint(run.info.run_id, trial_id(run), values, dict(run.data.params)))
    return points


def pareto_front(
    points: Sequence[FrontPoint], objectives: Sequence[str], mode: str
) -> list[FrontPoint]:
    """The non-dominated ``points`` (the metric in ``mode``, every cost minimised), cheapest
    first by the first cost, then best metric first, then the lowest trial id."""
    directions = modes(objectives, mode)
    table = [[p.values[name] for name in objectives] for p in points]
    chosen = [points[i] for i in front(table, directions)]
    sign = -1.0 if mode == "max" else 1.0
    return sorted(
        chosen, key=lambda p: (p.values[objectives[1]], sign * p.values[objectives[0]], p.trial_id)
    )


def search_objectives(parent: Run) -> tuple[str, ...]:
    """The objectives the search of ``parent`` ran with (its ``objectives`` param; a search
    from before costs existed optimised its metric alone)."""
    return parse_objectives(param(parent, "objectives") or PRIMARY)


@dataclass(frozen=True)
class SearchFront:
    """A finished search's objectives, its metric's mode, its finished trials and its front
    (cheapest first)."""

    objectives: tuple[str, ...]
    mode: str
    points: list[FrontPoint]
    front: list[FrontPoint]


def search_front(parent: Run, runs: Iterable[Run], *, needed_by: str) -> SearchFront:
    """The front of the search of ``parent`` among its trial ``runs``. ValueError (one line,
    starting with ``needed_by``, e.g. ``"--front needs"``) when the search had one objective
    or no trial ran to the end with every objective."""
    objectives = search_objectives(parent)
    if len(objectives) < 2:
        raise ValueError(
            f"{needed_by} a search with a cost objective, but this one (parent run "
            f"{parent.info.run_id}) optimised {objectives[0]!r} alone; search with "
            "--objectives objective,train_seconds."
        )
    mode = search_mode(parent)
    points = finished_points(runs, objectives)
    if not points:
        raise ValueError(
            f"{needed_by} a finished trial, but no trial of this search (parent run "
            f"{parent.info.run_id}) ran to the end with every objective."
        )
    return SearchFront(objectives, mode, points, pareto_front(points, objectives, mode))


def write_front_csv(
    front_points: Sequence[FrontPoint], objectives: Sequence[str], path: Path
) -> None:
    """``pareto.csv``: one row per front trial, cheapest first: run id, trial id, every
    objective, then the trial's params."""
    names = sorted({k for p in front_points for k in p.params})
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["run_id", "trial_id", *objectives, *names])
        for p in front_points:
            row = [p.values[name] for name in objectives]
            writer.writerow([p.run_id, p.trial_id, *row, *(p.params.get(n, "") for n in names)])
