"""Multi-objective search: objective names, the Pareto front against a domination test written
here, and a real search (Ray, Optuna, MLflow, 1-layer MiniLM) in which the multi-objective
successive halving (astune/tuning/searchers/mo_halving.py) stops some trials: its ``trials.csv``,
``pareto.csv``, tags, console table, ``optuna.db``, the pruned trials, the scheduler's
decisions replayed and ``export --within``."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import random
from dataclasses import dataclass
from pathlib import Path

import optuna
import pytest
import yaml
from mlflow import MlflowClient
from stores import new_store
from tiny import tiny_flags

from astune.cli import main
from astune.exporting import find_best_trial
from astune.metrics.objectives import COSTS, front, parse_objectives
from astune.space.space import SpaceError, load_space

SPACES = Path(__file__).parent / "spaces"
COST = "optimizer_steps"  # the real search's cost: counted, so its rung decisions are certain
TRIALS = 4
EPOCHS = 2
MAX_T = EPOCHS + 1  # the reports of a trial that runs to its end: an evaluation per epoch, a final


# -- names ----------------------------------------------------------------------------------
def test_objectives_put_the_metric_first_and_keep_the_costs_order():
    assert parse_objectives("train_seconds, objective,optimizer_steps") == (
        "objective",
        "train_seconds",
        "optimizer_steps",
    )
    assert parse_objectives(["objective"]) == ("objective",)


@pytest.mark.parametrize(
    "value, message",
    [
        ("objective,wall_time", "unknown objective 'wall_time'"),
        ("objective,train_seconds,train_seconds", "'train_seconds' is given twice"),
        ("train_seconds", "leave out the primary metric 'objective'"),
        ("objective,,train_seconds", "must list names"),
    ],
)
def test_bad_objectives_name_the_value_and_what_is_accepted(value, message):
    with pytest.raises(ValueError, match=message) as err:
        parse_objectives(value)
    assert "\n" not in str(err.value)
    if "twice" not in message:
        assert all(name in str(err.value) for name in COSTS)


def test_the_search_command_refuses_bad_objectives_in_one_line(capsys):
    code = main(["search", "--dataset", "sst5", "--objectives", "objective,seconds"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--objectives: unknown objective 'seconds'" in err and "train_seconds" in err


# -- the front ------------------------------------------------------------------------------
def dominated(p: tuple, q: tuple, directions: list[str]) -> bool:
    """Reference: ``q`` dominates ``p`` (no worse anywhere, better somewhere)."""
    better = [(b > a) if d == "max" else (b < a) for a, b, d in zip(p, q, directions)]
    worse = [(b < a) if d == "max" else (b > a) for a, b, d in zip(p, q, directions)]
    return any(better) and not any(worse)


def reference_front(points: list[tuple], directions: list[str]) -> list[int]:
    return [i for i, p in enumerate(points) if not any(dominated(p, q, directions) for q in points)]


@pytest.mark.parametrize("seed", range(5))
def test_front_equals_the_reference_with_ties_and_three_objectives(seed):
    rng = random.Random(seed)
    # values on a coarse grid, so that equal points and equal coordinates occur
    points = [tuple(rng.randint(0, 4) for _ in range(3)) for _ in range(40)]
    directions = ["max", "min", "min"]
    assert front(points, directions) == reference_front(points, directions)
    assert front(points, ["min", "min", "min"]) == reference_front(points, ["min"] * 3)


def test_equal_points_are_both_on_the_front():
    assert front([(1.0, 2.0), (1.0, 2.0), (0.5, 3.0)], ["max", "min"]) == [0, 1]


# -- the space ------------------------------------------------------------------------------
def write_space(folder: Path, **changes) -> Path:
    path = folder / "space.yaml"
    path.write_text(yaml.safe_dump({"extends": str(SPACES / "tiny.yaml"), **changes}))
    return path


def test_several_objectives_keep_early_stopping_unless_turned_off(tmp_path):
    default = load_space("default")
    assert default.objectives == ("objective",) and default.scheduler_type == "asha"
    multi = default.with_settings(objectives=("objective", "train_seconds"))
    assert multi.scheduler_type == "asha" and multi.modes == ["max", "min"]
    asked = write_space(
        tmp_path, objectives=["objective", "samples_computed"], scheduler={"type": "asha"}
    )
    assert load_space(asked).scheduler_type == "asha"
    assert load_space(asked).with_settings(scheduler="none").scheduler_type == "none"


def test_a_bad_objective_in_a_space_names_the_file_and_the_key(tmp_path):
    bad = write_space(tmp_path, objectives=["objective", "seconds"])
    with pytest.raises(SpaceError, match="unknown objective 'seconds'") as err:
        load_space(bad)
    assert str(err.value).startswith(f"{bad}: objectives: ")


# -- a real search --------------------------------------------------------------------------
@dataclass
class Searched:
    root: Path
    uri: str
    out: str
    client: MlflowClient
    parent: object
    trials: list  # MLflow runs of the trials, in the order they ran


@pytest.fixture(scope="module")
def searched(tmp_path_factory, data_dir, shared_ray) -> Searched:
    """Four CoNLL trials (entity F1 separates learning rates after one epoch), objectives the
    metric and the optimizer steps (AS-Speed's accumulation makes fewer), the space's default
    scheduler (``auto``: successive halving by non-dominated sorting, a reduction factor of
    2), one trial at a time; TPE proposes the last. The seed points make the outcome certain:
    the second trial takes fewer steps than the first (AS-Speed), so neither dominates the
    other and both run to the end; the third takes as many steps as the first with a learning
    rate too small to learn, so the first dominates it, and at the first rung (three trials)
    it stops. The search and `confirm --front` join the module's one Ray."""
    root = tmp_path_factory.mktemp("pareto")
    space = write_space(
        root,
        losses=["as_softmax"],
        seed_points=[
            {"loss": "as_softmax", "lr": 2.0e-3, "delta": 0.3, "as_speed": False},
            {"loss": "as_softmax", "lr": 2.0e-3, "delta": 0.2, "as_speed": True, "lam": 2.0},
            {"loss": "as_softmax", "lr": 1.0e-5, "delta": 0.3, "as_speed": False},
        ],
        scheduler={"type": "auto", "grace_period": 1, "reduction_factor": 2},
        params={
            "lr": {"type": "categorical", "choices": [1.0e-5, 2.0e-3]},
            "batch_size": 8,
            "epochs": {"type": "fixed", "value": EPOCHS},
        },
        num_samples=TRIALS,
    )
    uri = new_store(root)
    argv = ["search", "--dataset", "conll2003", "--space", str(space), "--name", "front"]
    argv += tiny_flags(max_train_samples=160, max_eval_samples=100)
    argv += ["--max-concurrent", "1", "--tracking-uri", uri, "--data-dir", str(data_dir)]
    argv += ["--objectives", f"objective,{COST}", "--storage-path", str(root / "ray")]
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(out):
            assert main(argv) == 0
    finally:
        os.chdir(cwd)
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("front")
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    (parent,) = [r for r in runs if r.data.tags["astune.role"] == "search"]
    trials = [r for r in runs if r.data.tags["astune.role"] == "trial"]
    trials.sort(key=lambda r: r.info.start_time)  # in the order they ran
    return Searched(root, uri, out.getvalue(), client, parent, trials)


def artifact_rows(found: Searched, name: str) -> list[dict[str, str]]:
    folder = found.root / "artifacts"
    path = found.client.download_artifacts(found.parent.info.run_id, name, str(folder))
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.ray
@pytest.mark.slow
def test_the_front_is_the_finished_trials_no_other_finished_trial_dominates(searched):
    rows = artifact_rows(searched, "trials.csv")
    assert len(rows) == TRIALS
    finished = [r for r in rows if r.get("final") and float(r["final"]) == 1.0]
    stopped = [r for r in rows if r not in finished]
    assert stopped and len(finished) >= 2, [(r["trial_id"], r.get("final")) for r in rows]
    points = [(float(r["objective"]), float(r[COST])) for r in finished]
    expected = {finished[i]["trial_id"] for i in reference_front(points, ["max", "min"])}

    front_rows = artifact_rows(searched, "pareto.csv")
    assert {r["trial_id"] for r in front_rows} == expected
    assert not {r["trial_id"] for r in front_rows} & {r["trial_id"] for r in stopped}
    costs = [float(r[COST]) for r in front_rows]
    assert costs == sorted(costs)  # cheapest first
    by_trial = {r["trial_id"]: r for r in finished}
    for row in front_rows:  # the values are the trials' own
        assert float(row["objective"]) == pytest.approx(
            float(by_trial[row["trial_id"]]["objective"])
        )
        assert row["loss"] == "as_softmax" and row["run_id"]

    tagged = {
        t.data.tags["astune.trial_id"]
        for t in searched.trials
        if t.data.tags.get("astune.pareto") == "true"
    }
    assert tagged == expected
    assert "Pareto front" in searched.out and "best config" not in searched.out
    assert "View detailed results" not in searched.out  # Ray Tune's lines are off (issue 60)
    table = searched.out.split("Pareto front", 1)[1].splitlines()[2 : 2 + len(front_rows)]
    assert [line.split()[0] for line in table] == [r["trial_id"] for r in front_rows]


@pytest.mark.ray
@pytest.mark.slow
def test_the_optuna_study_has_two_directions_and_best_trials_equal_the_front(searched):
    tags = searched.parent.data.tags
    study = optuna.load_study(
        study_name=tags["astune.optuna_study"], storage=tags["astune.optuna_storage"]
    )
    assert study.directions == [
        optuna.study.StudyDirection.MAXIMIZE,
        optuna.study.StudyDirection.MINIMIZE,
    ]
    front_rows = artifact_rows(searched, "pareto.csv")
    expected = sorted((float(r["objective"]), float(r[COST])) for r in front_rows)
    got = sorted(tuple(t.values) for t in study.best_trials)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert a == pytest.approx(b)
    states = {t.state.name for t in study.trials}
    assert states == {"COMPLETE", "PRUNED"}  # the stopped trials are not COMPLETE


@pytest.mark.ray
@pytest.mark.slow
def test_every_evaluation_reports_the_costs_and_the_plot_is_a_png(searched):
    for run in searched.trials:
        history = searched.client.get_metric_history(run.info.run_id, "train_seconds")
        values = [m.value for m in sorted(history, key=lambda m: m.step)]
        assert values and all(math.isfinite(v) for v in values)
        assert values == sorted(values)  # training time only grows
        assert [m.step for m in history] == list(range(len(history)))  # one per evaluation
        steps = searched.client.get_metric_history(run.info.run_id, "optimizer_steps")
        assert len(steps) == len(history)
    png = searched.client.download_artifacts(
        searched.parent.info.run_id, "pareto.png", str(searched.root / "png")
    )
    assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.ray
@pytest.mark.slow
def test_export_within_takes_the_cheapest_front_trial_close_to_the_best(searched, tmp_path):
    rows = [r for r in artifact_rows(searched, "trials.csv") if r.get("final")]
    finished = [r for r in rows if float(r["final"]) == 1.0]
    points = [(float(r["objective"]), float(r[COST])) for r in finished]
    on_front = [finished[i] for i in reference_front(points, ["max", "min"])]
    best = max(p[0] for p in points)
    within = 2.0  # points: 0.02 of entity F1
    close = [r for r in on_front if float(r["objective"]) >= best - within / 100 - 1e-12]
    cheapest = min(float(r[COST]) for r in close)  # equal configs may tie on every objective
    expected = {r["trial_id"] for r in close if float(r[COST]) == cheapest}
    run_ids = {t.data.tags["astune.trial_id"]: t.info.run_id for t in searched.trials}

    out = tmp_path / "within.yaml"
    args = ["export", "--experiment", "front", "--tracking-uri", searched.uri]
    assert main([*args, "--within", str(within), "-o", str(out)]) == 0
    header = out.read_text().splitlines()
    assert any(run_ids[t] in header[0] for t in expected), header[:2]
    assert f"within {within:g} points of the best" in header[1]


@pytest.mark.ray
@pytest.mark.slow
def test_stopped_trials_are_pruned_in_optuna_and_off_the_front(searched):
    """The scheduler stopped the third trial below ``max_t`` (an evaluation per epoch and the
    final report) and let the first two run to their end; the stopped runs are tagged so and
    none is on the front, and the searcher told Optuna they were pruned, not complete."""
    from ray.tune import ExperimentAnalysis
    from ray.tune.search import ConcurrencyLimiter

    from astune.tuning.searchers.searcher import PruneAwareOptunaSearch

    path = str(searched.root / "ray" / "front")
    restored = ConcurrencyLimiter(
        PruneAwareOptunaSearch(metric=["objective", COST], mode=["max", "min"]),
        max_concurrent=1,
    )
    restored.restore_from_dir(path)
    states = restored.searcher.trial_states()
    early = {
        t.data.tags["astune.trial_id"]: t.data.tags.get("astune.stopped_early") == "true"
        for t in searched.trials
    }
    assert len(states) == TRIALS and set(states) == set(early)
    first, second, third = (t.data.tags["astune.trial_id"] for t in searched.trials[:3])
    assert early[third] and not early[first] and not early[second]
    on_front = {
        t.data.tags["astune.trial_id"]
        for t in searched.trials
        if t.data.tags.get("astune.pareto") == "true"
    }
    assert on_front and not on_front & {t for t, stopped in early.items() if stopped}
    for trial_id, stopped in early.items():
        assert states[trial_id] == ("PRUNED" if stopped else "COMPLETE"), (trial_id, states)
    reported = {
        t.trial_id: t.last_result["training_iteration"] for t in ExperimentAnalysis(path).trials
    }
    for trial_id, stopped in early.items():
        assert (reported[trial_id] < MAX_T) if stopped else (reported[trial_id] == MAX_T)


@pytest.mark.ray
@pytest.mark.slow
def test_the_scheduler_decisions_replay_from_the_trials_results(searched):
    """The search ran one trial at a time, so its scheduler met each trial's results in trial
    order: a fresh scheduler fed the same results (each trial's ``result.json``, as Ray wrote
    them) stops exactly the trials whose runs are tagged stopped early."""
    from astune.tuning.searchers.mo_halving import MOHalvingScheduler

    scheduler = MOHalvingScheduler(
        ["objective", COST], ["max", "min"], max_t=MAX_T, reduction_factor=2
    )
    folder = searched.root / "ray" / "front"
    stopped = set()
    trial_ids = [t.data.tags["astune.trial_id"] for t in searched.trials]
    for trial_id in trial_ids:
        lines = (folder / f"trial_{trial_id}" / "result.json").read_text().splitlines()
        for number, result in enumerate(map(json.loads, lines), 1):
            iteration = result["training_iteration"]
            values = (result["objective"], result[COST])
            if iteration < MAX_T and scheduler.decide(trial_id, iteration, values) == "STOP":
                stopped.add(trial_id)
                assert number == len(lines), trial_id  # it reported nothing after
    tagged = {
        t.data.tags["astune.trial_id"]
        for t in searched.trials
        if t.data.tags.get("astune.stopped_early") == "true"
    }
    assert stopped == tagged and trial_ids[2] in stopped, scheduler.rungs


def paired_interval(diffs: list[float]) -> tuple[float, float]:
    """Reference: the 95% t interval of the mean of ``diffs`` (low, high)."""
    from scipy import stats

    n = len(diffs)
    mean = sum(diffs) / n
    half = stats.t.ppf(0.975, n - 1) * stats.tstd(diffs) / math.sqrt(n)
    return mean - half, mean + half


@pytest.mark.ray
@pytest.mark.slow
def test_confirm_front_reruns_the_front_and_gives_the_verdict_of_each(searched):
    front_rows = artifact_rows(searched, "pareto.csv")  # cheapest first
    top = 1  # the cheapest front trial, against the baseline
    args = ["confirm", "--experiment", "front", "--tracking-uri", searched.uri, "--front"]
    args += ["--top", str(top), "--seeds", "2", "--within", "1"]
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(searched.root)  # the search's storage folder
    try:
        with contextlib.redirect_stdout(out):
            assert main(args) == 0
    finally:
        os.chdir(cwd)
    rows = artifact_rows(searched, "confirm.csv")
    assert [r["confirms"] for r in rows] == [r["run_id"] for r in front_rows[:top]] + ["baseline"]
    # one name per trial (issue 60): the front table's, pareto.csv's and the tag's trial id
    assert [r["trial_id"] for r in rows] == [r["trial_id"] for r in front_rows[:top]] + [""]
    assert f"(trial {front_rows[0]['trial_id']})" in out.getvalue()

    experiment = searched.client.get_experiment_by_name("front")
    runs = searched.client.search_runs(
        [experiment.experiment_id], "tags.`astune.role` = 'confirm'", max_results=100
    )
    logged: dict[str, dict[int, tuple[float, float]]] = {}
    for run in runs:
        seed = int(run.data.params["seed"])
        values = (run.data.metrics["best_objective"], run.data.metrics["train_seconds"])
        logged.setdefault(run.data.tags["astune.confirms"], {})[seed] = values
    base = logged["baseline"]
    for row in rows[:-1]:
        own = logged[row["confirms"]]
        metric = paired_interval([own[s][0] - base[s][0] for s in sorted(own)])
        time = paired_interval([own[s][1] - base[s][1] for s in sorted(own)])
        assert float(row["time_diff_high"]) == pytest.approx(time[1])
        expected = bool(time[1] < 0 and metric[0] > -1.0 / 100)
        assert row["faster_at_equal_accuracy"] == str(expected), row
    assert rows[-1]["faster_at_equal_accuracy"] == ""
    assert "faster at equal accuracy (time significantly lower" in out.getvalue()
    # export now prefers the front trial confirmed faster at equal accuracy, else the winner
    parent = searched.client.get_run(searched.parent.info.run_id)
    assert parent.data.tags["astune.confirm_front_within"] == "1.0"
    best = find_best_trial("front", searched.uri)
    (row,) = rows[:-1]
    if row["faster_at_equal_accuracy"] == "True":
        assert best.run_id == row["confirms"] and best.trial_id == row["trial_id"]
        assert f"trial {row['trial_id']} (MLflow run {best.run_id}" in best.describe()
        assert "confirmed faster at equal accuracy by `astune confirm --front`" in best.source
    else:
        assert "confirmed winner of `astune confirm` over 2 seeds" in best.source
