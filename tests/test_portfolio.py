"""The portfolio from history (issue 62, items 1 and 2): greedy over tasks as a reference
written here computes it, per backbone, weighted by similarity but never silenced by it; and a
space grows to hold the portfolio, which it runs first. Where its tasks come from:
test_portfolio_sources.py."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from astune.history.portfolio import (
    FLOORS,
    MATCH_RADIUS,
    SIZE_FACTOR,
    UNIFORM,
    PortfolioEntry,
    SourceTask,
    at_nearest_size,
    build_portfolio,
    chosen_floor,
    describe_portfolio,
    distance,
    task_weights,
)
from astune.history.portfolio_sources import prior_tasks
from astune.history.portfolio_space import with_portfolio
from astune.history.reference import PRIOR_FILE
from astune.history.transfer import TaskProfile
from astune.space.space import load_space

MINILM = TaskProfile(None, "single_label", 1000, "minilm", 2)
CONFIGS = [{"loss": "as_softmax", "lr": lr, "batch_size": 16} for lr in (1e-4, 3e-4, 1e-3)]
CONFIGS += [{"loss": "softmax", "lr": lr, "batch_size": 32} for lr in (1e-4, 1e-3)]


def reference_greedy(scores: list[list[float]], weights: list[float], size: int) -> list[int]:
    """The greedy portfolio by its definition: ``scores[task][config]``, higher better; each
    step adds the config that most lowers the weighted mean over tasks of the best normalised
    regret so far (ties: the config with the lower weighted mean regret alone, then the lowest
    index)."""
    regret = [[(max(row) - s) / (max(row) - min(row)) for s in row] for row in scores]
    chosen: list[int] = []
    for _ in range(size):
        options = [c for c in range(len(scores[0])) if c not in chosen]

        def mean_after(c: int) -> float:
            best = [min(row[i] for i in (*chosen, c)) for row in regret]
            return sum(w * b for w, b in zip(weights, best, strict=True)) / sum(weights)

        def alone(c: int) -> float:
            return sum(w * row[c] for w, row in zip(weights, regret, strict=True)) / sum(weights)

        chosen.append(min(options, key=lambda c: (mean_after(c), alone(c), c)))
    return chosen


def tasks_of(scores: list[list[float]], profiles: list[TaskProfile]) -> list[SourceTask]:
    out = []
    for i, (row, profile) in enumerate(zip(scores, profiles, strict=True)):
        task = SourceTask.from_scores(f"t{i}", f"d{i}", profile, list(zip(CONFIGS, row)))
        assert task is not None
        out.append(task)
    return out


PROFILES = [
    MINILM,
    TaskProfile(None, "single_label", 3_000, "minilm", 2),  # another size, within SIZE_FACTOR
    TaskProfile(None, "token", 1000, "minilm", 2),  # another family
    TaskProfile(None, "single_label", 1000, "minilm", 6),  # other layers
]


@pytest.mark.parametrize(("seed", "floor"), list(itertools.product(range(4), FLOORS)))
def test_the_portfolio_is_the_greedy_one_of_its_definition(seed: int, floor: float) -> None:
    import random

    rng = random.Random(seed)
    scores = [[rng.random() for _ in CONFIGS] for _ in PROFILES]
    tasks = tasks_of(scores, PROFILES)
    weights = task_weights(MINILM, tasks, floor)
    assert min(weights) >= floor and max(weights) == 1.0
    got = build_portfolio(MINILM, tasks, size=4, floor=floor)
    expected = reference_greedy(scores, weights, 4)
    assert [e.config for e in got] == [CONFIGS[i] for i in expected]
    means = [e.mean_regret for e in got]
    assert means == sorted(means, reverse=True) and means[-1] >= 0.0
    regret = [[(max(row) - s) / (max(row) - min(row)) for s in row] for row in scores]
    for entry, c in zip(got, expected, strict=True):
        alone = sum(w * row[c] for w, row in zip(weights, regret, strict=True)) / sum(weights)
        assert entry.regret_alone == pytest.approx(alone) and entry.regret_alone >= means[-1]


def test_the_description_says_each_configs_regret_alone_and_the_portfolios() -> None:
    """Config 1 is the best on one task and the worst on the other, config 0 the reverse: each
    serves the two tasks half as well alone (0.5), the two together cover both (0)."""
    others = [0.5] * (len(CONFIGS) - 2)
    tasks = tasks_of([[1.0, 0.0, *others], [0.0, 1.0, *others]], [MINILM, MINILM])
    got = build_portfolio(MINILM, tasks, size=2, floor=UNIFORM)
    assert [e.config for e in got] == CONFIGS[:2]
    lines = describe_portfolio(got, "minilm")
    assert lines[2].endswith("mean regret 0.50 alone, 0.50 for the first 1 together")
    assert lines[4].endswith("mean regret 0.50 alone, 0.00 for the first 2 together")


def test_similarity_weights_a_task_but_never_silences_it() -> None:
    """Two configs tie on the near task; only a task of another family, size and depth tells
    them apart, and the portfolio follows it: its weight is at least the floor, not ~0."""
    near = [0.5, 0.5, 0.1, 0.1, 0.1]
    far = [0.2, 0.9, 0.1, 0.1, 0.1]
    far_profile = TaskProfile(None, "token", 3_000, "minilm", 6)
    tasks = tasks_of([near, far], [MINILM, far_profile])
    weights = task_weights(MINILM, tasks, min(FLOORS))
    assert weights[0] == 1.0 and weights[1] == min(FLOORS)
    assert build_portfolio(MINILM, tasks, size=1, floor=min(FLOORS))[0].config == CONFIGS[1]


def reference_floor(scores: list[list[float]], profiles: list[TaskProfile], size: int) -> float:
    """The floor by its definition: leave each task out, build the others' portfolio for it
    under each floor, charge the mean over the first ``size`` steps of its best regret; the
    cheapest floor, the uniform one on ties."""
    regret = [[(max(row) - s) / (max(row) - min(row)) for s in row] for row in scores]
    cost = dict.fromkeys(FLOORS, 0.0)
    for held in range(len(scores)):
        rest = [i for i in range(len(scores)) if i != held]
        for floor in FLOORS:
            weights = task_weights(
                profiles[held],
                tasks_of([scores[i] for i in rest], [profiles[i] for i in rest]),
                floor,
            )
            picks = reference_greedy([scores[i] for i in rest], weights, size)
            cost[floor] += sum(min(regret[held][c] for c in picks[: k + 1]) for k in range(size))
    low = min(cost.values())
    return UNIFORM if cost[UNIFORM] == low else min(f for f in FLOORS if cost[f] == low)


@pytest.mark.parametrize("seed", range(8))
def test_the_floor_is_the_one_that_serves_left_out_tasks_best(seed: int) -> None:
    import random

    rng = random.Random(seed)
    scores = [[rng.random() for _ in CONFIGS] for _ in PROFILES]
    tasks = tasks_of(scores, PROFILES)
    assert chosen_floor(tasks, size=2, losses=None) == reference_floor(scores, PROFILES, 2)


def test_too_few_tasks_to_leave_one_out_weigh_alike() -> None:
    near = [0.5, 0.5, 0.1, 0.1, 0.1]
    far = [0.2, 0.9, 0.1, 0.1, 0.1]
    tasks = tasks_of([near, far], [MINILM, TaskProfile(None, "token", 3_000, "minilm", 6)])
    assert chosen_floor(tasks, losses=None) == UNIFORM == 1.0
    portfolio = build_portfolio(MINILM, tasks, size=1)  # alike: the far task's pick wins
    assert portfolio[0].config == CONFIGS[1]


def test_only_tasks_recorded_at_the_nearest_size_count() -> None:
    """A task ten times larger than the target is set aside while one of the target's size
    exists, and decides alone for a target of its own size; a task of unknown rows always
    counts, and a target of unknown rows learns from every task."""
    small = [0.1, 0.9, 0.1, 0.1, 0.1]
    large = [0.9, 0.1, 0.1, 0.1, 0.1]
    unknown = [0.1, 0.1, 0.1, 0.9, 0.1]
    big = TaskProfile(None, "single_label", 10_000, "minilm", 2)
    nameless = TaskProfile(None, "single_label", None, "minilm", 2)
    tasks = tasks_of([small, large, unknown], [MINILM, big, nameless])
    assert SIZE_FACTOR == 4.0
    assert [t.name for t in at_nearest_size(MINILM, tasks)] == ["t0", "t2"]
    assert [t.name for t in at_nearest_size(big, tasks)] == ["t1", "t2"]
    assert at_nearest_size(dataclasses.replace(MINILM, train_size=None), tasks) == tasks
    between = dataclasses.replace(MINILM, train_size=2_500)  # within 4x of 1,000 and 10,000
    assert [t.name for t in at_nearest_size(between, tasks)] == ["t0", "t2"]
    first = build_portfolio(big, tasks[:2], size=1, floor=UNIFORM)[0]
    assert first.config == CONFIGS[0] and first.source == "t1"
    assert build_portfolio(MINILM, tasks[:2], size=1, floor=UNIFORM)[0].config == CONFIGS[1]


def test_tasks_of_another_backbone_are_left_out() -> None:
    bert = TaskProfile(None, "single_label", 1000, "bert-base-uncased", None)
    tasks = tasks_of([[0.1, 0.2, 0.9, 0.1, 0.1]], [bert])
    assert build_portfolio(MINILM, tasks) == []
    assert build_portfolio(bert, tasks, size=1)[0].config == CONFIGS[2]


def test_a_config_a_task_did_not_run_takes_its_nearest_config_or_the_worst() -> None:
    task = SourceTask.from_scores("t", "d", MINILM, list(zip(CONFIGS, [0.1, 0.5, 0.9, 0.2, 0.3])))
    assert task is not None
    assert task.regret_of(CONFIGS[2]) == 0.0 and task.regret_of(CONFIGS[0]) == 1.0
    near = {**CONFIGS[2], "lr": 1.2e-3}  # a twelfth of a decade away
    assert distance(near, CONFIGS[2]) < MATCH_RADIUS
    assert task.regret_of(near) == 0.0
    far = {**CONFIGS[2], "lr": 1e-2}  # a decade away
    assert task.regret_of(far) == 1.0
    other_batch = {**CONFIGS[2], "batch_size": 64}  # a switch differs: never matched
    assert task.regret_of(other_batch) == 1.0
    multi = {**CONFIGS[2], "loss": "multilabel_as_softmax"}  # named for the task's family
    assert task.regret_of(multi) == 0.0


def test_a_task_is_made_from_its_scores_in_its_mode() -> None:
    pairs = list(zip(CONFIGS, [3.0, 1.0, 2.0, float("nan"), 1.0]))
    low = SourceTask.from_scores("t", "d", MINILM, pairs, mode="min")
    assert low is not None and low.regrets == (1.0, 0.0, 0.5, 0.0)  # the NaN left out
    assert SourceTask.from_scores("t", "d", MINILM, [(CONFIGS[0], 1.0), (CONFIGS[1], 1.0)]) is None
    with pytest.raises(ValueError, match="mode 'best': use one of min, max"):
        SourceTask.from_scores("t", "d", MINILM, pairs, mode="best")


def test_a_portfolio_keeps_to_the_losses_asked_for() -> None:
    tasks = prior_tasks(PRIOR_FILE, exclude=["sst5"])
    only_as = build_portfolio(MINILM, tasks, losses=["as_softmax"])
    assert only_as and {e.config["loss"] for e in only_as} == {"as_softmax"}


def test_the_space_grows_to_hold_the_portfolio_and_runs_it_first() -> None:
    """SST-5's shipped space (lr 1e-5..5e-5, 7 epochs fixed) holds the portfolio's configs
    exactly once widened, runs them first in order, and keeps its own points (now naming the
    epochs they were fixed at)."""
    space = load_space(None, dataset="sst5")
    entries = build_portfolio(
        MINILM, prior_tasks(PRIOR_FILE, exclude=["sst5"]), losses=space.losses
    )
    widened = with_portfolio(space, entries)
    keys = ("loss", "lr", "epochs", "batch_size", "delta", "warmup_ratio")
    first = widened.seed_points[: len(entries)]
    assert [{k: p[k] for k in keys} for p in first] == [
        {k: e.config[k] for k in keys} for e in entries
    ]
    for entry in entries:
        for key in ("lr", "epochs"):
            assert widened.params[key].contains(entry.config[key]), (key, entry.config[key])
        assert widened.loss_params["as_softmax"]["delta"].contains(entry.config["delta"])
    assert widened.params["lr"].low == space.params["lr"].low and widened.params["lr"].log
    shipped = widened.seed_points[len(entries) :]
    assert [{k: v for k, v in p.items() if k != "epochs"} for p in shipped] == space.seed_points
    assert {p["epochs"] for p in shipped} == {space.params["epochs"].value}


def test_a_value_off_the_grid_or_the_choices_is_held_as_it_can_be() -> None:
    space = load_space(None, dataset="sst5")  # delta 0.1..0.5 step 0.05; batch one of 16, 32
    odd = {"loss": "as_softmax", "lr": 2e-5, "batch_size": 64, "delta": 0.525, "warmup_ratio": 0.0}
    widened = with_portfolio(space, [PortfolioEntry(odd, "t", 0.0, 0.0)])
    delta = widened.loss_params["as_softmax"]["delta"]
    assert delta.high == 0.525 and delta.step == 0.025 and delta.contains(0.525)
    assert widened.params["batch_size"].choices == space.params["batch_size"].choices
    assert widened.seed_points[0]["batch_size"] == 32 and widened.seed_points[0]["delta"] == 0.525
