"""The best trial of a search, as `export` (and `confirm`) hand it on: which run, its score and
the ``astune train --config`` mapping that reruns it. Plain data: no MLflow, no Ray."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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

    def describe(self) -> str:
        """One line naming the search, the run and its score."""
        score = "objective unknown"
        if self.objective is not None:
            score = f"objective = {self.objective:.6g}"
        if self.confirmed_seeds and self.objective is not None:
            score = f"confirmed winner, mean objective = {self.objective:.6g} over "
            score += f"{self.confirmed_seeds} seeds"
        if self.metric and self.value is not None:
            score += f", {self.metric} = {self.value:.6g}"
        kind = "run" if self.confirmed_seeds else "trial run"  # the baseline's is a confirm run
        run = f"{kind} {self.run_id}" if self.run_id else "no matching trial run"
        return f"search {self.experiment!r}: {run} (parent run {self.parent_run_id}), {score}"
