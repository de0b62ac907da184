"""`astune report` after `astune confirm --baseline softmax` on a search of AS-Softmax alone:
the softmax baseline of the delta figure and the softmax histogram of p_margin come from the
confirm's softmax reruns (they said "no softmax trial in this search"), on a real SQLite store
written by hand (no Ray)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from hand_store import log_run
from mlflow import MlflowClient
from stores import new_store

from astune.analysis.report import run_study
from astune.store.experiment import load_runs

HISTOGRAM = {"edges": [-1.0, 0.0, 1.0], "counts": [1, 3]}
AS_TRIALS = {0.2: 0.51, 0.4: 0.47}  # delta -> objective
SOFTMAX_SEEDS = (0.44, 0.46, 0.48)  # confirm's softmax reruns, one a seed


def write_confirmed_search(client: MlflowClient, artifacts: Path) -> str:
    """A search of two AS-Softmax trials and a confirm's three softmax reruns, their artifacts
    in ``artifacts`` (MLflow's default is ./mlruns); the parent's id."""
    exp = client.create_experiment("confirmed", artifact_location=artifacts.as_uri())
    tags = {"astune.role": "search", "astune.dataset": "sst5"}
    parent = log_run(client, exp, tags, {"dataset": "sst5", "mode": "max"}, {})
    child = {"mlflow.parentRunId": parent, "astune.dataset": "sst5", "astune.task": "single_label"}
    for delta, value in AS_TRIALS.items():
        params = {"loss": "as_softmax", "delta": delta}
        log_run(client, exp, {**child, "astune.role": "trial"}, params, {"objective": value})
    for value in SOFTMAX_SEEDS:
        params, rerun = {"loss": "softmax", "delta": "None"}, {**child, "astune.role": "confirm"}
        run = log_run(client, exp, rerun, params, {"objective": value})
        client.log_dict(run, HISTOGRAM, "p_margin.json")
    return parent


def test_the_softmax_baseline_comes_from_confirms_reruns(tmp_path):
    uri = new_store(tmp_path)
    write_confirmed_search(MlflowClient(uri), tmp_path / "artifacts")
    runs = load_runs("confirmed", uri)
    assert len(runs.trials) == 2 and len(runs.confirms) == 3  # the reruns are no trials
    assert sorted(runs.finished(confirms=True)["best_objective"]) == list(SOFTMAX_SEEDS)

    delta = run_study("delta_sensitivity", runs, tmp_path)
    assert delta.data["points"]["sst5"] == sorted(AS_TRIALS.items())
    assert delta.data["baseline"] == {"sst5": pytest.approx(statistics.mean(SOFTMAX_SEEDS))}
    assert delta.data["confirmed"] == {"sst5": 3}
    assert delta.notes == [
        "no softmax trial of sst5 in this search; its baseline is confirm's softmax rerun, the "
        "mean of its 3 seeds"
    ]

    margin = run_study("p_margin", runs, tmp_path)
    softmax = margin.data["histograms"]["softmax"]
    assert softmax["best_objective"] == max(SOFTMAX_SEEDS) and softmax["fraction"] == [0.25, 0.75]
    assert "no softmax trial in this search; shown: the best of confirm's softmax runs" in (
        margin.notes
    )
