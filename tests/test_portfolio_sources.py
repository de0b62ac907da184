"""Where a portfolio's tasks come from and what a search is told of them (issues 62 and 70):
the packaged prior (the tables, leave one dataset out, and the full-size runs), a store's
searches, the size they were recorded at, and the backbones they were recorded on."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from hand_store import SINGLE_SEARCH, write_search
from mlflow import MlflowClient
from stores import new_store

from astune.history.portfolio import (
    PORTFOLIO_SIZE,
    at_nearest_size,
    build_portfolio,
    config_text,
)
from astune.history.portfolio_sources import portfolio_for, prior_tasks, store_tasks
from astune.history.portfolio_space import with_portfolio
from astune.history.reference import PRIOR_FILE
from astune.history.transfer import TaskProfile
from astune.space.space import load_space
from astune.store.reader import Store


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
    assert scale_note(TaskProfile(None, "single_label", 1000, "minilm", 2), []) is None


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
