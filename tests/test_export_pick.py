"""`export --within PTS` and `--pick best|fastest` on a multi-objective search written here with
MlflowClient into a real SQLite store (``tests/hand_store.py``, shared with the
``front_store`` fixture): the picks are computed by hand below."""

from __future__ import annotations

import pytest
from hand_store import FRONT_SEARCH, SINGLE_SEARCH

from astune.cli import main
from astune.export import find_best_trial
from astune.export.pick import Pick


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
    assert ids["close"] in header[0]
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
