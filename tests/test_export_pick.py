"""`export --within PTS` and `--pick best|fastest` on a multi-objective search written here with
MlflowClient into a real SQLite store: the picks are computed by hand below."""

from __future__ import annotations

import pytest
from mlflow import MlflowClient

from astune.cli import main
from astune.export import find_best_trial
from astune.export.pick import Pick

# trial -> (objective, train_seconds, status, stopped early)
TRIALS = {
    "best": (0.800, 100.0, "FINISHED", False),
    "close": (0.797, 60.0, "FINISHED", False),  # 0.3 points below the best, 40% faster
    "fast": (0.790, 30.0, "FINISHED", False),  # 1 point below, 70% faster
    "dominated": (0.780, 40.0, "FINISHED", False),  # "fast" beats it on both
    "stopped": (0.700, 5.0, "FINISHED", True),  # ASHA stopped it: never on the front
    "failed": (0.900, 1.0, "FAILED", False),
}


def _run(client, experiment_id, tags, params, metrics, status="FINISHED"):
    run = client.create_run(experiment_id, tags=tags)
    for key, value in params.items():
        client.log_param(run.info.run_id, key, str(value))
    for key, value in metrics.items():
        client.log_metric(run.info.run_id, key, value)
    client.set_terminated(run.info.run_id, status)
    return run.info.run_id


def _search(client, name: str, objectives: str | None) -> dict[str, str]:
    exp = client.create_experiment(name)
    params = {"dataset": "sst5", "backbone": "minilm", "num_layers": 1, "seed": 0, "mode": "max"}
    if objectives is not None:
        params["objectives"] = objectives
    parent = _run(client, exp, {"astune.role": "search", "astune.dataset": "sst5"}, params, {})
    ids = {}
    for i, (trial, (value, seconds, status, stopped)) in enumerate(TRIALS.items()):
        tags = {"mlflow.parentRunId": parent, "astune.role": "trial", "astune.trial_id": trial}
        if stopped:
            tags["astune.stopped_early"] = "true"
        metrics = {"best_objective": value, "val_accuracy": value, "train_seconds": seconds}
        params = {"loss": "as_softmax", "delta": 0.3, "lr": 0.001 * (i + 1), "seed": 0}
        ids[trial] = _run(client, exp, tags, params, metrics, status)
    return ids


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[str, dict[str, str]]:
    uri = f"sqlite:///{tmp_path_factory.mktemp('pick') / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    ids = _search(client, "multi", "objective,train_seconds")
    _search(client, "single", None)
    return uri, ids


@pytest.mark.parametrize(
    "pick, expected",
    [
        (Pick(), "best"),  # the best metric, as without costs
        (Pick(within=0.5), "close"),  # 0.797 >= 0.800 - 0.005; "fast" is 0.010 below
        (Pick(within=1.0), "fast"),  # 0.790 >= 0.800 - 0.010, and the cheapest
        (Pick(within=0.0), "best"),  # nothing below the best: the best itself
        (Pick(kind="fastest"), "fast"),  # the cheapest front trial ("stopped" is not on it)
    ],
)
def test_the_pick_is_the_trial_computed_by_hand(store, pick, expected):
    uri, ids = store
    best = find_best_trial("multi", uri, pick=pick)
    assert best.run_id == ids[expected]
    if pick.on_front:
        assert "picked: the cheapest Pareto-front trial by train_seconds" in best.source


def test_the_export_header_says_which_point_and_why(store, tmp_path, capsys):
    uri, ids = store
    out = tmp_path / "close.yaml"
    args = ["export", "--experiment", "multi", "--tracking-uri", uri, "--within", "0.5"]
    assert main([*args, "-o", str(out)]) == 0
    header = out.read_text().splitlines()[:2]
    assert ids["close"] in header[0]
    assert "within 0.5 points of the best (0.8)" in header[1]
    assert "objective = 0.797, train_seconds = 60" in header[1]


@pytest.mark.parametrize("flags", [["--pick", "fastest"], ["--within", "0.5"]])
def test_a_front_pick_of_a_single_objective_search_fails_in_one_line(store, capsys, flags):
    uri, _ = store
    code = main(["export", "--experiment", "single", "--tracking-uri", uri, *flags])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "need a search with a cost objective" in err and "'objective' alone" in err


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(within=-0.5), r"within must be in \[0.0, inf\)"),
        (dict(kind="slowest"), "pick must be one of 'best', 'fastest'"),
        (dict(kind="fastest", within=1.0), "give --within or --pick fastest, not both"),
    ],
)
def test_bad_picks_fail_with_one_line(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Pick(**kwargs)
