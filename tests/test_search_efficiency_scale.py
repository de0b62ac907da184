"""Issue 70 item 5's scale study: the tables' best learning rate per cell against its optimizer
steps, the pooled within-group slope (against a reference least-squares fit), and the
full-size runs' best arm per seed."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from synthetic_tables import synthetic_rows

from benchmarks.search_efficiency import full_size, full_size_tasks, lr_scale, settings


def reference_slope(cells: list[lr_scale.Cell]) -> float:
    """The slope of one least-squares fit with an intercept per group (dummy columns)."""
    groups = sorted({(c.dataset, c.loss, c.batch_size) for c in cells})
    design = np.array(
        [[math.log10(c.steps)] + [(c.dataset, c.loss, c.batch_size) == g for g in groups]
         for c in cells], dtype=float,
    )  # fmt: skip
    target = np.log10([c.best_lr for c in cells])
    return float(np.linalg.lstsq(design, target, rcond=None)[0][0])


def test_each_cell_takes_the_lr_of_its_best_config():
    """The synthetic table's best config has the grid's second lr in every cell; a cell's steps
    are the slice's rows x epochs / batch size."""
    table = pd.DataFrame(synthetic_rows(settings.grid("sst5")))
    cells = lr_scale.best_lrs(table, "sst5", 1000)
    assert len(cells) == len(settings.GRID_LOSSES) * 2 * len(settings.EPOCHS)
    assert {c.best_lr for c in cells} == {settings.LRS[1]}
    assert {(c.batch_size, c.epochs, c.steps) for c in cells} >= {(16, 4, 250.0), (32, 1, 31.25)}
    assert lr_scale.within_slope(cells) == 0.0


def test_the_within_slope_is_the_least_squares_slope_with_a_level_per_group():
    """Groups at different levels, each lr falling as steps^-0.5 with noise: the pooled slope
    equals the fit with an intercept per group, and the bootstrap interval holds it."""
    rng = np.random.default_rng(3)
    cells = [
        lr_scale.Cell(
            name, loss, batch, epochs, steps, level * steps**-0.5 * rng.uniform(0.8, 1.25)
        )
        for name, level in (("a", 1e-2), ("b", 3e-3))
        for loss in ("softmax", "as_softmax")
        for batch in (16, 32)
        for epochs in (1, 2, 4)
        if (steps := 1000 * epochs / batch)
    ]
    slope = lr_scale.within_slope(cells)
    assert slope == pytest.approx(reference_slope(cells), abs=1e-12)
    assert -0.7 < slope < -0.3
    low, high = lr_scale.bootstrap_interval(cells, draws=200)
    assert low < slope < high
    assert math.isnan(lr_scale.within_slope(cells[:1]))


def test_a_full_size_run_is_marked_best_of_the_arms_its_dataset_and_seed_ran():
    run = {"dataset": "sst5", "seed": 0, "config": {"lr": 2e-5, "epochs": 7, "batch_size": 16}}
    runs = [
        {**run, "arm": "paper", "test": 0.50},
        {**run, "arm": "history", "test": 0.47, "config": {**run["config"], "lr": 3e-4}},
        {**run, "seed": 1, "arm": "history", "test": 0.40},
    ]  # fmt: skip
    points = lr_scale.full_size_points(runs, {"sst5": 8544})
    assert [(p["arm"], p["seed"], p["best"]) for p in points] == [
        ("paper", 0, True), ("history", 0, False), ("history", 1, False),  # alone: no best
    ]  # fmt: skip
    assert points[0]["steps"] == 8544 * 7 / 16


def test_the_full_size_study_runs_the_learnt_configs_and_the_paper_first():
    """Every seed's history, at-scale and paper runs start before any scaled one, ``--arms``
    keeps the order of the arms it names, and a dataset or arm the study has not is refused in
    one line."""
    order = full_size.run_order(["sst5"])
    assert len(order) == len(full_size.ARMS) * len(full_size.SEEDS)
    first = order[: 3 * len(full_size.SEEDS)]
    assert {arm for _, arm, _ in first} == {"history", "at_scale", "paper"}
    with pytest.raises(SystemExit, match="--datasets: mnist not one of sst5, conll2003"):
        full_size.main(["--datasets", "mnist"])
    short = full_size.run_order(["sst5", "conll2003"], ["history"])
    assert short == [(d, "history", s) for s in full_size.SEEDS for d in ("sst5", "conll2003")]
    with pytest.raises(SystemExit, match="--arms: best not one of history, at_scale, paper, sca"):
        full_size.main(["--arms", "history,best"])
    with pytest.raises(SystemExit, match="--threads must be >= 1, got 0"):
        full_size.main(["--threads", "0"])


def full_size_run(dataset: str, arm: str, seed: int, lr: float, val: float) -> dict:
    config = {"loss": "as_softmax", "lr": lr, "batch_size": 16, "epochs": 4, "delta": 0.3}
    return {"dataset": dataset, "arm": arm, "seed": seed, "config": config, "val": val,
            "test": val, "test_metric": "test_f1"}  # fmt: skip


def test_full_size_runs_are_a_task_a_dataset_scored_over_their_seeds():
    """Two seeds of one config average; a config as the paper states it gains the switches a
    trial logs; a dataset of one config is no task."""
    runs = [
        full_size_run("conll2003", "paper", 0, 2e-5, 0.80),
        full_size_run("conll2003", "paper", 1, 2e-5, 0.90),
        full_size_run("conll2003", "history", 0, 3e-4, 0.70),
        full_size_run("sst5", "paper", 0, 2e-5, 0.50),
    ]
    [entry] = full_size.full_size_entries(runs)
    assert entry["dataset"] == "conll2003" and entry["metric"] == "f1"
    assert entry["train_size"] == full_size_tasks.train_rows("conll2003") == 14_041
    assert entry["num_layers"] is None and entry["max_length"] == 64
    assert [t["score"] for t in entry["trials"]] == [pytest.approx(0.85), 0.70]
    assert entry["trials"][0]["config"] == {
        **full_size.TRIAL_DEFAULTS, **runs[0]["config"]
    }  # fmt: skip


def test_at_scale_learns_from_the_other_datasets_full_size_runs(tmp_path, monkeypatch):
    """At full size the other dataset's runs decide the first config over every table; a
    dataset's own runs never enter its choice; the choice is kept for its later seeds, and
    waits while the other dataset holds fewer than two configs."""
    monkeypatch.setattr(full_size, "RUNS", tmp_path / "runs.jsonl")
    monkeypatch.setattr(full_size, "DECIDED", tmp_path / "configs.json")
    monkeypatch.setattr(full_size, "record_file", lambda path, code: None)

    def write(runs: list[dict]) -> None:
        full_size.RUNS.write_text("".join(json.dumps(r) + "\n" for r in runs))

    write(
        [
            full_size_run("sst5", "paper", 0, 2e-5, 0.9),
            full_size_run("sst5", "at_scale", 0, 1e-5, 1.0),
        ]
    )
    assert full_size.arm_config("sst5", "at_scale") is None  # its own runs never count
    assert full_size.arm_config("conll2003", "at_scale") is None  # one source config so far
    write([
        full_size_run("sst5", "history", 0, 3e-4, 0.45),
        full_size_run("sst5", "paper", 0, 5e-5, 0.48),
        full_size_run("conll2003", "paper", 0, 1e-5, 0.99),
    ])  # fmt: skip
    chosen = full_size.arm_config("conll2003", "at_scale")
    assert chosen is not None and chosen["lr"] == 5e-5  # not a table's 3e-4 or 1e-3
    write(
        [
            full_size_run("sst5", "history", 0, 3e-4, 0.9),
            full_size_run("sst5", "paper", 0, 5e-5, 0.1),
        ]
    )
    assert full_size.arm_config("conll2003", "at_scale") == chosen  # decided once
    assert json.loads(full_size.DECIDED.read_text()) == {"conll2003": {"at_scale": chosen}}


def test_a_prior_holds_the_full_size_runs_it_pins(tmp_path, monkeypatch):
    """Pinned, the full-size runs build a task a dataset marked as recorded at full size, kept
    in the prior's provenance; runs appended later leave the pinned ones as they were, a changed
    one is refused in one line; and at_scale never reads the prior's full-size tasks (it takes
    the runs themselves)."""
    from benchmarks.search_efficiency import prior

    monkeypatch.setattr(full_size, "RUNS", tmp_path / "runs.jsonl")
    runs = [
        full_size_run("sst5", "history", 0, 3e-4, 0.45),
        full_size_run("sst5", "paper", 0, 2e-5, 0.48),
    ]
    full_size.RUNS.write_text("".join(json.dumps(r) + "\n" for r in runs))
    pinned = full_size.runs_pin()
    assert pinned["runs"] == 2
    with full_size.RUNS.open("a") as f:
        f.write(json.dumps(full_size_run("sst5", "paper", 1, 2e-5, 0.1)) + "\n")
    assert full_size.pinned_runs(pinned) == runs  # the later run is not among them
    [entry] = full_size.full_size_entries(full_size.pinned_runs(pinned))
    assert entry["recorded"] == full_size.RECORDED and entry["trials"][0]["config"]["lr"] == 2e-5
    monkeypatch.setattr(prior, "reference_entries", lambda names, **_: [])
    monkeypatch.setattr(prior, "check_pins", lambda names, pins: None)
    entries, about = prior.build_prior(["sst5"], {}, full_size_runs=pinned)
    assert entries == [entry] and about["full_size_runs"] == pinned
    runs[1]["val"] = 0.3
    full_size.RUNS.write_text("".join(json.dumps(r) + "\n" for r in runs))
    with pytest.raises(
        SystemExit, match="its first 2 runs hash to [0-9a-f]{64} .* not to their pin"
    ):
        full_size.pinned_runs(pinned)


def test_at_scale_takes_the_runs_and_never_the_priors_full_size_tasks(tmp_path, monkeypatch):
    """A packaged prior holding full-size tasks that favour lr 3e-4 does not move at_scale's
    choice: it learns from the runs file alone (no task counted twice, none of a later pin)."""
    from astune.history import reference

    monkeypatch.setattr(full_size, "RUNS", tmp_path / "runs.jsonl")
    monkeypatch.setattr(full_size, "DECIDED", tmp_path / "configs.json")
    monkeypatch.setattr(full_size, "record_file", lambda path, code: None)
    favour = [
        full_size_run(name, arm, 0, lr, val)
        for name in ("clinc_oos", "go_emotions")
        for arm, lr, val in (("history", 3e-4, 0.9), ("paper", 2e-5, 0.1))
    ]
    packaged = reference.reference_searches(reference.PRIOR_FILE)
    prior_file = reference.write_reference(
        tmp_path / "prior.json", [*packaged, *full_size.full_size_entries(favour)]
    )
    runs = [
        full_size_run("sst5", "history", 0, 3e-4, 0.45),
        full_size_run("sst5", "paper", 0, 2e-5, 0.48),
    ]
    full_size.RUNS.write_text("".join(json.dumps(r) + "\n" for r in runs))
    monkeypatch.setattr(reference, "PRIOR_FILE", prior_file)
    assert full_size.arm_config("conll2003", "at_scale")["lr"] == 2e-5


def test_a_run_is_judged_by_its_datasets_own_metric():
    """CoNLL-2003's record holds precision, recall and F1; the study compares F1, the metric its
    validation objective is."""
    assert full_size_tasks.test_metric("conll2003") == "test_f1"
    assert full_size_tasks.test_metric("sst5") == "test_accuracy"


def test_the_full_size_curves_hold_each_evaluation_once_and_mark_the_runs_under_way(
    tmp_path, monkeypatch
):
    """A resumed run may log an evaluation again: its last line counts; a run the runs file
    does not hold yet is under way; a run with no evaluation logged is left out."""
    from benchmarks.search_efficiency import full_size_curves

    monkeypatch.setattr(full_size, "RUNS", tmp_path / "runs.jsonl")
    full_size.RUNS.write_text(json.dumps(full_size_run("sst5", "paper", 0, 2e-5, 0.5)) + "\n")
    logged = {"sst5-paper-0": [(0, 0.4), (1, 0.45)], "sst5-history-1": [(0, 0.3), (0, 0.35)]}
    for name, rows in logged.items():
        (tmp_path / name).mkdir()
        lines = [json.dumps({"evaluation": e, "objective": v, "epoch": e + 1.0}) for e, v in rows]
        (tmp_path / name / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "conll2003-paper-0").mkdir()  # started, nothing logged yet
    found = full_size_curves.curves(tmp_path, recorded=tmp_path / "none.json")
    assert found["sst5"]["paper"] == {"0": {"validation": [0.4, 0.45], "finished": True}}
    assert found["sst5"]["history"] == {"1": {"validation": [0.35], "finished": False}}
    assert found["conll2003"]["paper"] == {}
    path = full_size_curves.plot(found, tmp_path / "curves.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_finished_runs_curve_outlives_its_folder_and_an_unfinished_ones_does_not(
    tmp_path, monkeypatch
):
    """Drawn again on a machine without the work folder, the figure keeps each finished run's
    recorded curve; a run that was under way has restarted there, so its old curve is dropped;
    a run's folder, when there, is what counts."""
    from benchmarks.search_efficiency import full_size_curves

    monkeypatch.setattr(full_size, "RUNS", tmp_path / "runs.jsonl")
    runs = [full_size_run("sst5", "paper", seed, 2e-5, 0.5) for seed in (0, 1)]
    full_size.RUNS.write_text("".join(json.dumps(r) + "\n" for r in runs))
    paper = {"0": {"validation": [0.4, 0.5], "finished": True},
             "1": {"validation": [0.3], "finished": True}}  # fmt: skip
    before = {"sst5": {"paper": paper, "at_scale": {"2": {"validation": [0.2], "finished": False}}}}
    recorded = tmp_path / "curves.json"
    recorded.write_text(json.dumps({"datasets": before}))
    work = tmp_path / "work"
    (work / "sst5-paper-1").mkdir(parents=True)
    (work / "sst5-paper-1" / "metrics.jsonl").write_text(
        json.dumps({"evaluation": 0, "objective": 0.35}) + "\n"
    )
    found = full_size_curves.curves(work, recorded=recorded)
    assert found["sst5"]["paper"] == {
        "0": {"validation": [0.4, 0.5], "finished": True},
        "1": {"validation": [0.35], "finished": True},
    }
    assert found["sst5"]["at_scale"] == {}


def test_a_run_is_trained_by_one_process_and_a_finished_one_by_none(tmp_path, monkeypatch, capsys):
    """A run another process holds is passed over, its claim is free again once let go, and a
    claimed run that has finished meanwhile is not trained again."""
    monkeypatch.setattr(full_size, "RUNS", tmp_path / "runs.jsonl")
    with full_size.claim(tmp_path, "sst5", "paper", 0) as first:
        with full_size.claim(tmp_path, "sst5", "paper", 0) as second:
            assert (first, second) == (True, False)
        with full_size.claim(tmp_path, "sst5", "paper", 1) as other_seed:
            assert other_seed
    assert "sst5 paper seed 0: another process trains it" in capsys.readouterr().out
    assert not full_size.run_folder(tmp_path, "sst5", "paper", 0).exists()  # only looked at
    with full_size.claim(tmp_path, "sst5", "paper", 0) as again:
        assert again
    full_size.RUNS.write_text(json.dumps(full_size_run("sst5", "paper", 0, 2e-5, 0.5)) + "\n")

    def train(*args: object, **kwargs: object) -> None:
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(full_size, "train", train)
    assert full_size.run_piece("sst5", "paper", 0, tmp_path, "abc", deadline=0.0, threads=1)
    assert len(full_size.finished()) == 1


def test_what_is_left_counts_the_epochs_not_logged_at_the_finished_runs_cost(tmp_path, monkeypatch):
    """An unfinished run needs its epochs not yet logged at its dataset's seconds a row-epoch;
    a run whose config history has not decided, or of a dataset with no finished run to cost it
    by, is counted as waiting; deciding is left to the study."""
    from benchmarks.search_efficiency import full_size_curves

    monkeypatch.setattr(full_size, "RUNS", tmp_path / "runs.jsonl")
    monkeypatch.setattr(full_size, "DECIDED", tmp_path / "configs.json")
    rows = full_size_tasks.train_rows("sst5")
    paper = {**full_size_run("sst5", "paper", 0, 2e-5, 0.5), "train_seconds": rows * 7 * 0.01}
    paper["config"] = full_size.arm_config("sst5", "paper")
    full_size.RUNS.write_text(json.dumps(paper) + "\n")
    (tmp_path / "sst5-paper-1").mkdir()
    lines = [json.dumps({"evaluation": e, "objective": 0.4}) for e in range(2)]
    (tmp_path / "sst5-paper-1" / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    left = full_size_curves.remaining(tmp_path)
    # sst5: paper 1 (5 epochs left) and 2, scaled 0-2 (7 each); waiting: its history and
    # at_scale, and every CoNLL-2003 run (none finished)
    assert left["runs_left"] == 23 and left["runs_waiting"] == 6 + 12
    assert left["cpu_hours"] == pytest.approx(rows * 0.01 * (5 + 7 + 3 * 7) / 3600)
    assert not full_size.DECIDED.exists()
    last = {"runs_left": 1, "cpu_hours": 5.61, "runs_waiting": 0}  # the line under the figure
    assert full_size_curves.left_text(last, digits=1) == (
        "1 run left: about 5.6 CPU-hours, 0 waiting for a config"
    )
    done = {"runs_left": 0, "cpu_hours": 0.0, "runs_waiting": 0}
    assert full_size_curves.left_text(done, digits=1) == "every run finished"
