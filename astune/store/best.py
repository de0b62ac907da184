"""The best trial of a search, as `export` (and `confirm`) hand it on: which run, its score and
the ``astune train --config`` mapping that reruns it; and :func:`best_first`, the one order
every place that picks "the best trial" uses. Plain data: no MLflow, no Ray."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from astune._checks import check_choice
from astune.metrics.objectives import MODES


def best_first(value: float, trial_id: str, mode: str) -> tuple[float, str]:
    """The sort key (smallest first) of "the best trial": its objective ``value``, the better
    first by ``mode``; trials that tie go by their Ray trial id, lowest first. A trial keeps its
    id across ``--resume`` and in MLflow (tag ``astune.trial_id``), so the search's summary and
    ``best_config.yaml``, ``export``, ``confirm`` and ``recommend`` pick the same trial of a
    tie, whatever order Ray or MLflow hand the trials back in."""
    check_choice("mode", mode, MODES)
    return (-value if mode == "max" else value, trial_id)


@dataclass
class BestTrial:
    """The best trial of a search and the ``astune train --config`` mapping that reruns it."""

    experiment: str
    tracking_uri: str
    parent_run_id: str
    run_id: str | None  # the child run; None when no finished child matches the artifact
    objective: float | None
    metric: str | None  # "val_<metric>" of the dataset's primary metric
    value: float | None  # that metric of the best evaluation of the trial
    config: dict[str, Any]
    source: str  # where the config came from: the artifact or the trial's params
    confirmed_seeds: int | None = None  # set when `astune confirm` chose it: objective is a mean
    trial_id: str | None = None  # the trial's name (tag astune.trial_id); None: a confirm run's

    def describe(self) -> str:
        """One line naming the search, the trial (by its trial id) and its score."""
        score = "objective unknown"
        if self.objective is not None:
            score = f"objective = {self.objective:.6g}"
        if self.confirmed_seeds and self.objective is not None:
            score = f"confirmed winner, mean objective = {self.objective:.6g} over "
            score += f"{self.confirmed_seeds} seeds"
        if self.metric and self.value is not None:
            score += f", {self.metric} = {self.value:.6g}"
        where = f"parent run {self.parent_run_id}"
        if self.run_id is None:
            run = "no matching trial run"
        elif self.trial_id:  # named as the live, front and confirm tables name it
            run, where = f"trial {self.trial_id}", f"MLflow run {self.run_id}, {where}"
        else:  # a confirm run (the baseline's), or a trial run written without the tag
            run = f"{'run' if self.confirmed_seeds else 'trial run'} {self.run_id}"
        return f"search {self.experiment!r}: {run} ({where}), {score}"
