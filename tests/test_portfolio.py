"""The portfolio from history (issue 62, items 1 and 2): greedy over tasks as a reference
written here computes it, per backbone, weighted by similarity but never silenced by it; the
packaged prior's tasks give a leave-one-dataset-out portfolio of the other datasets only; and
a space grows to hold the portfolio, which it runs first."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import pytest
from hand_store import SINGLE_SEARCH, write_search
from mlflow import MlflowClient
from stores import new_store

from astune.history.portfolio import (
    FLOORS,
    MATCH_RADIUS,
    PORTFOLIO_SIZE,
    SIZE_FACTOR,
    UNIFORM,
    PortfolioEntry,
    SourceTask,
    at_nearest_size,
    build_portfolio,
    chosen_floor,
    config_text,
    describe_portfolio,
    distance,
    task_weights,
)
from astune.history.portfolio_sources import portfolio_for, prior_tasks, store_tasks
from astune.history.portfolio_space import with_portfolio
from astune.history.reference import PRIOR_FILE
from astune.history.transfer import TaskProfile
from astune.space.space import load_space
from astune.store.reader import Store

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


def test_the_searching_pages_first_trials_are_the_portfolio_of_its_search(tmp_path) -> None:
    """docs/searching.md's console lines of a search's first trials (SST-5's shipped space, a
    1-layer MiniLM, 64 training rows) are the packaged prior's portfolio for that search."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "searching.md").read_text()
    block = page.split("portfolio: trials 1-4 run what won on past tasks")[1].split("```")[0]
    shown = [line.strip() for line in block.splitlines() if line.strip()[:2] in ("1.", "2.")]
    target = TaskProfile(None, "single_label", 64, "minilm", 1)
    space = load_space(None, dataset="sst5")
    entries = portfolio_for(
        target, store=Store(f"sqlite:///{tmp_path}/empty.db"), reference=PRIOR_FILE,
        losses=list(space.losses),
    )  # fmt: skip
    expected = [f"{i}. {config_text(e.config)} ({e.source})" for i, e in enumerate(entries, 1)]
    assert len(shown) == 2 and shown == expected[:2]


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


def test_a_backbone_with_no_past_task_is_told_which_have_one(tmp_path) -> None:
    """The default backbone (bert-base-cased) beside the packaged prior, which is of MiniLM:
    no portfolio, and the line that names the flag that has one (it said "none" alone)."""
    from astune.history.portfolio_sources import search_portfolio, shipped_space

    bert = TaskProfile(None, "single_label", 1000, "bert-base-cased", None, 48)
    found = search_portfolio(
        bert, shipped_space("sst5", "single_label"), store=Store(new_store(tmp_path)),
        reference=PRIOR_FILE,
    )  # fmt: skip
    assert found.entries == []
    assert found.scale == (
        "portfolio: past tasks were recorded on minilm: --backbone minilm starts from them"
    )
    assert search_portfolio(
        bert, shipped_space("sst5", "single_label"), store=Store(new_store(tmp_path)),
        reference=None,
    ).scale is None  # fmt: skip


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


def test_the_packaged_prior_gives_a_leave_one_out_portfolio_of_the_others() -> None:
    searches = json.loads(PRIOR_FILE.read_text())["searches"]
    entries = [e for e in searches if "recorded" not in e]  # the tables', not the full-size runs'
    assert len(entries) == 4 and len(prior_tasks(PRIOR_FILE)) == len(searches)
    for entry in entries:
        held = entry["dataset"]
        target = TaskProfile(None, entry["task"], entry["train_size"], "minilm", 2)
        tasks = at_nearest_size(target, prior_tasks(PRIOR_FILE, exclude=[held]))
        assert {t.dataset for t in tasks} == {e["dataset"] for e in entries} - {held}
        portfolio = build_portfolio(target, tasks)
        assert len(portfolio) == PORTFOLIO_SIZE
        assert all(e.source != f"prior {held}" for e in portfolio)
        losses = {e.config["loss"] for e in portfolio}
        family = ("multilabel_softmax", "multilabel_as_softmax")
        assert (losses <= set(family)) == (entry["task"] == "multi_label")
        keys = [tuple(sorted(e.config.items())) for e in portfolio]
        assert len(set(keys)) == len(keys)  # no config twice
        for a, b in itertools.pairwise(portfolio):
            assert a.mean_regret >= b.mean_regret


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


def test_a_stores_search_is_a_task_of_the_portfolio(tmp_path) -> None:
    """A search in the store (written by hand: real MLflow, no Ray) ranks its finished trials
    in its mode; a portfolio from the store alone starts with its best trial's config."""
    uri = new_store(tmp_path)
    client = MlflowClient(uri)
    write_search(client, SINGLE_SEARCH, None)
    (parent,) = Store(uri).searches()
    client.set_tag(parent.info.run_id, "astune.task", "single_label")
    tasks = store_tasks(Store(uri))
    assert [(t.name, t.dataset, t.profile.backbone) for t in tasks] == [
        (f"search {SINGLE_SEARCH!r}", "sst5", "minilm")
    ]
    # its family from its tag; no probe ran, so no difficulty
    assert (tasks[0].profile.task, tasks[0].profile.difficulty) == ("single_label", None)
    best = dict(zip(tasks[0].regrets, tasks[0].configs))[0.0]
    assert best["lr"] == 0.001  # the trial "best" (0.800): the first logged, lr 0.001
    target = TaskProfile(None, "single_label", 64, "minilm", 1)
    portfolio = portfolio_for(target, store=Store(uri), reference=None)
    assert portfolio[0].config == best and portfolio[0].source == f"search {SINGLE_SEARCH!r}"
    assert store_tasks(Store(uri), exclude=["sst5"]) == []


def test_a_search_in_the_store_at_your_size_decides_over_the_tables(tmp_path) -> None:
    """Issue 70 item 5: a past search of 64 rows decides alone for a search of 64 rows, the
    packaged tables (500-2,000 rows) and full-size runs (8,544 and 14,041) set aside, and is set
    aside itself, with the full-size runs, for one of 1,000 rows; the console line counts what
    was set aside."""
    from astune.history.portfolio_sources import search_portfolio

    uri = new_store(tmp_path)
    client = MlflowClient(uri)
    write_search(client, SINGLE_SEARCH, None)
    (parent,) = Store(uri).searches()
    client.set_tag(parent.info.run_id, "astune.task", "single_label")
    client.log_param(parent.info.run_id, "max_train_samples", 64)
    space = load_space("default")
    small = search_portfolio(
        TaskProfile(None, "single_label", 64, "minilm", 1), space, store=Store(uri),
        reference=PRIOR_FILE,
    )  # fmt: skip
    assert {e.source for e in small.entries} == {f"search {SINGLE_SEARCH!r}"}
    assert "learnt on 1 past task of 64 training rows" in small.scale
    assert "(6 tasks recorded at other sizes set aside)" in small.scale
    large = search_portfolio(
        TaskProfile(None, "single_label", 1000, "minilm", 2), space, store=Store(uri),
        reference=PRIOR_FILE,
    )  # fmt: skip
    assert large.entries and all(e.source.startswith("prior ") for e in large.entries)
    assert "(3 tasks recorded at other sizes set aside)" in large.scale


def test_a_new_tasks_space_holds_every_recorded_tables_winner() -> None:
    """Issue 62 item 2 on the packaged prior: for a task none of its tables hold, the portfolio
    of the four tables covers each table's best config (a weighted mean regret of 0), so the
    widened space holds every winner's learning rate, epochs and delta; the shipped default
    space alone ends below them (its lr stops at 1e-4)."""
    target = TaskProfile(None, "single_label", 1000, "minilm", 2)
    tasks = at_nearest_size(target, prior_tasks(PRIOR_FILE))  # the tables: the runs at full
    assert len(tasks) == 4  # size are more than SIZE_FACTOR times larger
    space = load_space("default")
    entries = build_portfolio(target, tasks, losses=[*space.losses, "softmax"])
    assert entries[-1].mean_regret == 0.0
    widened = with_portfolio(space.with_losses([*space.losses, "softmax"]), entries)
    for task in tasks:
        winner = task.configs[task.regrets.index(0.0)]
        assert any(task.regret_of(e.config) == 0.0 for e in entries), task.name
        assert not space.params["lr"].contains(winner["lr"])  # shipped: 1e-5 to 1e-4
        assert widened.params["lr"].contains(winner["lr"]), (task.name, winner["lr"])
        assert widened.params["epochs"].contains(winner["epochs"]), (task.name, winner["epochs"])


def test_the_portfolio_says_the_scale_it_was_learnt_at() -> None:
    """Issue 70 item 5: the packaged tables' rows, layers and tokens beside the search's, and
    which of them the search lies outside."""
    from astune.history.portfolio_sources import scale_note

    tasks = [t for t in prior_tasks(PRIOR_FILE) if not t.name.endswith(" at full size")]
    inside = scale_note(TaskProfile(None, "single_label", 1000, "minilm", 2, 48), tasks)
    assert inside == (
        "portfolio: learnt on 4 past tasks of 500-2,000 training rows, 2-6 layers, 32-64 "
        "tokens; this search: 1,000 training rows, 2 layers, 48 tokens"
    )
    full = scale_note(TaskProfile(None, "single_label", 8544, "minilm", None, 128), tasks)
    assert full.endswith(
        "this search: 8,544 training rows, all layers, 128 tokens. Outside them in training "
        "rows and tokens: its configs won at another scale; on larger runs their learning rates "
        "have run high (docs/searching.md): keep lower ones in your space"
    )
    # above the tables, but within the band a portfolio learns in: no claim on its lrs
    near = scale_note(TaskProfile(None, "single_label", 8000, "minilm", 6, 48), tasks)
    assert near.endswith("Outside them in training rows: its configs won at another scale")
    smaller = scale_note(TaskProfile(None, "single_label", 64, "minilm", 1, 48), tasks)
    assert smaller.endswith(
        "Outside them in training rows and layers: its configs won at another scale"
    )
    assert "(1 task recorded at other sizes set aside)" in scale_note(
        TaskProfile(None, "single_label", 1000, "minilm", 2, 48), tasks, set_aside=1
    )
    assert scale_note(MINILM, []) is None


def test_a_search_at_full_size_starts_from_the_full_size_runs(tmp_path) -> None:
    """Issue 70 item 5: the packaged prior holds the full-size study's runs, and a search of
    the whole of SST-5 (8,544 rows, all six layers) learns from them alone, the four tables set
    aside: its first config is the best-scored of one of those runs' configs, and the console
    line names the sizes it was learnt at. The warm start and the delta advice leave the runs
    out: they hold no probe's difficulty."""
    from astune.history.portfolio_sources import search_portfolio, shipped_space
    from astune.history.reference import load_reference

    full = [e for e in json.loads(PRIOR_FILE.read_text())["searches"] if "recorded" in e]
    assert sorted(e["train_size"] for e in full) == [8544, 14041]
    target = TaskProfile(None, "single_label", 8544, "minilm", None, 48)
    found = search_portfolio(
        target, shipped_space("sst5", "single_label"), store=Store(new_store(tmp_path)),
        reference=PRIOR_FILE,
    )  # fmt: skip
    assert found.entries and all(e.source.endswith(" at full size") for e in found.entries)
    keys = ("loss", "lr", "batch_size", "epochs", "delta")
    first = {k: found.entries[0].config[k] for k in keys}
    assert first in [{k: e["trials"][0]["config"][k] for k in keys} for e in full]
    assert found.scale == (
        "portfolio: learnt on 2 past tasks of 8,544-14,041 training rows, all layers, 48-64 "
        "tokens; this search: 8,544 training rows, all layers, 48 tokens (4 tasks recorded "
        "at other sizes set aside)"
    )
    warm = load_reference()
    assert {t.source.split(" (")[0] for t in warm} == {
        f"prior {e['dataset']}" for e in json.loads(PRIOR_FILE.read_text())["searches"]
        if "recorded" not in e
    }  # fmt: skip
    assert all(t.profile.difficulty is not None for t in warm)
