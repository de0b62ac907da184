"""`recommend`'s delta schedule advice (astune/recommendation/schedules.py) on a real SQLite MLflow
store written here with MlflowClient: which schedule won by difficulty band, and the delta
trajectories of similar tasks, as run or replayed by the ema schedule on a fixed-delta run's
logged margins (against a plain reference written here)."""

from __future__ import annotations

import pytest
from hand_store import log_run
from mlflow import MlflowClient
from stores import new_store

from astune.history.difficulty import Difficulty
from astune.recommendation import (
    FRACTIONS,
    HistoryPoint,
    band_of,
    format_recommendation,
    history_points,
    prior_warmup,
    schedule_advice,
    tally_schedules,
    trajectory,
)
from astune.recommendation.advice import _recommendation
from astune.store.reader import Store

EMA = {"delta_momentum": 0.8, "delta_min": 0.05}
# search -> (difficulty, trials: (schedule, its params, delta, objective))
SEARCHES = {
    "hard-a": (0.95, [("ema", EMA, 0.3, 0.52), ("fixed", {}, 0.3, 0.50)]),
    "hard-b": (
        0.90,
        [("ema", {**EMA, "delta_momentum": 0.9}, 0.2, 0.48), ("fixed", {}, 0.2, 0.41)],
    ),
    "hard-c": (0.92, [("target-mask", {"mask_target": 0.5}, 0.3, 0.47), ("ema", EMA, 0.3, 0.45)]),
    "hard-fixed": (0.97, [("fixed", {}, 0.25, 0.40)]),
    "easy-a": (0.30, [("fixed", {}, 0.35, 0.90), ("ema", EMA, 0.35, 0.88)]),
}
# The logged evaluations of every trial: samples seen, optimizer steps and the train margin.
SAMPLES = [40, 80, 120, 160]
STEPS = [5, 10, 15, 20]
MARGINS = [0.05, 0.25, 0.45, 0.6]
WARMUP = 0.3  # 48 of the 160 samples: the first evaluation (40) is in the warm-up


def reference_ema(delta, *, warmup, momentum, low):
    """Plain EMA of the margins, one update per optimizer step, each step of an evaluation's
    interval seeing that evaluation's margin; delta 1 while the samples are in the warm-up."""
    ema, out, samples_done, steps_done = delta, [], 0, 0
    for samples, steps, margin in zip(SAMPLES, STEPS, MARGINS):
        k = steps - steps_done
        for i in range(1, k + 1):
            at = samples_done + (samples - samples_done) * i / k
            if at >= warmup * SAMPLES[-1]:
                ema = momentum * ema + (1 - momentum) * margin
        out.append(1.0 if samples < warmup * SAMPLES[-1] else min(1.0, max(low, ema)))
        samples_done, steps_done = samples, steps
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    uri = new_store(tmp_path_factory.mktemp("schedules"))
    client = MlflowClient(tracking_uri=uri)
    for name, (_, trials) in SEARCHES.items():
        exp = client.create_experiment(name)
        tags = {"astune.role": "search", "astune.dataset": name}
        parent = log_run(client, exp, tags, {"mode": "max"}, {})
        for schedule, params, delta, value in trials:
            child = {"mlflow.parentRunId": parent, "astune.role": "trial", "astune.dataset": name}
            config = {"loss": "as_softmax", "delta": delta, "warmup_ratio": WARMUP}
            config |= {"delta_schedule": schedule, **params}
            run_id = log_run(client, exp, child, config, {"best_objective": value})
            _log_evaluations(client, run_id, schedule, delta)
    return Store(uri)


def _log_evaluations(client: MlflowClient, run_id: str, schedule: str, delta: float) -> None:
    for step, (samples, steps, margin) in enumerate(zip(SAMPLES, STEPS, MARGINS)):
        client.log_metric(run_id, "samples_seen", samples, step=step)
        client.log_metric(run_id, "optimizer_steps", steps, step=step)
        client.log_metric(run_id, "train_margin", margin, step=step)
        if schedule != "fixed":  # an adaptive run's own delta: made up, read back as logged
            client.log_metric(run_id, "delta_now", delta + 0.1 * step, step=step)


def _points(store: Store) -> list[HistoryPoint]:
    difficulty = {name: value for name, (value, _) in SEARCHES.items()}
    points, notes = history_points(
        store, lambda name, run: Difficulty(name, "single_label", difficulty[name], 0.05)
    )
    assert notes == [] and len(points) == len(SEARCHES)
    return points


def test_bands_follow_the_priors_scale():
    assert [band_of(d) for d in (0.0, 0.59, 0.6, 0.87, 0.875, 1.0)] == [
        "easy", "easy", "medium", "medium", "hard", "hard",
    ]  # fmt: skip


def test_the_history_reads_each_searchs_best_schedule_and_what_it_tried(store):
    by_name = {p.experiment: p for p in _points(store)}
    assert by_name["hard-a"].schedule == "ema" and by_name["hard-a"].schedule_params == EMA
    assert by_name["hard-a"].schedules_tried == ("ema", "fixed")
    assert by_name["hard-c"].schedule == "target-mask"
    # a key the trial did not log is the catalogue's default, as the run used it
    assert by_name["hard-c"].schedule_params == {
        "mask_target": 0.5, "delta_gain": 0.5, "delta_max_step": 0.02, "delta_min": 0.05,
    }  # fmt: skip
    assert by_name["hard-fixed"].schedules_tried == ("fixed",)


def test_the_tally_counts_contests_only_and_takes_the_winners_median_parameters(store):
    tallies = tally_schedules(_points(store))
    hard, easy, medium = tallies["hard"], tallies["easy"], tallies["medium"]
    assert {k: len(v) for k, v in hard.wins.items()} == {"ema": 2, "target-mask": 1}
    assert hard.contests == 3 and hard.single_schedule == 1  # hard-fixed tried one schedule
    assert hard.winner() == "ema"
    assert hard.winner_params() == {"delta_momentum": pytest.approx(0.85), "delta_min": 0.05}
    assert easy.winner() == "fixed" and easy.winner_params() == {}
    assert medium.winner() is None and medium.contests == 0


def test_an_adaptive_best_trial_gives_its_own_delta_as_logged(store):
    point = next(p for p in _points(store) if p.experiment == "hard-b")
    got = trajectory(store, point)
    assert got.schedule == "ema" and not got.replayed
    # read at 25/50/75/100% of the 160 samples: the last evaluation at or before each
    assert FRACTIONS == (0.25, 0.5, 0.75, 1.0)
    assert got.deltas == pytest.approx((0.2, 0.3, 0.4, 0.5))


def test_a_fixed_best_trial_gives_the_ema_schedule_replayed_on_its_margins(store):
    point = next(p for p in _points(store) if p.experiment == "hard-fixed")
    got = trajectory(store, point)
    assert got.replayed and got.schedule == "ema" and got.start == 0.25
    expected = reference_ema(0.25, warmup=WARMUP, momentum=0.9, low=0.05)  # ema's defaults
    assert got.deltas == pytest.approx(tuple(expected))
    assert got.deltas[0] == 1.0 and got.deltas[-1] > got.deltas[1]  # warm-up, then it follows


def test_the_advice_and_report_for_a_hard_task(store):
    points = _points(store)
    advice = schedule_advice(store, points, 0.93)
    assert advice.band == "hard" and advice.schedule == "ema" and advice.contested
    assert sorted(t.experiment for t in advice.trajectories) == sorted(
        n for n, (d, _) in SEARCHES.items() if d >= 0.875
    )
    target = Difficulty("my_task", "single_label", 0.93, 0.05)
    rec = _recommendation(target, points, [], advice)
    report = format_recommendation(rec)
    assert "schedule:    ema (delta_momentum 0.85, delta_min 0.05)" in report
    assert "won 2 of 3 hard-task searches that compared schedules" in report
    assert (
        "by band: easy: fixed 1; medium: no search; hard: ema 2, target-mask 1; 1 tried" in report
    )
    assert "hard-fixed (ema replayed on fixed delta 0.25): 1.00" in report
    assert "median:" in report
    assert "the schedule recommended is ema" in rec.rationale


def test_without_a_contest_the_schedule_is_the_papers(store):
    points = [p for p in _points(store) if p.experiment == "hard-fixed"]
    advice = schedule_advice(store, points, 0.7)
    assert advice.band == "medium" and advice.schedule == "fixed" and not advice.contested
    assert advice.trajectories == [] and advice.params == {}
    target = Difficulty("my_task", "single_label", 0.7, 0.05)
    rec = _recommendation(target, points, [], advice)
    assert "No search of a medium task in the store compared delta schedules" in rec.rationale


def test_the_rationale_says_where_a_warm_up_comes_from(store):
    """History whose searches won with a warm-up: on a hard task, where the paper uses none,
    r > 0 is the history fit's (it said "as the paper does for easy tasks")."""
    import dataclasses

    points = [dataclasses.replace(p, warmup_ratio=0.2) for p in _points(store)]
    advice = schedule_advice(store, points, 0.93)
    hard = _recommendation(Difficulty("my_task", "single_label", 0.93, 0.05), points, [], advice)
    assert hard.warmup_ratio > 0 and prior_warmup(0.93) == 0
    assert "first r of training, from the history fit (the paper uses one only" in hard.rationale
    easy = _recommendation(Difficulty("my_task", "single_label", 0.3, 0.05), points, [], advice)
    assert "first r of training, as the paper does for easy tasks" in easy.rationale


@pytest.mark.parametrize(("band", "expected"), [("easy", "an"), ("medium", "a"), ("hard", "a")])
def test_the_rationale_names_a_band_with_its_article(band, expected):
    from astune.recommendation.report import article

    assert f"{article(band)} {band} task" == f"{expected} {band} task"


def test_the_written_space_offers_the_winning_schedule_beside_fixed(store, tmp_path, data_dir):
    from astune.recommendation import write_space
    from astune.space.space import load_space

    points = _points(store)
    target = Difficulty("sst5", "single_label", 0.93, 0.05)
    rec = _recommendation(target, points, [], schedule_advice(store, points, 0.93))
    space = load_space(write_space(rec, "sst5", tmp_path / "space.yaml"))
    params = space.loss_params["as_softmax"]
    assert params["delta_schedule"].choices == ("fixed", "ema")
    assert params["delta_momentum"].value == pytest.approx(0.85)
    assert params["delta_min"].value == 0.05
    first = space.seed_points[0]
    h = rec.history_weight  # the shipped 0.3 moved toward history's fit by its weight
    assert 0 < h < 1 and rec.fit_delta is not None
    expected = h * rec.fit_delta + (1 - h) * 0.3
    assert first["delta"] == pytest.approx(expected, abs=0.025)  # on the space's 0.05 steps
    assert first["delta_schedule"] == "ema"
    assert first["delta_momentum"] == pytest.approx(0.85)
