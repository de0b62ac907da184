"""`export --within PTS` and `--pick best|fastest` on a multi-objective search written here with
MlflowClient into a real SQLite store (``tests/hand_store.py``, shared with the
``front_store`` fixture): the picks are computed by hand below."""

from __future__ import annotations

import csv

import pytest
from hand_store import FRONT_SEARCH, SINGLE_SEARCH

from astune.cli import main
from astune.exporting import find_best_trial
from astune.exporting.pick import Pick
from astune.store.conventions import CONFIRM_FRONT_TAG as FRONT_TAG


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
def test_the_pick_is_the_trial_computed_by_hand(front_store, pick, expected):
    uri, ids = front_store
    best = find_best_trial(FRONT_SEARCH, uri, pick=pick)
    assert best.run_id == ids[expected]
    if pick.on_front:
        assert "picked: the cheapest Pareto-front trial by train_seconds" in best.source


def test_the_export_header_says_which_point_and_why(front_store, tmp_path, capsys):
    uri, ids = front_store
    out = tmp_path / "close.yaml"
    args = ["export", "--experiment", FRONT_SEARCH, "--tracking-uri", uri, "--within", "0.5"]
    assert main([*args, "-o", str(out)]) == 0
    header = out.read_text().splitlines()[:2]
    assert f"trial close (MLflow run {ids['close']}, parent run" in header[0]  # its trial id
    assert "within 0.5 points of the best (0.8)" in header[1]
    assert "objective = 0.797, train_seconds = 60" in header[1]


@pytest.mark.parametrize("flags", [["--pick", "fastest"], ["--within", "0.5"]])
def test_a_front_pick_of_a_single_objective_search_fails_in_one_line(front_store, capsys, flags):
    uri, _ = front_store
    code = main(["export", "--experiment", SINGLE_SEARCH, "--tracking-uri", uri, *flags])
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


# Confirm runs of FRONT_SEARCH over seeds 1-3: config -> (objectives, train seconds) per seed.
# Paired with the baseline, "fast" is 1 point worse (not equal at 0.5 points), "close" is equal
# and 40% faster, "best" is equal and no faster.
CONFIRMED = {
    "baseline": ([0.800, 0.806, 0.803], [100.0, 102.0, 99.0]),
    "fast": ([0.790, 0.796, 0.793], [30.0, 31.0, 30.5]),
    "close": ([0.799, 0.806, 0.802], [60.0, 61.0, 59.0]),
    "best": ([0.802, 0.807, 0.805], [101.0, 100.0, 99.5]),
}


@pytest.fixture(scope="module")
def confirmed_store(tmp_path_factory):
    """The hand store with confirm runs of :data:`CONFIRMED` under FRONT_SEARCH: its URI, the
    trial ids and the parent run (tests tag it as `confirm` would)."""
    from hand_store import log_run, write_front_store
    from mlflow import MlflowClient

    uri, ids = write_front_store(tmp_path_factory.mktemp("confirmed"))
    client = MlflowClient(uri)
    parent = client.get_run(client.get_run(ids["best"]).data.tags["mlflow.parentRunId"])
    for name, (objectives, seconds) in CONFIRMED.items():
        confirms = name if name == "baseline" else ids[name]
        loss = "softmax" if name == "baseline" else "as_softmax"
        tags = {
            "mlflow.parentRunId": parent.info.run_id,
            "astune.role": "confirm",
            "astune.confirms": confirms,
        }
        for seed, (value, time) in enumerate(zip(objectives, seconds), start=1):
            params = {"loss": loss, "lr": 0.001, "seed": seed}
            metrics = {"best_objective": value, "train_seconds": time}
            log_run(client, parent.info.experiment_id, tags, params, metrics)
    return uri, ids, parent.info.run_id


@pytest.mark.parametrize(
    "within, expected, why",
    [
        (0.5, "close", "confirmed faster at equal accuracy by `astune confirm --front` over 3"),
        (2.0, "fast", "confirmed faster at equal accuracy"),  # 1 point worse is equal at 2
        (0.0, "best", "confirmed winner of `astune confirm` over 3 seeds"),  # none is faster
        (None, "best", "confirmed winner of `astune confirm` over 3 seeds"),  # not --front
    ],
)
def test_export_prefers_the_front_point_confirmed_faster_at_equal_accuracy(
    confirmed_store, within, expected, why
):
    from mlflow import MlflowClient

    from astune.confirmation.plan import plan_confirm
    from astune.tuning.confirmation.confirm_summary import mark_front_confirm

    uri, ids, parent_id = confirmed_store
    plan = plan_confirm(FRONT_SEARCH, front=within is not None, seeds=3, tracking_uri=uri)
    mark_front_confirm(plan, within)  # as `confirm` (--front --within WITHIN) leaves the parent
    assert MlflowClient(uri).get_run(parent_id).data.tags.get(FRONT_TAG) == (
        None if within is None else str(within)
    )
    best = find_best_trial(FRONT_SEARCH, uri)
    assert best.run_id == ids[expected]
    assert why in best.source
    objectives = CONFIRMED[expected][0]
    assert best.objective == pytest.approx(sum(objectives) / 3)  # the mean over the seeds
    assert best.confirmed_seeds == 3
    if within == 0.5:  # the paired time difference to the baseline, by hand: -40.33 s
        assert "-40.3 s" in best.source
    # a pick asked for still wins over the confirmed point
    assert find_best_trial(FRONT_SEARCH, uri, pick=Pick(kind="fastest")).run_id == ids["fast"]


def test_a_trial_has_one_name_its_trial_id_in_the_front_confirm_and_export_tables(
    confirmed_store, tmp_path, capsys
):
    """Issue 60: the front table, the confirm table (console, markdown, CSV, the winner line)
    and `export`'s line name a trial by its tag ``astune.trial_id`` (Ray's trial id, which the
    live table shows), never by a prefix of its MLflow run id."""
    from types import SimpleNamespace

    from mlflow import MlflowClient

    from astune.confirmation.table import format_table, markdown, summarize, write_csv
    from astune.store.confirmed import confirmed_configs, confirmed_winner
    from astune.store.pareto import search_front
    from astune.store.reader import Store
    from astune.tuning.confirmation.confirm_summary import ConfirmResult
    from astune.tuning.console import front_lines

    uri, ids, parent_id = confirmed_store
    store, client = Store(uri), MlflowClient(uri)
    tag = {run_id: client.get_run(run_id).data.tags["astune.trial_id"] for run_id in ids.values()}
    assert tag == {run_id: name for name, run_id in ids.items()}  # hand_store's trial ids
    parent = client.get_run(parent_id)

    found = search_front(parent, store.trials(parent_id), needed_by="the test needs")
    table = front_lines(SimpleNamespace(objectives=found.objectives, front=found.front))
    assert [line.split()[0] for line in table[2:]] == [tag[p.run_id] for p in found.front]

    configs = confirmed_configs(store, parent)
    rows = summarize(configs)
    text, md = format_table(rows), markdown(rows)
    lines = format_table(rows, "val_accuracy").splitlines()  # a long metric name, a long label
    for column in ("val_accuracy mean", "train s", "vs baseline"):  # each cell under its name
        at = lines[0].index(column)
        assert all(line[at - 2 : at] == "  " and line[at] != " " for line in lines[1:]), lines
    for config in configs:
        if config.is_baseline:
            assert config.trial_id == "" and "(baseline)" in text
            continue
        assert config.trial_id == tag[config.confirms]
        assert f"{config.label} (trial {config.trial_id})" in text
        assert f"| {config.label} (trial {config.trial_id}) |" in md
    for run_id in ids.values():
        assert run_id[:8] not in text + md
    write_csv(rows, tmp_path / "confirm.csv")
    with open(tmp_path / "confirm.csv", newline="") as handle:
        written = {row["confirms"]: row["trial_id"] for row in csv.DictReader(handle)}
    assert written == {c.confirms: tag.get(c.confirms, "") for c in configs}
    winner = confirmed_winner(configs)
    summary = ConfirmResult(
        experiment=FRONT_SEARCH, tracking_uri=uri, parent_run_id=parent_id, rows=rows,
        metric="val_accuracy", ran=0, reused=12, winner=f"{winner.label} ({winner.name})",
    )  # fmt: skip
    assert f"confirmed winner (best mean): {winner.label} (trial {winner.trial_id})" in (
        summary.format()
    )

    out = tmp_path / "fast.yaml"
    args = ["export", "--experiment", FRONT_SEARCH, "--tracking-uri", uri, "--pick", "fastest"]
    assert main([*args, "-o", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"wrote {out} (yaml) from search 'multi': trial fast (MLflow run ")
    assert find_best_trial(FRONT_SEARCH, uri, pick=Pick(kind="fastest")).trial_id == "fast"
