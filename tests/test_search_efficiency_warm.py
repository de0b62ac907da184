"""The search-efficiency benchmark's warm arms (benchmarks/search_efficiency/warm.py): the
reference a
held-out dataset learns from holds the other datasets only; the warmed arm lies on the grid
and starts from the transferred config; the probe's seconds open the replay."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from synthetic_tables import STARTUP, synthetic_rows

from astune.history.difficulty import Difficulty
from astune.history.reference import load_reference
from astune.history.transfer import TaskProfile, advise, ranked
from astune.recommendation.result import Recommendation
from astune.recommendation.schedules import ScheduleAdvice
from benchmarks.search_efficiency import arms, lineup, portfolio_arm, replay, settings, tables, warm
from benchmarks.search_efficiency import prior as refresh_reference


def _warm_start(advice) -> warm.WarmStart:
    rec = Recommendation(
        dataset="sst5",
        delta=0.3,
        low=0.25,
        high=0.35,
        warmup_ratio=0.0,
        difficulty=Difficulty("sst5", "single_label", 0.9, 0.03),
        prior_delta=0.3,
        fit_delta=None,
        history_weight=0.0,
        schedule=ScheduleAdvice(band="hard", schedule="fixed", params={}, tallies={}),
        transfer=advice,
    )
    return warm.WarmStart(rec, seconds=7.0, reference_datasets=("clinc_oos",))


def test_the_warm_arm_lies_on_the_grid_and_starts_from_what_history_knows():
    profile = TaskProfile(0.9, "single_label", 1000, settings.BACKBONE, 2)
    best = {"loss": "as_softmax", "lr": 1e-3, "epochs": 2, "batch_size": 32, "as_speed": False}
    trials = [t for i in range(12) for t in ranked(f"s{i}", "x", profile, [(best, 0.5)] * 4)]
    advice = advise(profile, trials)
    assert advice.weight > 0.5
    keys = {settings.config_key(c) for c in settings.grid("sst5")}
    for name in arms.WARM_ARMS:
        arm = lineup.build_arm(name, "sst5", warm=_warm_start(advice))
        assert all(settings.config_key(p) in keys for p in arm.seed_points)
        first = arm.seed_points[0]
        assert first["lr"] == 1e-3 and first["batch_size"] == 32 and first["epochs"] == 2
        assert first["loss"] == "as_softmax" and first["delta"] == 0.3
        assert set(arm.values["delta"]) <= {0.2, 0.3, 0.4} and 0.3 in arm.values["delta"]
        assert 1e-4 not in arm.values["lr"]  # the shipped 1e-4 lies outside the moved range
    fast = lineup.build_arm("astune-fast", "sst5", warm=_warm_start(advice))
    assert set(settings.FAST_LEVERS) <= set(fast.values["loss"])


def test_history_that_pruned_as_infobatch_starts_the_fast_arm_on_its_lever():
    """The best trials of similar tasks ran AS-Skip's soft policy (InfoBatch's pruning),
    grouped: the fast arm's first point is that lever; the warm arm, which lacks the levers,
    starts AS-Softmax."""
    profile = TaskProfile(0.9, "single_label", 1000, settings.BACKBONE, 2)
    best = refresh_reference.trial_config(
        "sst5", {"loss": "as_skip_soft", "lr": 1e-3, "batch_size": 32, "epochs": 2}
    )
    assert best["as_skip"] is True and best["skip_policy"] == "soft"
    assert best["length_window"] == settings.FAST_LENGTH_WINDOW
    trials = [t for i in range(12) for t in ranked(f"s{i}", "x", profile, [(best, 0.5)] * 4)]
    start = _warm_start(advise(profile, trials))
    first = lineup.build_arm("astune-fast", "sst5", warm=start).seed_points[0]
    assert first["loss"] == "as_skip_soft" and first["lr"] == 1e-3 and first["epochs"] == 2
    assert (
        lineup.build_arm("astune-warm", "sst5", warm=start).seed_points[0]["loss"] == "as_softmax"
    )


def test_no_history_leaves_the_warm_arm_the_cold_one():
    """A recommendation that rests on the paper's rule alone (delta 0.3, range 0.25-0.35
    here) leaves the shipped delta range and seed points: the warm arm is the cold one."""
    cold = lineup.build_arm("astune", "sst5")
    arm = lineup.build_arm(
        "astune-warm", "sst5", warm=_warm_start(advise(TaskProfile(0.9, None, 1, "x"), []))
    )
    for key in ("lr", "batch_size", "delta", "warmup_ratio", "epochs"):
        assert arm.values[key] == cold.values[key], key
    assert arm.seed_points[0] == cold.seed_points[0]


def test_a_warm_arm_runs_to_its_datasets_most_epochs():
    """CLINC150's warm arms, with nothing learnt, search its 1 to 8 epochs as the cold one,
    start at 8 and cut by ASHA up to 8 (efficiency_settings.epochs_of)."""
    cold = warm.WarmStart(None, seconds=0.0, reference_datasets=("sst5",))
    for name in arms.WARM_ARMS:
        arm = lineup.build_arm(name, "clinc_oos", warm=cold)
        assert arm.values["epochs"] == settings.epochs_of("clinc_oos") == (1, 2, 4, 8)
        assert arm.max_epochs == 8 and {p["epochs"] for p in arm.seed_points} == {8}


def test_the_probe_seconds_open_the_replay():
    table = replay.Table(pd.DataFrame(synthetic_rows(settings.grid("sst5"))))
    arm = lineup.build_arm("astune", "sst5")
    run = replay.Replay(table, arm, seed=0, budget=200.0, overhead=7.0).run()
    assert min(t.start for t in run.trials) == 7.0
    first = min(run.curve, key=lambda p: p.seconds)
    launch = settings.ACTOR_START_SECONDS + STARTUP  # each worker's first trial: a fresh actor
    assert first.seconds >= settings.WORKERS * (7.0 + launch)


@pytest.mark.slow
def test_the_held_out_reference_holds_the_other_datasets_only(tmp_path):
    """Synthetic tables for SST-5 and CoNLL-2003: the reference of held-out SST-5 is CoNLL's
    (probed for real), ranked by seed-mean final score; SST-5's table is never read."""
    for name in ("sst5", "conll2003"):
        tables.write_shard(tables.table_dir(name, tmp_path), synthetic_rows(settings.grid(name)))
    path = warm.held_out_reference("sst5", tmp_path, root=tmp_path)
    raw = json.loads(path.read_text())
    assert [e["dataset"] for e in raw["searches"]] == ["conll2003"] and raw["held_out"] == "sst5"
    entry = raw["searches"][0]
    assert entry["train_size"] == settings.DATASETS["conll2003"].train
    assert 0.0 <= entry["difficulty"] <= 1.0 and entry["task"] == "token"
    scores = [t["score"] for t in entry["trials"]]
    assert scores == sorted(scores, reverse=True)
    assert len(scores) == entry["ranked"] == len(settings.grid("conll2003"))  # every config
    warm_share = load_reference(path)  # the warm start reads the best quarter of them
    assert len(warm_share) == -(-entry["ranked"] // 4)
    assert [t.config for t in warm_share] == [t["config"] for t in entry["trials"]][
        : len(warm_share)
    ]
    best = refresh_reference.config_scores(
        tables.read_table(tables.table_dir("conll2003", tmp_path))
    )
    assert scores[0] == pytest.approx(max(s for _, s in best))
    assert entry["trials"][0]["config"]["lr"] == settings.LRS[1]  # the synthetic optimum


def test_the_portfolio_arm_runs_first_what_won_on_the_other_tables(tmp_path):
    """Issue 62, mode a: synthetic tables for SST-5 and CoNLL-2003; held-out SST-5's portfolio
    is learnt from CoNLL-2003's table alone, through astune's own portfolio code, and its arm
    runs the table's optimum (lr 2e-4, batch 16, an AS loss, the most epochs) first."""
    for name in ("sst5", "conll2003"):
        tables.write_shard(tables.table_dir(name, tmp_path), synthetic_rows(settings.grid(name)))
    start = portfolio_arm.portfolio_start("sst5", root=tmp_path)
    assert start.reference_datasets == ("conll2003",)
    assert start.seconds > 0.0  # a time: measured, never bounded in a test
    best = start.entries[0]
    assert best.source == "prior conll2003" and best.mean_regret == 0.0
    expected = {"loss": "as_softmax", "lr": settings.LRS[1], "batch_size": 16, "epochs": 4}
    assert {k: best.config[k] for k in expected} == expected
    arm = lineup.build_arm(portfolio_arm.PORTFOLIO_ARM, "sst5", portfolios={"prior": start})
    assert {k: arm.seed_points[0][k] for k in expected} == expected
    with pytest.raises(ValueError, match="needs its portfolio"):
        lineup.build_arm(portfolio_arm.PORTFOLIO_ARM, "sst5")


def test_hypervolume_is_the_area_the_front_dominates():
    from benchmarks.search_efficiency.pareto import hypervolume

    # Reference: metric 0, two trial-lengths. Two front points and one dominated, one outside.
    points = [(0.5, 10.0), (0.8, 15.0), (0.4, 18.0), (0.9, 25.0)]
    assert hypervolume(points, trial_length=10.0) == pytest.approx(0.5 * 0.5 + 0.5 * 0.8)
    assert hypervolume([], trial_length=10.0) == 0.0
    # The same by counting a fine grid of (cost, metric) cells dominated by some point.
    import numpy as np

    costs, metrics = np.meshgrid(
        np.linspace(0, 2, 801)[:-1] + 1 / 800, np.linspace(0, 1, 401)[:-1] + 1 / 800
    )
    covered = np.zeros_like(costs, dtype=bool)
    for m, s in points:
        covered |= (costs >= s / 10.0) & (metrics <= m)
    assert hypervolume(points, trial_length=10.0) == pytest.approx(covered.mean() * 2.0, abs=0.01)


def test_mo_halving_stops_trials_that_never_enter_the_front():
    from benchmarks.search_efficiency.pareto import ParetoArm, ParetoReplay

    table = replay.Table(pd.DataFrame(synthetic_rows(settings.grid("sst5"))))
    base = lineup.build_arm("astune-fast-cold", "sst5")
    budget = 30 * table.trial_length()
    halving = ParetoReplay(table, ParetoArm(base, halving=True), seed=0, budget=budget).run()
    fifo = ParetoReplay(table, ParetoArm(base, halving=False), seed=0, budget=budget).run()
    assert any(t.stopped for t in halving.trials) and not any(t.stopped for t in fifo.trials)
    assert len(halving.finished) == sum(t.end is not None and not t.stopped for t in halving.trials)
    hv = [v for _, v in halving.hv_curve]
    assert hv == sorted(hv) and hv[-1] > 0  # a front only grows
    states = halving.searcher.trial_states()
    stopped = {f"trial_{i:05d}" for i, t in enumerate(halving.trials) if t.stopped and t.end}
    assert stopped and {states[t] for t in stopped} == {"PRUNED"}


def _arm_result(seconds, reached, regret=1.0):
    return {
        "seconds_to_target": {"median": float(np.median(seconds)), "per_repetition": seconds,
                              "reached": reached},
        "final_regret": {"median": regret},
    }  # fmt: skip


def test_warm_minus_cold_is_paired_by_repetition():
    from benchmarks.search_efficiency.verdicts import paired_difference

    cold = _arm_result([100.0, 200.0, 300.0, 400.0], [True] * 4)
    warm = _arm_result([90.0, 150.0, 310.0, 380.0], [True] * 4)
    diff = paired_difference(warm, cold)
    assert diff["per_repetition"] == [-10.0, -50.0, 10.0, -20.0]
    assert diff["median"] == -15.0 and diff["low"] <= -15.0 <= diff["high"]
    assert not diff["wholly_above_zero"]
    slower = paired_difference(_arm_result([110.0, 210.0, 320.0, 405.0], [True] * 4), cold)
    assert slower["wholly_above_zero"] and slower["low"] > 0
    checked = _arm_result([100.0002, 200.0002, 300.0002, 400.0002], [True] * 4)  # 0.2 ms more
    same = paired_difference(checked, cold)
    assert same["per_repetition"] == [0.0] * 4 and not same["wholly_above_zero"]


def test_target_check_applies_items_2_and_6():
    from benchmarks.search_efficiency.verdicts import target_check

    hand = _arm_result([1000.0] * 9 + [4000.0], [True] * 9 + [False], regret=0.5)
    fast = _arm_result([200.0] * 10, [True] * 10, regret=0.4)
    check = target_check({"by-hand": hand, "astune-fast": fast}, budget=4000.0, trial_length=100.0)
    assert check["counts"] and check["by_hand_reached_share"] == 0.9
    assert check["by_hand_median_trial_lengths"] == 10.0 and check["fast_over_by_hand"] == 0.2
    assert check["met"]
    early = _arm_result([500.0] * 10, [True] * 10)  # by-hand done in 5 trial-lengths: too easy
    assert not target_check({"by-hand": early}, budget=4000.0, trial_length=100.0)["counts"]
    worse = _arm_result([200.0] * 10, [True] * 10, regret=0.6)
    assert not target_check({"by-hand": hand, "astune-fast": worse}, budget=4000.0,
                            trial_length=100.0)["met"]  # fmt: skip
