"""Readers of confirm runs on a real SQLite MLflow store written here with MlflowClient: a
search whose single-run best (delta 0.3) loses to another trial (delta 0.2) once confirmed
over seeds. `export` and `recommend` must follow the confirmed means."""

from __future__ import annotations

from pathlib import Path

import pytest
from hand_store import log_run
from mlflow import MlflowClient
from stores import new_store

from astune.store.reader import Store

# trial -> (delta, single-run objective, confirmed objective per seed 1 and 2)
TRIALS = {"lucky": (0.3, 0.50, (0.30, 0.34)), "steady": (0.2, 0.45, (0.40, 0.42))}
BASELINE = (0.35, 0.37)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[str, dict[str, str]]:
    """The store's URI and trial name -> run id (read-only for the tests)."""
    uri = new_store(tmp_path_factory.mktemp("hand"))
    return uri, write_search(uri, BASELINE)


def write_search(uri: str, baseline: tuple[float, float]) -> dict[str, str]:
    """The search "hand" with TRIALS confirmed and the baseline's per-seed ``baseline``;
    trial name -> run id."""
    client = MlflowClient(tracking_uri=uri)
    artifacts = Path(uri.removeprefix("sqlite:///")).parent / "artifacts"  # not ./mlruns
    exp = client.create_experiment("hand", artifact_location=artifacts.as_uri())
    shared = {"dataset": "sst5", "backbone": "minilm", "num_layers": 1, "seed": 0}
    parent = log_run(
        client,
        exp,
        {"astune.role": "search", "astune.dataset": "sst5"},
        {**shared, "mode": "max", "max_train_samples": 64},
        {},
    )
    child = {"mlflow.parentRunId": parent, "astune.dataset": "sst5", "astune.task": "single_label"}
    ids = {}
    for name, (delta, single, per_seed) in TRIALS.items():
        params = {"loss": "as_softmax", "delta": delta, "lr": 0.001, "seed": 0}
        ids[name] = log_run(
            client,
            exp,
            {**child, "astune.role": "trial"},
            params,
            {"best_objective": single, "val_accuracy": single},
        )
        for seed, value in zip((1, 2), per_seed):
            tags = {**child, "astune.role": "confirm", "astune.confirms": ids[name]}
            log_run(
                client,
                exp,
                tags,
                {**params, "seed": seed},
                {"best_objective": value, "train_seconds": 3.0, "val_accuracy": value},
            )
    for seed, value in zip((1, 2), baseline):
        tags = {**child, "astune.role": "confirm", "astune.confirms": "baseline"}
        log_run(
            client,
            exp,
            tags,
            {"loss": "softmax", "delta": "None", "lr": 0.001, "seed": seed},
            {"best_objective": value, "train_seconds": 2.0, "val_accuracy": value},
        )
    return ids


def test_export_picks_the_confirmed_winner_over_the_single_run_best(store):
    from astune.exporting import find_best_trial, render

    uri, ids = store
    best = find_best_trial("hand", uri)
    assert best.run_id == ids["steady"]
    assert best.objective == pytest.approx(0.41)  # its confirmed mean, not its single run
    assert best.confirmed_seeds == 2 and best.config["delta"] == 0.2
    assert best.config["seed"] == 0  # the search's seed, not a confirm seed
    assert "confirmed winner" in render(best, "yaml").splitlines()[0]


def test_recommend_history_uses_the_confirmed_mean(store):
    from astune.history.difficulty import Difficulty
    from astune.recommendation import history_points

    uri, _ = store
    points, _ = history_points(Store(uri), lambda name, run: Difficulty(name, None, 0.5, 0.1))
    (point,) = points
    assert point.delta == 0.2 and point.objective == pytest.approx(0.41)
    assert point.confirmed_seeds == 2


def test_confirmed_configs_group_runs_by_config_and_seed(store):
    from astune.store.confirmed import confirmed_configs, confirmed_winner

    uri, ids = store
    s = Store(uri)
    configs = confirmed_configs(s, s.require_search("hand"))
    assert [c.confirms for c in configs] == [ids["lucky"], ids["steady"], "baseline"]
    assert (
        configs[1].objectives == {1: 0.40, 2: 0.42} and configs[1].label == "as_softmax delta=0.2"
    )
    assert confirmed_winner(configs).confirms == ids["steady"]
    assert confirmed_winner(configs, "min").confirms == ids["lucky"]


def test_plan_takes_at_most_the_top_best_trials_and_refuses_bad_requests(store):
    from astune.confirmation.plan import plan_confirm

    uri, ids = store
    plan = plan_confirm("hand", top=2, seeds=3, tracking_uri=uri)
    assert [c.confirms for c in plan.candidates] == [ids["lucky"], ids["steady"], "baseline"]
    assert plan.candidates[-1].config == {"loss": "softmax", "lr": 0.001}
    assert plan.seeds == [1, 2, 3]
    assert len(plan.points()) == 9 and len(plan.points({(ids["lucky"], 1)})) == 8
    both = plan_confirm("hand", top=3, tracking_uri=uri)  # top is at most K: both trials
    assert [c.confirms for c in both.candidates] == [c.confirms for c in plan.candidates]
    assert both.notes == (
        "the search has 2 trials that ran to the end, fewer than --top 3; confirming both",
    )
    assert plan.notes == ()
    with pytest.raises(ValueError, match="no experiment 'other'.*astune experiments there: hand"):
        plan_confirm("other", tracking_uri=uri)


def test_a_tie_on_the_best_mean_is_named_beside_the_winner(store):
    """The baseline given steady's seeds: the winner stays the first of the two, and the
    console names the other as tied (it said "confirmed winner" alone)."""
    import dataclasses

    from astune.store.confirmed import confirmed_configs, confirmed_winner, tied_with
    from astune.tuning.confirmation.confirm_summary import ConfirmResult

    uri, ids = store
    s = Store(uri)
    configs = confirmed_configs(s, s.require_search("hand"))
    assert tied_with(configs, confirmed_winner(configs)) == []
    steady = configs[1]
    configs[2] = dataclasses.replace(configs[2], objectives=dict(steady.objectives))
    winner = confirmed_winner(configs)
    assert winner is steady and tied_with(configs, winner) == [configs[2]]
    result = ConfirmResult(
        experiment="hand", tracking_uri=uri, parent_run_id="p", rows=[], metric="accuracy",
        ran=0, reused=6, winner="as_softmax delta=0.2 (trial 1)", tied=("softmax (baseline)",),
    )  # fmt: skip
    verdict = [line for line in str(result).splitlines() if line.startswith("confirmed winner")]
    assert verdict == [
        "confirmed winner (best mean): as_softmax delta=0.2 (trial 1); softmax (baseline) has "
        "the same mean on these seeds: more seeds may part them"
    ]


def test_confirm_names_the_tie_from_the_store(tmp_path):
    """The same wiring end to end: a baseline confirmed at steady's very seeds' scores."""
    from astune.confirmation.plan import plan_confirm
    from astune.tuning.confirmation.confirm_summary import summarize_confirm

    uri = new_store(tmp_path)
    write_search(uri, TRIALS["steady"][2])
    plan = plan_confirm("hand", top=2, seeds=2, tracking_uri=uri)
    result = summarize_confirm(plan, within=None, metric="accuracy", ran=0, reused=6)
    assert result.winner.startswith("as_softmax delta=0.2 (") and result.tied == (
        "softmax (baseline)",
    )
    assert f"{result.winner}; softmax (baseline) has the same mean" in str(result)
    assert (tmp_path / "artifacts").is_dir()  # confirm.csv and the rest, beside the store


def test_configs_that_share_a_label_are_told_apart_by_what_differs(store):
    """Two confirmed AS-Softmax configs at one delta read the same "as_softmax delta=0.2":
    each label gains the params that differ between them (their lr here), no others."""
    import dataclasses

    from mlflow.entities import Param, Run, RunData

    from astune.store.confirmed import confirmed_configs, told_apart

    uri, _ = store
    s = Store(uri)
    lucky, steady, baseline = confirmed_configs(s, s.require_search("hand"))
    params = dict(steady.run.data.params, lr="0.0003")  # steady's config at another lr
    twin_run = Run(lucky.run.info, RunData(params=[Param(k, v) for k, v in params.items()]))
    twin = dataclasses.replace(lucky, label="as_softmax delta=0.2", run=twin_run)
    told = told_apart([twin, steady, baseline])
    assert [c.label for c in told] == [
        "as_softmax delta=0.2 lr=0.0003", "as_softmax delta=0.2 lr=0.001", "softmax"
    ]  # fmt: skip
