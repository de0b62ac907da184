"""`confirm --front`: the plan (the Pareto front of a search written here with MlflowClient, the
cheapest first, and the baseline) and the verdict "faster at equal accuracy", checked against
t intervals computed here with scipy."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from hand_store import FRONT_SEARCH, ONE_FRONT_SEARCH, SINGLE_SEARCH, UNFINISHED_SEARCH
from mlflow import MlflowClient
from scipy import stats

from astune.cli import main
from astune.confirmation.plan import plan_confirm
from astune.confirmation.table import summarize
from astune.store.confirmed import ConfirmedConfig
from astune.store.conventions import CONFIRM_BASELINE
from astune.tuning.confirmation.confirm import ConfirmSettings


def test_the_plan_is_the_front_cheapest_first_and_the_baseline_of_the_best(front_store):
    uri, ids = front_store
    plan = plan_confirm(FRONT_SEARCH, front=True, seeds=2, tracking_uri=uri)
    # front (see test_export_pick): fast (30 s), close (60 s), best (100 s); not "dominated",
    # "stopped" or "failed"
    assert [c.confirms for c in plan.candidates] == [
        ids["fast"], ids["close"], ids["best"], CONFIRM_BASELINE,
    ]  # fmt: skip
    baseline = plan.candidates[-1]
    assert baseline.config["loss"] == "softmax"
    assert baseline.config["lr"] == pytest.approx(0.001)  # the best trial's ("best" is first)
    top = plan_confirm(FRONT_SEARCH, front=True, top=2, seeds=2, tracking_uri=uri)
    assert [c.confirms for c in top.candidates] == [ids["fast"], ids["close"], CONFIRM_BASELINE]


def test_a_front_without_costs_or_finished_trials_fails_in_one_line(front_store):
    uri, _ = front_store
    with pytest.raises(ValueError, match="--front needs a search with a cost objective"):
        plan_confirm(SINGLE_SEARCH, front=True, tracking_uri=uri)
    with pytest.raises(ValueError, match="--front needs a finished trial, but no trial") as err:
        plan_confirm(UNFINISHED_SEARCH, front=True, tracking_uri=uri)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="within applies to a confirm of the front"):
        ConfirmSettings(FRONT_SEARCH, within=1.0).validate()


def test_a_top_above_a_one_trial_front_confirms_that_trial_and_says_so(front_store):
    """Issue 60: `confirm --front --top 3` (docs/searching.md) on a front of one trial."""
    uri, _ = front_store
    plan = plan_confirm(ONE_FRONT_SEARCH, front=True, top=3, seeds=2, tracking_uri=uri)
    client = MlflowClient(uri)
    (only, baseline) = plan.candidates
    assert client.get_run(only.confirms).data.tags["astune.trial_id"] == "only"
    assert baseline.confirms == CONFIRM_BASELINE
    assert plan.notes == ("the front has 1 trial, fewer than --top 3; confirming it",)
    assert plan_confirm(ONE_FRONT_SEARCH, front=True, seeds=2, tracking_uri=uri).notes == ()


def test_top_is_at_most_k_also_without_front_and_bad_values_fail_in_one_line(front_store):
    uri, ids = front_store
    whole = plan_confirm(FRONT_SEARCH, front=True, top=4, seeds=2, tracking_uri=uri)
    assert [c.confirms for c in whole.candidates[:-1]] == [ids["fast"], ids["close"], ids["best"]]
    assert whole.notes == ("the front has 3 trials, fewer than --top 4; confirming all 3",)
    # one objective: "best", "close", "fast", "dominated" ran to the end ("stopped" did not)
    ranked = plan_confirm(SINGLE_SEARCH, top=9, seeds=2, tracking_uri=uri)
    assert len(ranked.candidates) == 4 + 1  # and the baseline
    assert ranked.notes == (
        "the search has 4 trials that ran to the end, fewer than --top 9; confirming all 4",
    )
    for bad in (0, -1, 1.5, "2"):
        with pytest.raises(ValueError, match=r"top must be an integer in \[1, inf\), but got"):
            plan_confirm(SINGLE_SEARCH, top=bad, tracking_uri=uri)
    with pytest.raises(ValueError, match="confirm needs a trial that ran to the end") as err:
        plan_confirm(UNFINISHED_SEARCH, tracking_uri=uri)  # its one trial failed
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("top", ["0", "-1", "1.5", "two"])
def test_the_command_refuses_a_bad_top_in_one_line_naming_it_and_the_range(top, capsys):
    with pytest.raises(SystemExit) as exit_info:  # argparse's: before the store is opened
        main(["confirm", "--experiment", FRONT_SEARCH, "--top", top])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"--top: must be an integer in [1, inf), but got '{top}'" in err


def test_the_command_prints_the_note_before_it_runs(front_store, monkeypatch, capsys):
    """The note comes before the runs (the planning is real; preparing the data and Ray are
    left out)."""
    from astune.tuning.confirmation import confirm

    uri, _ = front_store

    def prepare(settings):
        plan = plan_confirm(
            settings.experiment, top=settings.top, front=settings.front, tracking_uri=uri
        )
        return SimpleNamespace(plan=plan)

    ran = SimpleNamespace(format=lambda: "the table", rows=[None])
    monkeypatch.setattr(confirm, "prepare_confirm", prepare)
    monkeypatch.setattr(confirm, "execute_confirm", lambda prepared: ran)
    args = ["confirm", "--experiment", ONE_FRONT_SEARCH, "--front", "--top", "3"]
    assert main([*args, "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["the front has 1 trial, fewer than --top 3; confirming it", "the table"]


def confirmed(name: str, objectives: list[float], seconds: list[float]) -> ConfirmedConfig:
    seeds = range(1, len(objectives) + 1)
    return ConfirmedConfig(
        name, name, None, dict(zip(seeds, objectives)), dict(zip(seeds, seconds))
    )


def interval(diffs: list[float]) -> tuple[float, float]:
    """Reference: the 95% t interval of the mean of ``diffs``."""
    n = len(diffs)
    mean = sum(diffs) / n
    half = stats.t.ppf(0.975, n - 1) * stats.tstd(diffs) / math.sqrt(n)
    return mean - half, mean + half


@pytest.mark.parametrize("within", [0.5, 2.0])
def test_the_verdict_needs_significantly_less_time_and_the_metric_within_the_points(within):
    baseline = confirmed(CONFIRM_BASELINE, [0.800, 0.810, 0.805], [100.0, 101.0, 99.0])
    configs = [
        confirmed("same-speed", [0.800, 0.811, 0.804], [99.0, 102.0, 98.0]),  # not faster
        confirmed("fast-equal", [0.799, 0.808, 0.805], [60.0, 61.5, 59.0]),  # 0.1 point lower
        confirmed("fast-worse", [0.785, 0.793, 0.790], [50.0, 51.0, 49.5]),  # 1.6 points lower
        baseline,
    ]
    rows = summarize(configs, within=within, mode="max")
    for row in rows[:-1]:
        c = row.config
        metric = interval([c.objectives[s] - baseline.objectives[s] for s in c.seeds])
        time = interval([c.train_seconds[s] - baseline.train_seconds[s] for s in c.seeds])
        assert (row.time_difference.interval.low, row.time_difference.interval.high) == (
            pytest.approx(time[0]), pytest.approx(time[1]),
        )  # fmt: skip
        expected = bool(time[1] < 0 and metric[0] > -within / 100)
        assert row.faster_at_equal is expected, (c.label, metric, time)
    verdicts = {row.config.label: row.faster_at_equal for row in rows}
    assert verdicts["same-speed"] is False and verdicts["fast-equal"] is True
    assert verdicts["fast-worse"] is (within == 2.0)
    assert verdicts[CONFIRM_BASELINE] is None
    assert all(row.faster_at_equal is None for row in summarize(configs))  # not asked for
