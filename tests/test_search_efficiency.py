"""The search-efficiency benchmark's machinery (issue 44): the replay of the real Ray Tune
searchers and ASHA on a synthetic table (``synthetic_tables``), its time accounting and
targets, the JSON of item 7 and the transfer read. The tables and their recorder:
``test_search_efficiency_tables.py``."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import pandas as pd
import pytest
from synthetic_tables import STARTUP, TAIL, epoch_seconds, quality, synthetic_rows

from benchmarks.common import provenance
from benchmarks.search_efficiency import arms, lineup, replay, replay_runs, settings, tables
from benchmarks.search_efficiency import cli as search_efficiency


@pytest.fixture(scope="module")
def table() -> replay.Table:
    return replay.Table(pd.DataFrame(synthetic_rows(settings.grid("sst5"))))


def one_config_arm(epochs: int) -> arms.Arm:
    """An arm of one softmax config (the lowest lr, batch 16, ``epochs``), no ASHA cut."""
    values = {
        "loss": ("softmax",),
        "lr": settings.LRS[:1],
        "batch_size": (16,),
        "lr_warmup_ratio": (0.0,),
        "epochs": (epochs,),
    }
    return arms.Arm(
        "one",
        values,
        (),
        prune_aware=True,
        grace_period=epochs,
        reduction_factor=2,
        max_epochs=max(settings.EPOCHS),
        reuse_actors=False,
    )


def overlapping(trials: list[replay.TrialLog], now: float) -> int:
    return sum(t.start <= now < (t.end if t.end is not None else float("inf")) for t in trials)


def test_two_workers_and_summed_trial_seconds(table):
    """By-hand on the synthetic table: never more than 2 trials at once, a freed worker starts
    the next trial at once, an ended trial ran Ray's actor start and its recorded seconds (by-hand
    reuses no actor), ASHA's stops cost less than the whole run, and the trial-seconds of the
    curve never pass the budget."""
    arm = lineup.build_arm("by-hand", "sst5")
    run = replay.Replay(table, arm, seed=0, budget=400.0).run()
    starts = sorted(t.start for t in run.trials)
    assert starts[:2] == [0.0, 0.0]
    ends = {t.end for t in run.trials if t.end is not None}
    assert all(s in ends for s in starts[2:])  # each later trial starts when one ends
    assert max(overlapping(run.trials, t.start) for t in run.trials) == 2
    stopped = [t for t in run.trials if t.stopped]
    assert stopped, "ASHA stopped no trial on the synthetic table"
    for t in (t for t in run.trials if t.end is not None):
        config = table.configs[t.key]
        full = table.trial_seconds[t.key, t.seed]
        ran = t.end - t.start - settings.ACTOR_START_SECONDS
        if t.stopped:
            assert ran == pytest.approx(STARTUP + t.evaluations * epoch_seconds(config))
            assert ran < full
        else:
            assert ran == pytest.approx(full)
    seconds = [p.seconds for p in run.curve]
    assert seconds == sorted(seconds) and seconds[-1] <= 400.0
    ended = sum(t.end - t.start for t in run.trials if t.end is not None)
    assert ended <= seconds[-1] + 2 * max(table.trial_seconds.values())


def test_seconds_to_target_by_hand(table):
    """One 2-epoch config on both workers, each trial on a fresh actor: both report epoch 1 at
    Ray's actor start A plus 2 + 3 s and epoch 2 at A + 8 s, so at the second report
    trial-seconds are 2 x (A + 8) on both workers' clocks."""
    launch = settings.ACTOR_START_SECONDS
    run = replay.Replay(table, one_config_arm(2), seed=0, budget=100.0).run()
    config = settings.normalized(
        {"loss": "softmax", "lr": settings.LRS[0], "batch_size": 16, "epochs": 2}
    )
    first = sum(quality(config, s) for s in settings.SEEDS) / 3 * 0.5
    second = sum(quality(config, s) for s in settings.SEEDS) / 3 * 0.75
    target = (first + second) / 2
    seconds, reached = replay.seconds_to_target(run.curve, target, budget=100.0)
    assert reached and seconds == pytest.approx(2 * (launch + 8.0))
    seconds, reached = replay.seconds_to_target(run.curve, first - 1e-9, budget=100.0)
    assert reached and seconds == pytest.approx(2 * (launch + 5.0))
    # a trial takes A + 2 + 6 + 1 s (the final test included): the next pair starts then
    assert [t.start for t in run.trials[:4]] == pytest.approx(
        [0.0, 0.0, launch + 9.0, launch + 9.0]
    )


def test_a_reused_actor_starts_its_next_trial_without_the_imports():
    """An arm whose search reuses actors (astune's): each worker's first trial pays Ray's actor
    start and the table's start-up in a fresh process (5 s here); the next trials on that
    actor start after Ray's reuse gap and run without the start-up (its imports are paid)."""
    arm = dataclasses.replace(one_config_arm(2), reuse_actors=True)
    cells = [c for c in settings.grid("sst5") if arm.contains(c)]
    rows = [{**row, "startup_seconds": 5.0} for row in synthetic_rows(cells)]
    run = replay.Replay(replay.Table(pd.DataFrame(rows)), arm, seed=0, budget=100.0).run()
    own = STARTUP + 2 * 3.0 + TAIL  # the recorded run: its model's construction, 2 epochs, test
    fresh_end = settings.ACTOR_START_SECONDS + 5.0 + own
    assert [t.start for t in run.trials[:4]] == pytest.approx([0.0, 0.0, fresh_end, fresh_end])
    ended = [t for t in run.trials[2:] if t.end is not None]
    assert ended and all(
        t.end - t.start == pytest.approx(settings.ACTOR_REUSE_SECONDS + own) for t in ended
    )


def test_never_reached_counts_as_the_budget_flagged(table):
    run = replay.Replay(table, one_config_arm(1), seed=0, budget=50.0).run()
    assert replay.seconds_to_target(run.curve, 2.0, budget=50.0) == (50.0, False)
    stats = replay_runs.time_stats([(50.0, False), (20.0, True), (30.0, True)])
    assert stats["median"] == 30.0 and stats["reached"] == [False, True, True]
    assert stats["per_repetition"] == [50.0, 20.0, 30.0]
    assert stats["low"] <= 30.0 <= stats["high"]


def test_hand_made_curve():
    curve = [
        replay.Point(5.0, 2, 0.4, 0.40, 0.3),
        replay.Point(12.0, 3, 0.5, 0.49, 0.4),
        replay.Point(20.0, 4, 0.6, 0.58, 0.5),
    ]
    assert replay.seconds_to_target(curve, 0.49, budget=30.0) == (12.0, True)
    assert replay.seconds_to_target(curve, 0.585, budget=30.0) == (30.0, False)


def test_same_seed_same_curve(table):
    arm = lineup.build_arm("astune", "sst5")
    one = replay.Replay(table, arm, seed=3, budget=300.0).run()
    two = replay.Replay(table, arm, seed=3, budget=300.0).run()
    assert one.curve == two.curve and len(one.curve) > 5
    assert [dataclasses.astuple(t) for t in one.trials] == [
        dataclasses.astuple(t) for t in two.trials
    ]


def test_arms_lie_in_the_grid_and_targets(table):
    """Every arm's cells are grid configs; T_common (softmax only) sits below T_all."""
    keys = {settings.config_key(c) for c in settings.grid("sst5")}
    for name in arms.ARMS:
        arm = lineup.build_arm(name, "sst5")
        assert all(settings.config_key(p) in keys for p in arm.seed_points)
        assert sum(arm.contains(c) for c in settings.grid("sst5")) > 1
    goal = arms.targets(table, "sst5")
    assert goal["T_common"] < goal["T_all"] == pytest.approx(goal["best"] - 0.005)
    with pytest.raises(ValueError, match="needs the dataset's warm start"):
        lineup.build_arm("astune-warm", "sst5")
    with pytest.raises(SystemExit, match="unknown arm 'warm'"):
        lineup.build_arm("warm", "sst5")


def test_seed_points_first_and_pruned_told_as_pruned(table):
    """The real searchers evaluate the arm's seed points first; astune's searcher tells Optuna an
    ASHA-stopped trial as PRUNED, by-hand's plain OptunaSearch as COMPLETE (as Ray does)."""
    for name, stopped_state in (("astune-fast-cold", "PRUNED"), ("by-hand", "COMPLETE")):
        arm = lineup.build_arm(name, "sst5")
        run = replay.Replay(table, arm, seed=1, budget=250.0).run()
        first = [t.key for t in run.trials[: len(arm.seed_points)]]
        assert first == [settings.config_key(p) for p in arm.seed_points]
        study = search_efficiency_study(run.searcher)
        states = [t.state.name for t in study.get_trials(deepcopy=False)]
        stopped = [i for i, t in enumerate(run.trials) if t.stopped and t.end is not None]
        assert stopped and {states[i] for i in stopped} == {stopped_state}


def search_efficiency_study(searcher: Any) -> Any:
    from astune._private import optuna_study

    return optuna_study(searcher)


def test_the_json_of_item_7(tmp_path):
    """``replay`` on a synthetic table written as a recorded one: the shape issue 44 item 7
    asks for, the budget in trial-lengths and the table's digest."""
    folder = tables.table_dir("sst5", tmp_path)
    tables.write_shard(folder, synthetic_rows(settings.grid("sst5")))
    out = tmp_path / "search_efficiency.json"
    argv = ["replay", "--arms", "by-hand", "--repetitions", "2", "--output", str(out)]
    search_efficiency.main([*argv, "--tables", str(tmp_path), "--budget-trial-lengths", "12"])
    result = json.loads(out.read_text())
    assert {"machine", "commit", "intervals", "replay_check"} <= result.keys()
    sst5 = result["datasets"]["sst5"]
    assert sst5["table"] == tables.table_digest(folder)["sha256"]
    assert sst5["metric"] == "accuracy" and sst5["workers"] == 2
    goal = sst5["targets"]
    assert set(goal) == {"T_common", "T_all", "T_se", "best", "best_common_se"}
    # T_se: by-hand's best cell less the larger of the margin and its seed mean's standard error
    common = goal["T_common"] + settings.TARGET_MARGIN
    assert goal["T_se"] == pytest.approx(
        common - max(settings.TARGET_MARGIN, goal["best_common_se"])
    )
    assert goal["best_common_se"] > 0 and goal["T_se"] <= goal["T_common"]
    noise = sst5["noise"]
    assert noise["validation_rows"] == settings.DATASETS["sst5"].eval
    assert len(noise["best_cells_seed_sd_points"]) == 5 and noise["binomial_se_points"] > 0
    hand = sst5["arms"]["by-hand"]
    assert hand["budget_seconds"] == 12 * sst5["trial_length_seconds"]
    assert sst5["target_check"]["budget_trial_lengths"] == pytest.approx(12)
    for name in ("seconds_to_target", "seconds_to_target_all", "seconds_to_target_se"):
        stats = hand[name]
        assert set(stats) == {"median", "low", "high", "per_repetition", "reached"}
        assert len(stats["per_repetition"]) == len(stats["reached"]) == 2
        assert stats["low"] <= stats["median"] <= stats["high"] <= hand["budget_seconds"]
    assert set(hand["final_regret"]) == {"median", "low", "high"}
    assert hand["final_regret"]["low"] >= 0.0
    # the cells the repetitions end on, each at its own regret, hold the median's
    cells = hand["final_cells"]
    assert sum(c["repetitions"] for c in cells) == 2
    mean = replay.Table(tables.complete_table("sst5", tmp_path)).seed_mean
    for cell in cells:
        at = mean[cell["config"], cell["evaluation"]]
        assert cell["regret"] == pytest.approx(100 * (goal["best"] - at))
    ends = [c["regret"] for c in cells for _ in range(c["repetitions"])]
    assert float(np.median(ends)) == pytest.approx(hand["final_regret"]["median"])
    curve = hand["curve_by_trials"]["val_seed_mean"]
    assert curve[0] is None and None not in curve[1:]  # 2 trials start before any report
    entries = provenance.read_manifest(tmp_path / provenance.MANIFEST)  # what replay wrote
    assert set(entries) == {"search_efficiency.json", "search_efficiency_sst5.png"}
    for name, entry in entries.items():
        assert entry["inputs"] == {"tables/sst5": sst5["table"]}
        assert entry["sha256"] == provenance.sha256_of(tmp_path / name)
        assert entry["script"].startswith("python") and entry["machine"] == result["machine"]
    # `check` reads real searches saved since into the replay, those of its table only
    real = tmp_path / "real"
    real.mkdir()
    for seed, table in enumerate([sst5["table"]] * 3 + ["another"]):
        saved = {"arm": "by-hand", "seconds_to_target": 1e9, "table": table}
        (real / f"sst5-by-hand-{seed}.json").write_text(json.dumps(saved))
    search_efficiency.main(["check", "--output", str(out), "--real", str(real)])
    checked = json.loads(out.read_text())["replay_check"]["sst5"]
    assert checked["searches"] == {"by-hand": 3} and checked["searches_of_another_table"] == 1
    assert checked["arms"]["by-hand"]["within"] is False  # 1e9 s: past the whole budget
    with pytest.raises(SystemExit, match="--budget-trial-lengths must be > 0, got 0.0"):
        search_efficiency.main([*argv, "--budget-trial-lengths", "0"])
    with pytest.raises(SystemExit, match="no replay at"):
        search_efficiency.main(["check", "--output", str(tmp_path / "none.json")])


def test_a_diverged_run_is_an_errored_trial():
    """A recorded run that diverged at its second evaluation (NaN): the replayed trial ends
    there, counts its seconds, never becomes the incumbent, and Optuna is told FAIL."""
    config = {"loss": "softmax", "lr": settings.LRS[0], "batch_size": 16, "epochs": 2}
    rows = synthetic_rows([settings.normalized(config)])
    for row in rows[1::2]:
        row.update(val=float("nan"), test=float("nan"))
    table = replay.Table(pd.DataFrame(rows))
    run = replay.Replay(table, one_config_arm(2), seed=0, budget=40.0).run()
    ended = [t for t in run.trials if t.end is not None]
    ran = settings.ACTOR_START_SECONDS + STARTUP + 2 * 3.0  # a fresh actor each (by-hand's)
    assert ended and all(t.end - t.start == pytest.approx(ran) for t in ended)
    assert not any(np.isnan(p.val) for p in run.curve)
    states = {t.state.name for t in search_efficiency_study(run.searcher).get_trials()}
    assert "FAIL" in states and "COMPLETE" not in states


def test_transfer_reads_a_sources_best_configs_on_the_held_out_table(table):
    """A source's top configs are scored on the held-out table at the same cell: its own best
    reaches the target with no regret; a source whose scores peak at another lr hands over
    configs that miss it (the synthetic table peaks at the second lr)."""
    from benchmarks.search_efficiency import transfer

    itself = transfer.transfer("sst5", table, {"twin": table})
    best = itself["transferred"][0]
    assert best["reaches_T_common"] and best["regret_points"] == pytest.approx(0.0)
    assert best["share_better"] == 0.0

    frame = pd.DataFrame(synthetic_rows(settings.grid("sst5")))
    frame.loc[frame["lr"] == settings.LRS[3], "val"] += 0.2  # the source's best lr: the top one
    other = transfer.transfer("sst5", table, {"other": replay.Table(frame)})
    rows = other["transferred"]
    assert len(rows) == transfer.TOP and other["transferred_rate"] == 0.0
    means = transfer.final_means(table)
    for row in rows:
        assert f"lr={settings.LRS[3]!r}" in row["config"]
        assert row["score"] == means[row["config"]] < other["targets"]["T_common"]
        assert row["share_better"] > 0.0
    assert 0.0 < other["base_rate"] < 1.0


def test_a_transferred_config_takes_the_nearest_epochs_of_the_held_out_grid():
    from benchmarks.search_efficiency.transfer import on_grid

    config = settings.normalized({"loss": "softmax", "lr": np.float64(1e-3), "batch_size": 32,
                                  "lr_warmup_ratio": 0.0, "epochs": 8})  # fmt: skip
    assert on_grid(config, "sst5").endswith("epochs=4") and "lr=0.001," in on_grid(config, "sst5")
    assert on_grid({**config, "epochs": 2}, "clinc_oos").endswith("epochs=2")


def test_a_diverged_transferred_config_has_every_config_above_it():
    from benchmarks.search_efficiency.transfer import share_better

    assert share_better(float("nan"), [0.1, 0.2]) == 1.0
    assert share_better(0.15, [0.1, 0.2, 0.3]) == pytest.approx(2 / 3)
