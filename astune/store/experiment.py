"""Load one search's MLflow runs into pandas: a row per trial and the history of its evaluations.

The MLflow layout is docs/contract.md's ("MLflow conventions", ``astune.store.writer``): the
experiment is the search name, the parent run is tagged ``astune.role=search``, each trial is a
child run tagged ``astune.role=trial`` whose metrics are logged at ``step = evaluation index``.
A trial's last report (its ``test_*`` metrics and summary numbers such as ``samples_seen``,
which may share a step with an evaluation) is not an evaluation: it is left out of the
histories here. Its entries are known by being logged in the same batch (same step and
timestamp) as a metric that only the last report has (``FINAL_KEYS``).
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from astune.store.conventions import (
    CONFIRM_ROLE,
    DATASET_TAG,
    NOT_APPLICABLE,
    ROLE_TAG,
    SKIPPED_RATIO,
    STOPPED_EARLY_TAG,
    TASK_TAG,
)
from astune.store.reader import existing_store, no_progress_bar

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Run

# Metrics only a trial's last report logs ("final": its flag in earlier versions).
FINAL_KEYS = ("final", "best_objective", "best_evaluation", "test_loss")
HISTORY_KEYS = ("objective", "val_loss", "masked_ratio", SKIPPED_RATIO, "samples_seen")
TRIAL_COLUMNS = (
    "run_id",
    "name",
    "status",
    "loss",
    "delta",
    "dataset",
    "task",
    "stopped_early",
    "best_objective",
    "evaluations",
    "metric",
)


@dataclass
class ExperimentRuns:
    """One experiment's trials (``trials``: a row per child run) and their evaluation histories
    (``history``: columns ``run_id``, ``key``, ``step``, ``value``, one row per evaluation);
    ``confirms``: the runs ``astune confirm`` added (the winners and the baseline rerun over
    seeds), a row each as a trial's, their histories in ``history`` too."""

    experiment: str
    experiment_id: str
    tracking_uri: str
    client: "MlflowClient"
    parent_run_ids: list[str]
    trials: pd.DataFrame
    history: pd.DataFrame
    mode: str = "max"
    confirms: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=TRIAL_COLUMNS))
    _artifacts: dict[str, list[str]] = field(default_factory=dict, repr=False)

    @property
    def parent_run_id(self) -> str | None:
        """The newest search run: the one the report is logged on."""
        return self.parent_run_ids[0] if self.parent_run_ids else None

    def finished(
        self, losses: tuple[str, ...] | None = None, *, confirms: bool = False
    ) -> pd.DataFrame:
        """FINISHED trials (with ``confirms``: confirm runs) with a best objective, of
        ``losses`` (all when None), best first."""
        table = self.confirms if confirms else self.trials
        rows = table[(table["status"] == "FINISHED") & table["best_objective"].notna()]
        if losses is not None:
            rows = rows[rows["loss"].isin(losses)]
        return rows.sort_values("best_objective", ascending=self.mode == "min", kind="stable")

    def series(self, run_id: str, key: str) -> pd.Series:
        """The values of ``key`` at each evaluation of a trial, indexed by evaluation step."""
        rows = self.history[(self.history["run_id"] == run_id) & (self.history["key"] == key)]
        return pd.Series(rows["value"].to_numpy(), index=rows["step"].to_numpy(), name=key)

    def artifact_json(self, run_id: str, path: str) -> Any | None:
        """The parsed JSON artifact ``path`` of a run, or None when the run has no such file."""
        if run_id not in self._artifacts:
            self._artifacts[run_id] = [a.path for a in self.client.list_artifacts(run_id)]
        if path not in self._artifacts[run_id]:
            return None
        with tempfile.TemporaryDirectory() as folder, no_progress_bar():
            local = self.client.download_artifacts(run_id, path, folder)
            return json.loads(Path(local).read_text())


# ----------------------------------------------------------------------------------- loading
def load_runs(experiment: str, tracking_uri: str | None = None) -> ExperimentRuns:
    """Read the experiment named ``experiment`` from the store at ``tracking_uri``.

    Raises:
        ValueError: one line, when the store or the experiment does not exist (listing the
            experiments the store has).
    """
    from mlflow import MlflowClient

    uri = existing_store(tracking_uri).uri  # a local store must exist: MLflow would create it
    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    if found is None or found.lifecycle_stage == "deleted":
        raise ValueError(f"no experiment {experiment!r} in {uri}; {_experiment_list(client)}")
    runs = client.search_runs([found.experiment_id], max_results=50000)
    parents = [r for r in runs if r.data.tags.get(ROLE_TAG) == "search"]
    parents.sort(key=lambda r: r.info.start_time or 0, reverse=True)
    trials = [r for r in runs if r.data.tags.get(ROLE_TAG) == "trial"]
    confirms = [r for r in runs if r.data.tags.get(ROLE_TAG) == CONFIRM_ROLE]
    mode = parents[0].data.params.get("mode", "max") if parents else "max"
    history = _histories(client, trials + confirms)
    return ExperimentRuns(
        experiment=experiment,
        experiment_id=found.experiment_id,
        tracking_uri=uri,
        client=client,
        parent_run_ids=[r.info.run_id for r in parents],
        trials=_trial_table(trials, history, mode),
        history=history,
        mode=mode if mode in ("max", "min") else "max",
        confirms=_trial_table(confirms, history, mode),
    )


def _experiment_list(client: "MlflowClient") -> str:
    names = sorted(e.name for e in client.search_experiments() if e.name != "Default")
    return f"experiments: {', '.join(names)}" if names else "the store has no experiments"


def _histories(client: "MlflowClient", trials: list["Run"]) -> pd.DataFrame:
    frames = [_run_history(client, run) for run in trials]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=["run_id", "key", "step", "value"])
    return pd.concat(frames, ignore_index=True)


def _run_history(client: "MlflowClient", run: "Run") -> pd.DataFrame:
    """One run's evaluations: the final report dropped; of a step logged twice (a resumed
    trial repeats the evaluations after its checkpoint) the latest value kept."""
    run_id = run.info.run_id
    final = {
        (m.step, m.timestamp)
        for key in FINAL_KEYS
        if key in run.data.metrics
        for m in client.get_metric_history(run_id, key)
    }
    keys = [k for k in run.data.metrics if k in HISTORY_KEYS or k.startswith("val_")]
    rows = [
        (run_id, key, m.step, m.value, m.timestamp)
        for key in keys
        for m in client.get_metric_history(run_id, key)
        if (m.step, m.timestamp) not in final
    ]
    frame = pd.DataFrame(rows, columns=["run_id", "key", "step", "value", "timestamp"])
    frame = frame.sort_values(["key", "step", "timestamp"], kind="stable")
    frame = frame.drop_duplicates(["key", "step"], keep="last")
    return frame.drop(columns="timestamp").reset_index(drop=True)


def _trial_table(trials: list["Run"], history: pd.DataFrame, mode: str) -> pd.DataFrame:
    rows = [_trial_row(run, history, mode) for run in trials]
    return pd.DataFrame(rows, columns=list(TRIAL_COLUMNS))


def _trial_row(run: "Run", history: pd.DataFrame, mode: str) -> dict[str, Any]:
    run_id = run.info.run_id
    own = history[history["run_id"] == run_id]
    objective = own[own["key"] == "objective"].sort_values("step")["value"]
    finite = objective[objective.map(math.isfinite)]
    best = (finite.max() if mode == "max" else finite.min()) if len(finite) else float("nan")
    return {
        "run_id": run_id,
        "name": run.info.run_name or run_id[:8],
        "status": run.info.status,
        "loss": run.data.params.get("loss", NOT_APPLICABLE),
        "delta": _number(run.data.params.get("delta")),
        "dataset": run.data.tags.get(DATASET_TAG, "?"),
        "task": run.data.tags.get(TASK_TAG, "?"),
        "stopped_early": run.data.tags.get(STOPPED_EARLY_TAG) == "true",
        "best_objective": float(best),
        "evaluations": len(objective),
        "metric": _primary_metric(own, objective.to_numpy()),
    }


def _number(text: str | None) -> float:
    try:
        return float(text) if text not in (None, NOT_APPLICABLE) else float("nan")
    except ValueError:
        return float("nan")


def _primary_metric(own: pd.DataFrame, objective: Any) -> str:
    """The ``val_<metric>`` that ``objective`` repeats (the dataset's primary metric)."""
    for key, rows in own.groupby("key"):
        if key.startswith("val_") and key != "val_loss":
            values = rows.sort_values("step")["value"].to_numpy()
            if len(values) == len(objective) and (values == objective).all():
                return str(key)
    return "objective"
