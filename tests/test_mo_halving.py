"""Successive halving on several objectives (astune/tuning/searchers/mo_halving.py): NSGA-II's order
(non-dominated sorting, crowding distance) against plain references written here on random
points, and the scheduler's decisions on hand-made sequences of trials reaching a rung. No Ray
runs here: the scheduler is built and driven without it, as a simulated replay drives it. The
real search it stops trials of is in test_pareto.py."""

from __future__ import annotations

import math
import pickle
import random

import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

from astune.metrics.objectives import crowding_distances, nondominated_fronts, nsga2_keys
from astune.space.space import load_space
from astune.tuning.searchers.algorithms import scheduler_for
from astune.tuning.searchers.mo_halving import MOHalvingScheduler, rung_levels

CONTINUE, STOP = "CONTINUE", "STOP"


# -- references ------------------------------------------------------------------------------
def dominated(p: tuple, q: tuple, directions: list[str]) -> bool:
    """``q`` dominates ``p``: no worse on every objective, better on one."""
    better = [(b > a) if d == "max" else (b < a) for a, b, d in zip(p, q, directions)]
    worse = [(b < a) if d == "max" else (b > a) for a, b, d in zip(p, q, directions)]
    return any(better) and not any(worse)


def reference_fronts(points: list[tuple], directions: list[str]) -> list[list[int]]:
    """Peel the front off again and again: each front is the points of those left that none
    of those left dominates (O(n^3), plainly)."""
    left, fronts = list(range(len(points))), []
    while left:
        layer = [
            i for i in left if not any(dominated(points[i], points[j], directions) for j in left)
        ]
        fronts.append(layer)
        left = [i for i in left if i not in layer]
    return fronts


def reference_crowding(points: list[tuple]) -> list[float]:
    """NSGA-II's crowding distance of one front, objective by objective: ends infinite,
    inner points the gap between their neighbours over the front's range."""
    distance = [0.0] * len(points)
    for k in range(len(points[0]) if points else 0):
        order = sorted(range(len(points)), key=lambda i: (points[i][k], i))
        distance[order[0]] = distance[order[-1]] = math.inf
        low, high = points[order[0]][k], points[order[-1]][k]
        if high == low:
            continue
        for a, i, b in zip(order, order[1:], order[2:]):
            distance[i] += (points[b][k] - points[a][k]) / (high - low)
    return distance


def random_points(seed: int, n: int, m: int, *, grid: bool) -> list[tuple]:
    rng = random.Random(seed)
    if grid:  # coarse values: equal points and equal coordinates occur
        return [tuple(float(rng.randint(0, 4)) for _ in range(m)) for _ in range(n)]
    return [tuple(rng.uniform(-1.0, 3.0) for _ in range(m)) for _ in range(n)]


DIRECTIONS = [["max", "min"], ["min", "max", "min"], ["max", "max", "min", "min"], ["min"]]


# -- NSGA-II's order -------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("directions", DIRECTIONS, ids="-".join)
def test_nondominated_sorting_equals_the_reference(seed, directions):
    for grid in (True, False):
        points = random_points(seed, 30 + seed, len(directions), grid=grid)
        fronts = nondominated_fronts(points, directions)
        assert fronts == reference_fronts(points, directions)
        assert sorted(i for f in fronts for i in f) == list(range(len(points)))
    if len(directions) > 1:  # the sort has several fronts on these points
        assert len(fronts) > 1


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("m", [2, 3])
def test_crowding_distances_equal_the_reference(seed, m):
    points = random_points(100 + seed, 10 + seed, m, grid=False)
    got, want = crowding_distances(points), reference_crowding(points)
    assert [math.isinf(g) for g in got] == [math.isinf(w) for w in want]
    assert [g for g in got if math.isfinite(g)] == pytest.approx([w for w in want if w < math.inf])
    assert sum(math.isfinite(g) for g in got) > 0  # inner points exist


def test_crowding_with_equal_values_and_tiny_fronts():
    assert crowding_distances([]) == []
    assert crowding_distances([(1.0, 2.0), (3.0, 0.0)]) == [math.inf, math.inf]
    flat = [(1.0, 0.0), (1.0, 1.0), (1.0, 3.0)]  # no range on the first objective
    assert crowding_distances(flat) == reference_crowding(flat) == [math.inf, 1.0, math.inf]


@pytest.mark.parametrize("seed", range(4))
def test_nsga2_keys_rank_by_front_then_crowding(seed):
    directions = ["max", "min"]
    points = random_points(200 + seed, 25, 2, grid=False)
    keys = nsga2_keys(points, directions)
    for number, front in enumerate(reference_fronts(points, directions)):
        crowding = reference_crowding([points[i] for i in front])
        for i, distance in zip(front, crowding):
            assert keys[i][0] == number and -keys[i][1] == pytest.approx(distance)


def test_a_nan_objective_is_the_worst_value():
    points = [(math.nan, 1.0), (0.1, 1.0), (0.2, 2.0)]
    assert nondominated_fronts(points, ["max", "min"]) == [[1, 2], [0]]
    # minimised, the NaN metric is still the worst, but its cost beats (0.2, 2.0)'s
    assert nondominated_fronts(points, ["min", "min"]) == [[1], [0, 2]]


# -- the scheduler's decisions ---------------------------------------------------------------
def scheduler(modes=("max", "min"), *, reduction_factor: float = 2, max_t: int = 10):
    return MOHalvingScheduler(
        ["objective", "train_seconds"],
        list(modes),
        max_t=max_t,
        grace_period=1,
        reduction_factor=reduction_factor,
    )


def reach(sched: MOHalvingScheduler, points: list[tuple], iteration: int = 1) -> list[str]:
    """Trials reaching the rung at ``iteration`` one after another, through Tune's hook: the
    decisions, in order."""
    trials = [Trial("stand_in", stub=True) for _ in points]
    for trial in trials:
        sched.on_trial_add(None, trial)
    return [
        sched.on_trial_result(
            None,
            trial,
            {"training_iteration": iteration, "objective": score, "train_seconds": seconds},
        )
        for trial, (score, seconds) in zip(trials, points)
    ]


def test_a_dominated_trial_is_stopped_and_a_front_trial_promoted():
    # b dominates a; c is dominated by both; d is better than all but dearest: on the front
    points = [(0.5, 10.0), (0.6, 5.0), (0.4, 12.0), (0.9, 20.0)]
    sched = scheduler()
    assert reach(sched, points) == [CONTINUE, CONTINUE, STOP, CONTINUE]
    assert "num_stopped=1" in sched.debug_string()
    (rung,) = [seen for level, seen in sched.rungs.items() if level == 1]
    assert sorted(rung.values()) == sorted(points)  # each recorded at the rung it reached


def test_fewer_trials_than_the_reduction_factor_are_promoted():
    # the second and third are dominated, but a rung of fewer than 4 trials keeps them
    points = [(0.9, 1.0), (0.1, 9.0), (0.05, 10.0), (0.01, 11.0)]
    assert reach(scheduler(reduction_factor=4), points) == [CONTINUE, CONTINUE, CONTINUE, STOP]


def test_modes_decide_which_trial_is_dominated():
    points = [(0.5, 10.0), (0.6, 5.0), (0.4, 12.0)]
    assert reach(scheduler(("max", "min")), points)[-1] == STOP
    # with the metric minimised, (0.4, 12) is the best metric: on the front, promoted
    assert reach(scheduler(("min", "min")), points)[-1] == CONTINUE
    # with the cost maximised too, (0.4, 12) loses on both: stopped again
    assert reach(scheduler(("max", "max")), [(0.5, 13.0), (0.6, 14.0), (0.4, 12.0)])[-1] == STOP


@pytest.mark.parametrize("last, decision", [(3, CONTINUE), (2, STOP)])
def test_crowding_decides_within_the_front(last, decision):
    """Five trials all on one front (a better metric costs more); with a reduction factor of 2
    the best 2.5 go on: the two ends (infinitely far from others), then the least crowded. Of
    the inner points x = 0.5 (gap 0.6) is the least crowded, x = 0.4 (gap 0.2) the most."""
    xs = [0.0, 0.3, 0.4, 0.5, 1.0]
    points = [(x, 10.0 * x) for x in xs]
    order = [i for i in range(5) if i != last] + [last]
    assert reach(scheduler(), [points[i] for i in order])[-1] == decision


def test_a_trial_is_judged_once_per_rung_and_at_max_t_it_ends():
    sched = scheduler(max_t=4)  # rungs 1 and 2 (a trial at 4 has ended)
    assert rung_levels(1, 2, 4) == [1, 2] and list(sched.rungs) == [1, 2]
    assert reach(sched, [(0.9, 1.0), (0.95, 2.0)]) == [CONTINUE, CONTINUE]
    trial = Trial("stand_in", stub=True)
    low = {"training_iteration": 1, "objective": 0.1, "train_seconds": 9.0}
    assert sched.on_trial_result(None, trial, low) == STOP
    assert sched.on_trial_result(None, trial, low) == CONTINUE  # already judged at rung 1
    assert sched.on_trial_result(None, trial, {"training_iteration": 1}) == CONTINUE  # no values
    end = {**low, "training_iteration": 4}
    assert sched.on_trial_result(None, trial, end) == STOP
    assert "num_stopped=1" in sched.debug_string()  # ending at max_t is no early stop


def test_a_completed_trial_counts_at_its_rung_but_not_as_stopped():
    sched = scheduler(max_t=10)
    trial = Trial("stand_in", stub=True)
    sched.on_trial_complete(
        None, trial, {"training_iteration": 2, "objective": 0.5, "train_seconds": 3.0}
    )
    assert sched.rungs[2] == {trial.trial_id: (0.5, 3.0)} and "num_stopped=0" in (
        sched.debug_string()
    )


def test_the_scheduler_survives_pickling_and_save_restore(tmp_path):
    sched = scheduler()
    reach(sched, [(0.5, 10.0), (0.6, 5.0), (0.4, 12.0)])
    again = pickle.loads(pickle.dumps(sched))  # how Tuner.restore brings it back
    assert again.rungs == sched.rungs
    sched.save(str(tmp_path / "state"))
    fresh = scheduler()
    fresh.restore(str(tmp_path / "state"))
    assert fresh.rungs == sched.rungs and "num_stopped=1" in fresh.debug_string()
    assert fresh.decide("late", 1, (0.3, 30.0)) == STOP  # the restored rung still counts


def test_replayed_results_rebuild_the_rungs_in_any_order_and_decide_nothing():
    """What a resumed search does with the trials' recorded results: the restored scheduler
    gets back the rungs each trial reached, whatever order the trials are replayed in."""
    rng = random.Random(5)
    live = scheduler(max_t=8)  # rungs 1, 2 and 4
    reported: dict[str, list[dict]] = {}
    for i in range(12):
        trial_id = f"t{i}"
        reported[trial_id] = []
        for k in range(1, rng.randint(2, 9)):
            result = {"training_iteration": k, "objective": rng.random(), "train_seconds": k + i}
            reported[trial_id].append(result)
            if live.decide(trial_id, k, (result["objective"], result["train_seconds"])) == STOP:
                break  # a stopped trial reports nothing more
    assert any(len(seen) >= 3 for seen in live.rungs.values())
    assert "num_stopped=0" in live.debug_string()  # decide() counts nothing; Tune's hook does
    for order in (list(reported), list(reversed(reported))):
        replayed = scheduler(max_t=8)
        for trial_id in order:
            replayed.replay(trial_id, reported[trial_id])
        assert replayed.rungs == live.rungs
        assert "num_stopped=0" in replayed.debug_string()


def test_tune_config_metrics_are_refused_as_asha_refuses_them():
    sched = scheduler()
    assert sched.set_search_properties(None, None)
    assert not sched.set_search_properties("objective", "max")
    assert sched.metric == "objective"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(modes=["max"]), r"modes must give one of 'min', 'max' per metric \(2\)"),
        (dict(modes=["max", "up"]), "mode must be one of 'min', 'max', but got 'up'"),
        (dict(reduction_factor=1), r"reduction_factor must be in \(1"),
        (dict(grace_period=20), r"grace_period must be an integer in \[1, 10\], but got 20"),
        (dict(metrics=[]), "metrics must be a list of result keys"),
    ],
)
def test_bad_arguments_fail_in_one_line(kwargs, message):
    args = dict(metrics=["objective", "train_seconds"], modes=["max", "min"], max_t=10)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message) as err:
        MOHalvingScheduler(args.pop("metrics"), args.pop("modes"), **args)
    assert "\n" not in str(err.value)


# -- which scheduler a search gets -----------------------------------------------------------
def test_auto_and_asha_mean_this_scheduler_with_several_objectives_and_none_turns_it_off():
    single = load_space("default")
    multi = single.with_settings(objectives=("objective", "train_seconds"))
    assert single.scheduler_type == multi.scheduler_type == "asha"
    assert isinstance(scheduler_for(single, 5), ASHAScheduler)
    chosen = scheduler_for(multi, 5)
    assert isinstance(chosen, MOHalvingScheduler) and list(chosen.rungs) == [1, 3]
    assert "objective, train_seconds" in chosen.debug_string()
    asked = multi.with_settings(scheduler="asha")
    assert isinstance(scheduler_for(asked, 5), MOHalvingScheduler)
    off = multi.with_settings(scheduler="none")
    assert off.scheduler_type == "none" and type(scheduler_for(off, 5)) is FIFOScheduler
