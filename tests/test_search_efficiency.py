"""The search-efficiency benchmark's machinery (issue 44): the replay of the real Ray Tune
searchers and ASHA on a synthetic table (a plain function of config and epoch), its time
accounting and targets, and the recorder's resume on a tiny real recording."""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

import numpy as np
import pandas as pd
import pytest

from benchmarks import efficiency_arms as arms
from benchmarks import efficiency_record as recorder
from benchmarks import efficiency_replay as replay
from benchmarks import efficiency_settings as settings
from benchmarks import efficiency_tables as tables
from benchmarks import search_efficiency

STARTUP, TAIL = 2.0, 1.0
"""Synthetic seconds: a trial's start-up before its first epoch, and its final test."""


def epoch_seconds(config: dict[str, Any]) -> float:
    return 3.0 if config["batch_size"] == 16 else 2.0


def quality(config: dict[str, Any], seed: int) -> float:
    """The synthetic final score: best at the middle lr, batch 16, an AS loss; seeds differ a
    little."""
    score = 0.3 + 0.1 * (config["lr"] == settings.LRS[1]) + 0.05 * (config["batch_size"] == 16)
    return score + 0.02 * (config["loss"] != "softmax") + 0.02 * config["epochs"] + 0.001 * seed


def synthetic_rows(configs: list[dict[str, Any]], seeds=settings.SEEDS) -> list[dict]:
    """One row per evaluation (epoch) of every config and seed, rising to :func:`quality`."""
    rows = []
    for config, seed in itertools.product(configs, seeds):
        config, last = settings.normalized(config), config["epochs"]
        for epoch in range(1, last + 1):
            elapsed = STARTUP + epoch * epoch_seconds(config)
            rows.append(
                {
                    "key": settings.config_key(config),
                    "seed": seed,
                    **config,
                    "metric": "accuracy",
                    "evaluation": epoch,
                    "epoch": float(epoch),
                    "last": epoch == last,
                    "val": quality(config, seed) * (1 - 0.5**epoch),
                    "test": 0.9 * quality(config, seed),
                    "elapsed_seconds": elapsed,
                    "trial_seconds": STARTUP + last * epoch_seconds(config) + TAIL,
                }
            )
    return rows


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
    arm = arms.build_arm("by-hand", "sst5")
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
    stats = search_efficiency.time_stats([(50.0, False), (20.0, True), (30.0, True)])
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
    arm = arms.build_arm("astune", "sst5")
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
        arm = arms.build_arm(name, "sst5")
        assert all(settings.config_key(p) in keys for p in arm.seed_points)
        assert sum(arm.contains(c) for c in settings.grid("sst5")) > 1
    goal = arms.targets(table, "sst5")
    assert goal["T_common"] < goal["T_all"] == pytest.approx(goal["best"] - 0.005)
    with pytest.raises(ValueError, match="needs the dataset's warm start"):
        arms.build_arm("astune-warm", "sst5")
    with pytest.raises(SystemExit, match="unknown arm 'warm'"):
        arms.build_arm("warm", "sst5")


def test_a_dataset_may_name_its_own_epochs():
    """CLINC150's grid runs to 8 epochs, the others' to 4: every arm searches the dataset's
    epochs, starts at its most, and ASHA's ``max_t`` is that most (the whole grid's, even where
    a warm space narrows the epochs)."""
    assert settings.epochs_of("clinc_oos") == (1, 2, 4, 8)
    assert settings.epochs_of("sst5") == settings.EPOCHS == (1, 2, 4)
    clinc = settings.grid("clinc_oos")
    assert len(clinc) == len(settings.grid("sst5")) * 4 // 3
    assert {c["epochs"] for c in clinc} == {1, 2, 4, 8}
    for dataset, most in (("clinc_oos", 8), ("sst5", 4)):
        for name in arms.ARMS:
            arm = arms.build_arm(name, dataset)
            assert arm.values["epochs"] == settings.epochs_of(dataset)
            assert arm.max_epochs == most
            assert {p["epochs"] for p in arm.seed_points} == {most}


@pytest.mark.slow
def test_recorder_resumes(tmp_path, monkeypatch):
    """A real recording of 1, then 2 configs x 1 epoch on 32 SST-5 rows (1-layer MiniLM): the
    second piece records only the new config, and keeps it though Ctrl-C stops the piece right
    after it; the digest counts both runs."""
    monkeypatch.setitem(
        settings.DATASETS, "sst5", settings.DatasetSlice("sst5", 32, 16, num_layers=1)
    )
    configs = [
        {"loss": "softmax", "lr": 1e-4, "batch_size": 16, "epochs": 1, "lr_warmup_ratio": 0.0},
        {
            "loss": "as_softmax",
            "lr": 1e-4,
            "batch_size": 16,
            "epochs": 1,
            "delta": 0.3,
            "warmup_ratio": 0.0,
        },
    ]
    logged: list[str] = []
    kwargs = {"hours": 1.0, "root": tmp_path, "seeds": (0,), "log": logged.append}

    def interrupted_after_a_run(line: str) -> None:
        logged.append(line)
        if line.startswith("[1/"):
            raise KeyboardInterrupt

    assert recorder.record("sst5", configs=configs[:1], **kwargs) == 1
    with pytest.raises(KeyboardInterrupt):
        recorder.record("sst5", configs=configs, **{**kwargs, "log": interrupted_after_a_run})
    assert recorder.record("sst5", configs=configs, **kwargs) == 0
    folder = tables.table_dir("sst5", tmp_path)
    frame = tables.read_table(folder)
    assert sorted(frame["key"]) == sorted(settings.config_key(c) for c in configs)
    assert (frame["elapsed_seconds"] <= frame["trial_seconds"]).all()
    digest = tables.write_digest(folder)
    assert digest["runs"] == 2 and len(digest["shards"]) == 2


def test_seed_points_first_and_pruned_told_as_pruned(table):
    """The real searchers evaluate the arm's seed points first; astune's searcher tells Optuna an
    ASHA-stopped trial as PRUNED, by-hand's plain OptunaSearch as COMPLETE (as Ray does)."""
    for name, stopped_state in (("astune-fast-cold", "PRUNED"), ("by-hand", "COMPLETE")):
        arm = arms.build_arm(name, "sst5")
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


def test_parts_share_the_runs_without_overlap(tmp_path):
    every = recorder.pending_runs("sst5", tmp_path)
    halves = [recorder.pending_runs("sst5", tmp_path, part=(i, 2)) for i in (0, 1)]
    keys = [{(settings.config_key(c), s) for c, s in half} for half in halves]
    assert not keys[0] & keys[1]
    assert keys[0] | keys[1] == {(settings.config_key(c), s) for c, s in every}
    assert len(every) == len(settings.grid("sst5")) * len(settings.SEEDS)
    with pytest.raises(SystemExit, match="--part must be I/N"):
        recorder.parse_part("2/2")


def test_a_grid_change_is_refused_until_pruned_and_pieces_take_chosen_losses(tmp_path):
    """Runs of a config the grid dropped (the old AS-Speed variant) make the table refused in
    one line naming ``prune``; ``prune`` drops exactly them and keeps the rest; ``--losses``
    records only the losses named."""
    folder = tables.table_dir("sst5", tmp_path)
    kept = settings.grid("sst5")[:3]
    old = {"loss": "as_speed", "lr": 1e-4, "batch_size": 16, "epochs": 1, "delta": 0.3}
    stray = [{**row, "key": row["key"].replace("as_softmax", "as_speed"), "loss": "as_speed"}
             for row in synthetic_rows([{**old, "loss": "as_softmax"}])]  # fmt: skip
    tables.write_shard(folder, synthetic_rows(kept) + stray)
    with pytest.raises(SystemExit, match="1 configs outside the grid.*prune --dataset sst5"):
        tables.grid_table("sst5", tmp_path)
    assert tables.prune("sst5", tmp_path, log=lambda _: None) == len(settings.SEEDS)
    table = tables.grid_table("sst5", tmp_path)
    assert set(table["key"]) == {settings.config_key(c) for c in kept}
    assert len(list(folder.glob("part-*.parquet"))) == 1
    assert json.loads((folder / tables.DIGEST_FILE).read_text())["runs"] == 3 * len(settings.SEEDS)
    softmax = recorder.grid_of_losses("sst5", "softmax")
    assert softmax and {c["loss"] for c in softmax} == {"softmax"}
    with pytest.raises(SystemExit, match="--losses must name grid losses.*got 'as_speed'"):
        recorder.grid_of_losses("sst5", "as_speed")


def test_a_replay_refuses_a_table_the_grid_outgrew(tmp_path):
    """A table that lacks runs of its grid (CLINC150's before its 8-epoch runs) is refused by
    the replay in one line naming how many runs are missing; the reference (refresh_reference)
    still reads it whole, leaving out the configs short of seeds. Two shards written within
    one second both stay."""
    folder = tables.table_dir("clinc_oos", tmp_path)
    four = [c for c in settings.grid("clinc_oos") if c["epochs"] <= 4]
    tables.write_shard(folder, synthetic_rows(four))
    missing = (len(settings.grid("clinc_oos")) - len(four)) * len(settings.SEEDS)
    assert missing == 288
    with pytest.raises(SystemExit, match=f"lacks {missing} of its grid's 1152 runs.*epochs=8"):
        tables.complete_table("clinc_oos", tmp_path)
    assert len(tables.grid_table("clinc_oos", tmp_path)) == len(synthetic_rows(four))
    tables.write_shard(
        folder, synthetic_rows([c for c in settings.grid("clinc_oos") if c not in four])
    )
    assert tables.runs_of(tables.complete_table("clinc_oos", tmp_path)) == {
        (settings.config_key(c), s) for c in settings.grid("clinc_oos") for s in settings.SEEDS
    }


def test_the_fast_levers_are_grouped_by_length_and_keyed_apart():
    """A fast lever's grid config trains AS-Softmax with AS-Skip (the soft policy: InfoBatch's
    pruning too) and grouped micro-batches; its key names the window, so an ungrouped run is
    another config."""
    levers = [c for c in settings.grid("sst5") if c["loss"] in settings.FAST_LEVERS]
    assert {c["loss"] for c in levers} == set(settings.FAST_LEVERS)
    for config in levers:
        fields = settings.train_fields("sst5", config, 0)
        assert fields["loss"] == "as_softmax" and fields["as_skip"] is True
        assert fields.get("skip_policy", "zero") == ("soft" if "soft" in config["loss"] else "zero")
        assert fields["length_window"] == settings.FAST_LENGTH_WINDOW
        assert settings.config_key(config).endswith(f"length_window={settings.FAST_LENGTH_WINDOW}")
    plain = next(c for c in settings.grid("sst5") if c["loss"] == "as_softmax")
    assert "length_window" not in settings.train_fields("sst5", plain, 0)
    assert "length_window" not in settings.config_key(plain)


def test_the_json_of_item_7(tmp_path):
    """``replay`` on a synthetic table written as a recorded one: the shape issue 44 item 7
    asks for, the budget in trial-lengths and the table's digest."""
    folder = tables.table_dir("sst5", tmp_path)
    tables.write_shard(folder, synthetic_rows(settings.grid("sst5")))
    out = tmp_path / "search_efficiency.json"
    argv = ["replay", "--arms", "by-hand", "--repetitions", "2", "--output", str(out)]
    search_efficiency.main([*argv, "--tables", str(tmp_path)])
    result = json.loads(out.read_text())
    assert {"machine", "commit", "intervals", "replay_check"} <= result.keys()
    sst5 = result["datasets"]["sst5"]
    assert sst5["table"] == tables.table_digest(folder)["sha256"]
    assert sst5["metric"] == "accuracy" and sst5["workers"] == 2
    assert set(sst5["targets"]) == {"T_common", "T_all", "best"}
    hand = sst5["arms"]["by-hand"]
    assert hand["budget_seconds"] == settings.BUDGET_TRIAL_LENGTHS * sst5["trial_length_seconds"]
    for name in ("seconds_to_target", "seconds_to_target_all"):
        stats = hand[name]
        assert set(stats) == {"median", "low", "high", "per_repetition", "reached"}
        assert len(stats["per_repetition"]) == len(stats["reached"]) == 2
        assert stats["low"] <= stats["median"] <= stats["high"] <= hand["budget_seconds"]
    assert set(hand["final_regret"]) == {"median", "low", "high"}
    assert hand["final_regret"]["low"] >= 0.0
    curve = hand["curve_by_trials"]["val_seed_mean"]
    assert curve[0] is None and None not in curve[1:]  # 2 trials start before any report
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
    from benchmarks import efficiency_transfer as transfer

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
    from benchmarks.efficiency_transfer import on_grid

    config = settings.normalized({"loss": "softmax", "lr": np.float64(1e-3), "batch_size": 32,
                                  "lr_warmup_ratio": 0.0, "epochs": 8})  # fmt: skip
    assert on_grid(config, "sst5").endswith("epochs=4") and "lr=0.001," in on_grid(config, "sst5")
    assert on_grid({**config, "epochs": 2}, "clinc_oos").endswith("epochs=2")


def test_a_diverged_transferred_config_has_every_config_above_it():
    from benchmarks.efficiency_transfer import share_better

    assert share_better(float("nan"), [0.1, 0.2]) == 1.0
    assert share_better(0.15, [0.1, 0.2, 0.3]) == pytest.approx(2 / 3)
