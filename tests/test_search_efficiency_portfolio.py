"""The search-efficiency benchmark's portfolio arms (issue 62, items 3, 5 and 6): each arm stops
trials with its scheduler, mode b learns from a store of replayed astune searches written by
astune's own MLflow writer (the held-out dataset's left out), and the verdict pairs each
repetition with by-hand's."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd
import pytest
from stores import new_store
from synthetic_tables import synthetic_rows

from astune.history.portfolio_sources import store_tasks
from astune.store.reader import Store, finished_trials
from benchmarks.search_efficiency import (
    arms,
    history_store,
    lineup,
    portfolio_arm,
    replay,
    replay_runs,
    settings,
    tables,
    verdicts,
)


@pytest.fixture(scope="module")
def table() -> replay.Table:
    return replay.Table(pd.DataFrame(synthetic_rows(settings.grid("sst5"))))


def test_each_schedule_is_its_ray_scheduler_with_its_brackets(table):
    from ray.tune.schedulers import AsyncHyperBandScheduler, FIFOScheduler

    base = arms.astune_arm("sst5")  # 4 epochs, grace 1
    shaped = {s: dataclasses.replace(base, schedule=s, reduction_factor=2) for s in arms.SCHEDULES}
    assert [shaped[s].brackets() for s in ("asha", "hyperband")] == [1, 3]  # rungs 1, 2, 4
    assert isinstance(shaped["fifo"].scheduler(), FIFOScheduler)
    hyperband = shaped["hyperband"].scheduler()
    assert isinstance(hyperband, AsyncHyperBandScheduler) and len(hyperband._brackets) == 3
    budget = 40 * table.trial_length()
    stopped = {
        s: sum(t.stopped for t in replay.Replay(table, arm, seed=0, budget=budget).run().trials)
        for s, arm in shaped.items()
    }
    assert stopped["fifo"] == 0 and stopped["asha"] > 0 and stopped["hyperband"] > 0


def test_mode_b_learns_from_replayed_searches_of_the_other_datasets(tmp_path, monkeypatch):
    """Each dataset's replayed astune search lands in the store as a search whose finished
    trials are the replay's ended ones; held-out SST-5's portfolio reads CoNLL-2003's alone."""
    monkeypatch.setattr(settings, "BUDGET_TRIAL_LENGTHS", 8)  # a few dozen runs a search
    for name in ("sst5", "conll2003"):
        tables.write_shard(tables.table_dir(name, tmp_path), synthetic_rows(settings.grid(name)))
    uri = new_store(tmp_path / "history-0")  # a copy of a migrated store: seconds sooner
    written = history_store.write_history(uri, ["sst5", "conll2003"], root=tmp_path)
    table = replay.Table(tables.complete_table("conll2003", tmp_path))
    budget = settings.BUDGET_TRIAL_LENGTHS * table.trial_length()
    again = replay.Replay(table, arms.astune_arm("conll2003"), seed=0, budget=budget).run()
    ended = [t for t in again.trials if t.end is not None]
    assert written["conll2003"] == len(ended) > 0
    store = Store(uri)
    assert len(finished_trials(store.trials())) == sum(written.values())
    tasks = {t.dataset: t for t in store_tasks(store)}
    assert set(tasks) == {"sst5", "conll2003"}
    assert tasks["conll2003"].profile.task == "token"  # the writer's task tag
    assert tasks["conll2003"].profile.train_size == settings.DATASETS["conll2003"].train
    start = portfolio_arm.portfolio_start("sst5", store_uri=uri)
    assert start.source == "store" and start.reference_datasets == ("conll2003",)
    assert {e.source for e in start.entries} == {"search 'astune-conll2003'"}
    arm = lineup.build_arm(portfolio_arm.STORE_ARM, "sst5", portfolios={"store": start})
    assert arm.seed_points and arm.schedule == "fifo"  # the default behind a portfolio
    with pytest.raises(ValueError, match="needs its portfolio"):
        lineup.build_arm(portfolio_arm.STORE_ARM, "sst5", portfolios={"prior": start})
    # the replay gives each repetition its own store: store i holds the searches seeded i
    second = new_store(tmp_path / "history-1")
    history_store.write_history(second, ["conll2003"], root=tmp_path, seed=1)
    names = ["by-hand", portfolio_arm.STORE_ARM]
    entry = replay_runs.replay_dataset(
        "sst5", names, repetitions=3, root=tmp_path, budget_lengths=6, histories=[uri, second]
    )
    learnt = entry["portfolio"]["store"]
    assert [p["learnt_from"] for p in learnt] == [["conll2003"]] * 2  # one a store
    assert entry["arms"][portfolio_arm.STORE_ARM]["repetitions"] == 3  # stores 0, 1, 0
    with pytest.raises(ValueError, match="needs its history stores"):
        replay_runs.replay_dataset("sst5", names, repetitions=1, root=tmp_path)


def _result(seconds: list[float], regret: float) -> dict:
    times = {"median": float(np.median(seconds)), "per_repetition": seconds}
    return {
        "seconds_to_target": times,
        "seconds_to_target_se": times,
        "final_regret": {"median": regret},
    }


def test_the_portfolio_verdict_pairs_repetitions_and_asks_for_no_worse_regret():
    hand = _result([1000.0, 800.0, 1200.0, 900.0, 1100.0], regret=0.5)
    fast = _result([300.0, 240.0, 360.0, 270.0, 330.0], regret=0.5)  # 0.3x each
    worse = _result([300.0, 240.0, 360.0, 270.0, 330.0], regret=0.6)
    slow = _result([2000.0, 1700.0, 2500.0, 1900.0, 2300.0], regret=0.1)
    results = {"by-hand": hand, "astune-portfolio": fast, "astune-portfolio-asha": worse}
    check = verdicts.portfolio_check({**results, "astune-portfolio-store": slow}, counts=True)
    ours = check["astune-portfolio"]["T_common"]
    assert ours["ratio_of_medians"] == pytest.approx(0.3)
    assert ours["paired_ratio"]["median"] == pytest.approx(0.3) and ours["met"]
    assert not ours["stretch_met"]  # 0.3 > 0.25
    assert not check["astune-portfolio-asha"]["T_se"]["met"]  # a worse final regret
    assert check["astune-portfolio-store"]["T_common"]["paired_ratio"]["wholly_above_one"]
    assert not check["astune-portfolio-store"]["T_common"]["met"]
    uncounted = verdicts.portfolio_check(results, counts=False)
    assert not uncounted["astune-portfolio"]["T_common"]["met"]
    assert verdicts.portfolio_check({"astune-portfolio": fast}, counts=True) == {}


def _areas(mo_halving: float, fifo: float) -> dict:
    return {
        "portfolio": {
            "mo-halving": {"hypervolume_area": {"median": mo_halving}},
            "fifo": {"hypervolume_area": {"median": fifo}},
        }
    }


def test_the_several_objectives_default_is_the_larger_area_on_most_datasets():
    from benchmarks.search_efficiency.pareto import mo_default

    fifo_wins = {"a": _areas(0.5, 0.6), "b": _areas(0.7, 0.8), "c": _areas(0.9, 0.4)}
    assert mo_default(fifo_wins) == {
        "by_dataset": {"a": "fifo", "b": "fifo", "c": "mo-halving"},
        "wins": {"mo-halving": 1, "fifo": 2},
        "default": "fifo",
    }
    tie = {"a": _areas(0.5, 0.6), "b": _areas(0.7, 0.7)}  # b: equal areas keep MO-halving
    assert mo_default(tie)["by_dataset"]["b"] == "mo-halving"
    assert mo_default(tie)["default"] == "mo-halving"  # 1 win each: the default before stays


def test_the_unseen_task_is_77_intents_drawn_evenly_and_its_first_configs(tmp_path, data_dir):
    """The unseen task's folder: CLINC150's first 77 in-scope intents renumbered 0-76, its rows
    spread evenly, read by astune as any dataset folder; history's first config comes from the
    packaged prior through ``portfolio_for`` in default.yaml's space (AS-Softmax)."""
    import collections
    import json

    from astune.data.resolve import resolve_dataset
    from benchmarks.search_efficiency import unseen

    task = unseen.write_task(data_dir, tmp_path)
    meta = json.loads((task / "dataset.json").read_text())
    source = json.loads((data_dir / "clinc_oos" / "dataset.json").read_text())
    assert meta["label_names"] == source["label_names"][: unseen.INTENTS]
    assert unseen.OUT_OF_SCOPE >= unseen.INTENTS  # so the first 77 ids hold no out-of-scope row
    sizes = {"train": unseen.TRAIN_ROWS, "validation": unseen.EVAL_ROWS, "test": unseen.EVAL_ROWS}
    for split, size in sizes.items():
        rows = [json.loads(line) for line in (task / f"{split}.jsonl").read_text().splitlines()]
        counts = collections.Counter(r["intent"] for r in rows)
        assert len(rows) == size and set(counts) == set(range(unseen.INTENTS))
        assert max(counts.values()) - min(counts.values()) <= 1
    assert resolve_dataset(str(task)).folder == task.resolve()
    first = unseen.history_first()
    assert first["loss"] == "as_softmax" and first["source"].startswith("prior ")
    assert unseen.BY_HAND == {"loss": "softmax", "lr": 2e-4, "batch_size": 32, "epochs": 4}


@pytest.mark.parametrize("seeds", ["0,1", "0,x,2", "0,-1,2"])
def test_the_unseen_task_refuses_seeds_it_cannot_make_an_interval_of(seeds: str) -> None:
    from benchmarks.search_efficiency import unseen

    expected = f"--seeds needs 3 or more comma-separated seeds >= 0 for an interval, got '{seeds}'"
    with pytest.raises(SystemExit, match=f"^{re.escape(expected)}$"):
        unseen.main(["--seeds", seeds])


def test_a_rule_that_hands_over_lets_tpe_model_once_the_seed_points_are_in():
    """The rules study's third round: a hand-over rule's arm starts TPE modelling after its
    seed points (the portfolio's and the space's), the others after Optuna's default 10."""
    from benchmarks.search_efficiency import rules

    sources = ["sst5", "clinc_oos"]
    handed = rules.rule_arm("conll2003", sources, rules.HANDOVER_RULES["fifo-n4-tpe"], None)
    kept = rules.rule_arm("conll2003", sources, rules.HANDOVER_RULES["fifo-n4"], None)
    assert handed.seed_points == kept.seed_points and len(handed.seed_points) >= 4
    assert handed.startup_trials == len(handed.seed_points) and kept.startup_trials is None
    assert handed.sampler(0)._n_startup_trials == len(handed.seed_points)  # optuna 5.0
    assert kept.sampler(0)._n_startup_trials == 10
    assert (handed.schedule, kept.schedule) == ("fifo", "fifo")
