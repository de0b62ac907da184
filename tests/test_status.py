"""`astune status` (issue 72 item 3) on real MLflow stores written by hand (no Ray): a finished
search's trials, best and source; a RUNNING search whose driver's heartbeat went stale, named
with its resume command; a running trial's progress; one line for an unknown experiment. The
view of a live search from another process is test_search's signal test."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest
from hand_store import SINGLE_SEARCH, write_search
from mlflow import MlflowClient
from stores import new_store

import astune
from astune.cli import main
from astune.space.space import load_space
from astune.store.conventions import PORTFOLIO_POINTS
from astune.store.status import PORTFOLIO, SEARCHER, SEED_POINT, STALE_AFTER


@pytest.fixture
def store(tmp_path):
    uri = new_store(tmp_path)
    client = MlflowClient(uri)
    write_search(client, SINGLE_SEARCH, None)
    return uri, client


def test_a_finished_search_lists_its_trials_and_its_best(store):
    uri, _ = store
    found = astune.status(SINGLE_SEARCH, tracking_uri=uri)
    assert found.status == "FINISHED" and not found.stale and found.remaining is not None
    states = {t.trial_id: t.status for t in found.trials}
    assert states["stopped"] == "STOPPED" and states["failed"] == "FAILED"
    assert states["best"] == "FINISHED" and states["close"] == "FINISHED"
    assert found.best is not None and found.best.trial_id == "best"  # 0.800; "failed" not counted
    assert all(t.progress == 1.0 for t in found.trials if t.status in ("FINISHED", "STOPPED"))
    lines = str(found).splitlines()
    assert lines[0].startswith(f"search {SINGLE_SEARCH!r}: finished, 6 trials in ")
    assert "left" not in lines[0]  # nothing is left of a finished search
    assert lines[-1] == "best: best, objective 0.8"


def running_search(
    client: MlflowClient,
    *,
    heartbeat_age: float,
    host: str,
    space: str | None = None,
    portfolio: int | None = None,
    names: tuple[str, str] = ("t_00000", "t_00001"),
) -> str:
    """A RUNNING search whose driver on ``host`` last beat ``heartbeat_age`` s ago, with one
    FINISHED trial and one RUNNING at 40%, started in that order and named ``names`` (Ray's
    ids, random); ``space``: the space file it logged; ``portfolio``: how many of its seed
    points it recorded as the portfolio's; the parent's id."""
    experiment = client.create_experiment("live")
    now = time.time()
    tags = {
        "astune.role": "search", "astune.search_driver.host": host,
        "astune.search_driver.pid": "4242", "astune.search_driver.claimed": f"{now - 600:.3f}",
        "astune.search_driver.heartbeat": f"{now - heartbeat_age:.3f}",
    }  # fmt: skip
    parent = client.create_run(experiment, tags=tags).info.run_id
    for key, value in (("dataset", "sst5"), ("num_samples", 4), ("max_concurrent", 1)):
        client.log_param(parent, key, str(value))
    if space is not None:
        client.log_param(parent, "space", space)
    if portfolio is not None:
        client.log_param(parent, PORTFOLIO_POINTS, str(portfolio))
    for index, (name, status) in enumerate(zip(names, ("FINISHED", "RUNNING"))):
        tags = {"mlflow.parentRunId": parent, "astune.role": "trial", "astune.trial_id": name}
        started = int((now - 500 + index) * 1000)
        run = client.create_run(experiment, start_time=started, tags=tags).info.run_id
        for index in range(2 if status == "FINISHED" else 1):  # as a trial's reports log it
            client.log_metric(run, "objective", 0.5, step=index)
        if status == "RUNNING":
            client.log_metric(run, "progress", 0.4, step=400)
        else:
            client.set_terminated(run, status)
    return parent


def test_a_running_search_with_a_live_driver_says_how_far_it_is(store):
    uri, client = store
    running_search(client, heartbeat_age=5.0, host="elsewhere")
    found = astune.status("live", tracking_uri=uri)
    assert found.status == "RUNNING" and not found.stale
    assert [(t.trial_id, t.progress) for t in found.trials] == [("t_00000", 1.0), ("t_00001", 0.4)]
    assert [t.evaluations for t in found.trials] == [2, 1]
    line = str(found).splitlines()[0]
    assert line.startswith("search 'live': running, 2/4 trials, ") and "left if none stops" in line
    assert " 40% " in str(found)


def test_a_running_search_whose_driver_died_is_named_stale_with_its_resume_command(store, capsys):
    uri, client = store
    running_search(client, heartbeat_age=STALE_AFTER + 1, host="elsewhere")
    assert main(["status", "--experiment", "live", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == (
        f"its driver gave no heartbeat for over {STALE_AFTER:.0f} s: it died or lost the store. "
        f"Resume it with: python -m astune search --dataset sst5 --name live --tracking-uri {uri} "
        "--resume"
    )


def test_an_unknown_experiment_is_one_line(store, capsys):
    uri, _ = store
    assert main(["status", "--experiment", "nope", "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no experiment 'nope'" in err and SINGLE_SEARCH in err


def test_each_trial_says_whether_it_ran_a_seed_point_or_the_searchers_config(store, tmp_path):
    """The space file the search logged starts with one seed point: the first trial ran it,
    the second the searcher's; a file this machine cannot read: unknown, not guessed."""
    uri, client = store
    packaged = load_space(Path(astune.__file__).parent / "search_spaces" / "sst5.yaml")
    space = dataclasses.replace(packaged, points=packaged.points[:1]).dump(tmp_path / "one.yaml")
    running_search(client, heartbeat_age=5.0, host="elsewhere", space=str(space))
    found = astune.status("live", tracking_uri=uri)
    assert [t.source for t in found.trials] == [SEED_POINT, SEARCHER]
    assert str(found).splitlines()[2].endswith(f"  {SEED_POINT}")
    space.unlink()
    assert [t.source for t in astune.status("live", tracking_uri=uri).trials] == ["-", "-"]


def test_the_portfolios_trials_are_named_apart_from_the_spaces_own_seed_points(store, tmp_path):
    """A portfolio's space file: its first seed point is the portfolio's (the search recorded
    one), the second the space's own; the portfolio's is known without the file. Ray's trial
    ids are random: the trials are in the order they started, not by id."""
    uri, client = store
    packaged = load_space(Path(astune.__file__).parent / "search_spaces" / "sst5.yaml")
    space = dataclasses.replace(packaged, points=packaged.points[:2]).dump(tmp_path / "p.yaml")
    names = ("f3a1c2d4", "0b2c9e71")
    running_search(
        client, heartbeat_age=5.0, host="elsewhere", space=str(space), portfolio=1, names=names
    )
    found = astune.status("live", tracking_uri=uri)
    assert [(t.trial_id, t.source) for t in found.trials] == [
        ("f3a1c2d4", PORTFOLIO), ("0b2c9e71", SEED_POINT)
    ]  # fmt: skip
    space.unlink()
    assert [t.source for t in astune.status("live", tracking_uri=uri).trials] == [PORTFOLIO, "-"]


def test_without_an_experiment_the_stores_searches_are_listed_newest_first(store, capsys):
    """`astune status` alone: one line a search (it required --experiment), the newest first;
    a RUNNING search whose driver died is "stale"; its best leaves the failed trial out."""
    uri, client = store
    running_search(client, heartbeat_age=STALE_AFTER + 1, host="elsewhere")
    assert main(["status", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"searches in {uri}, newest first:"
    assert out[1].split() == ["search", "dataset", "state", "trials", "best", "started"]
    assert [row.split()[:5] for row in out[2:4]] == [
        ["live", "sst5", "stale", "2/4", "0.5"],
        [SINGLE_SEARCH, "sst5", "finished", "6", "0.8"],
    ]
    assert out[-1] == "one search, trial by trial: python -m astune status --experiment NAME"
    assert main(["status", "--watch", "--tracking-uri", uri]) == 2
    assert "--watch follows one search: add --experiment NAME" in capsys.readouterr().err


def test_an_empty_store_says_it_holds_no_search(tmp_path, capsys):
    uri = new_store(tmp_path)
    MlflowClient(uri).search_experiments()  # the store's tables, no search
    assert main(["status", "--tracking-uri", uri]) == 0
    assert capsys.readouterr().out.strip() == f"no astune search in {uri}"


def test_a_count_a_resume_raised_is_the_one_status_reads(store):
    """MLflow keeps a param as first logged: `--resume --num-samples 6` on a search of 4 tags
    the new count (astune.changed_on_resume.num_samples), and status counts 6, not 4."""
    uri, client = store
    parent = running_search(client, heartbeat_age=5.0, host="elsewhere")
    client.set_tag(parent, "astune.changed_on_resume.num_samples", "6")
    found = astune.status("live", tracking_uri=uri)
    assert found.num_samples == 6 and str(found).splitlines()[0].startswith(
        "search 'live': running, 2/6 trials, "
    )


def test_a_tie_names_the_trial_export_and_best_config_name(store):
    """Two trials at 0.5: status' best is the lowest trial id, as `export` and
    best_config.yaml pick it (store.best.best_first), not the one that started first."""
    uri, client = store
    running_search(client, heartbeat_age=5.0, host="elsewhere", names=("t_00009", "t_00001"))
    found = astune.status("live", tracking_uri=uri)
    assert [t.trial_id for t in found.trials] == ["t_00009", "t_00001"]  # in the order they began
    assert found.best is not None and found.best.trial_id == "t_00001"


@pytest.mark.parametrize("how", ["ended", "died"])
def test_the_time_a_search_sat_with_no_driver_is_left_out_of_its_time(tmp_path, how):
    """A search that ran 200 s (after an earlier gap of 100 s), then sat two hours with no
    driver (it ended, or its driver died: its last heartbeat), is resumed: the resume adds the
    gap to astune.idle_seconds, and status says it has run about 200 s, not two hours."""
    from astune.store.writer import SearchTracker

    uri = new_store(tmp_path)
    client = MlflowClient(uri)
    now = time.time()
    tags = {"astune.role": "search", "astune.search_id": "gap", "astune.idle_seconds": "100"}
    if how == "died":
        tags.update({
            "astune.search_driver.host": "elsewhere", "astune.search_driver.pid": "4242",
            "astune.search_driver.claimed": f"{now - 7300:.3f}",
            "astune.search_driver.heartbeat": f"{now - 7000:.3f}",
        })  # fmt: skip
    started = int((now - 7300) * 1000)
    parent = client.create_run(client.create_experiment("gap"), start_time=started, tags=tags)
    parent_id = parent.info.run_id
    client.log_param(parent_id, "dataset", "sst5")
    if how == "ended":
        client.set_terminated(parent_id, "KILLED", end_time=int((now - 7000) * 1000))
    tracker = SearchTracker(
        uri, "gap", dataset="sst5", task="single_label", search_params={"dataset": "sst5"}
    )
    assert tracker.start(resume=True) == parent_id
    idle = float(client.get_run(parent_id).data.tags["astune.idle_seconds"])
    assert 7100 <= idle < 7100 + 60  # the old 100 s and the 7,000 s since it was last alive
    found = astune.status("gap", tracking_uri=uri)
    assert found.status == "RUNNING" and 200 <= found.elapsed < 200 + 60
