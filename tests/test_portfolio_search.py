"""A search starts from what is known (issue 62, item 1): by default the portfolio of configs
that won on past tasks of its backbone runs first, in a space widened to hold it, written beside
the search so that a resume reads it again; ``--no-portfolio`` searches the space as given."""

from __future__ import annotations

import dataclasses

import pytest
from mlflow import MlflowClient
from tiny import tiny_settings

from astune.history.portfolio import PORTFOLIO_SIZE
from astune.history.portfolio_sources import portfolio_for
from astune.history.reference import PRIOR_FILE
from astune.history.transfer import TaskProfile
from astune.space.space import load_space
from astune.store.reader import Store
from astune.tuning.runner import execute_search, prepare_search

KEYS = ("loss", "lr", "batch_size", "delta", "warmup_ratio")
"""The keys a tiny search's trials take from the portfolio (--epochs fixes the epochs)."""


def expected_portfolio(settings, space) -> list[dict]:
    target = TaskProfile(None, "single_label", settings.max_train_samples, "minilm", 1)
    entries = portfolio_for(
        target, store=Store(settings.tracking_uri), reference=PRIOR_FILE, losses=space.losses
    )
    out: list[dict] = []
    for entry in entries:  # those --epochs makes alike run once
        config = {k: entry.config[k] for k in KEYS}
        out += [config] if config not in out else []
    return out


def test_the_portfolio_runs_first_in_a_space_that_holds_it(tmp_path, data_dir):
    settings = tiny_settings(root=tmp_path, data_dir=data_dir, portfolio=True, epochs=1.0)
    prepared = prepare_search(settings)  # --epochs 1, a float as the flag parses it
    assert "portfolio: keeps what you fixed: epochs 1" in prepared.notes
    shipped = load_space(None, dataset="sst5")
    portfolio = expected_portfolio(settings, shipped)
    assert 2 <= len(portfolio) <= PORTFOLIO_SIZE
    first = [{k: p[k] for k in KEYS} for p in prepared.space.seed_points[: len(portfolio)]]
    assert first == portfolio
    assert prepared.space.params["lr"].contains(max(p["lr"] for p in portfolio))
    assert prepared.settings.space.endswith(".portfolio.yaml")
    written = load_space(prepared.settings.space)  # what a resume reads
    assert written.points == prepared.space.points
    assert written.params["epochs"].value == 1  # --epochs stays fixed; the portfolio's left out
    assert all("epochs" not in p for p in written.seed_points)
    n = len(portfolio)
    assert prepared.notes[0].startswith(f"portfolio: trials 1-{n} run what won")
    listed = prepared.notes[1 : n + 1]
    assert [line.split(". ", 1)[0].strip() for line in listed] == [str(i + 1) for i in range(n)]
    assert all("(prior " in line for line in listed)
    # issue 70 item 2: FIFO behind the portfolio (rules.json); a scheduler the user names stays
    assert prepared.space.scheduler_type == written.scheduler_type == "none"
    assert "portfolio: no early stopping (FIFO) behind it" in "\n".join(prepared.notes)
    asked = dataclasses.replace(settings, scheduler="asha", name="asked")
    assert prepare_search(asked).space.scheduler_type == "asha"


def test_no_portfolio_searches_the_space_as_given(tmp_path, data_dir):
    settings = tiny_settings(root=tmp_path, data_dir=data_dir, portfolio=False, epochs=1)
    prepared = prepare_search(settings)
    shipped = load_space(None, dataset="sst5").with_fixed(epochs=1, seed=0)
    assert prepared.space.seed_points == shipped.seed_points
    assert not any(n.startswith("portfolio") for n in prepared.notes)
    assert not list(tmp_path.rglob("*.portfolio.yaml"))


def test_a_backbone_nothing_was_recorded_on_gets_no_portfolio(tmp_path, data_dir):
    settings = tiny_settings(root=tmp_path, data_dir=data_dir, portfolio=True, epochs=1)
    settings = dataclasses.replace(settings, backbone="distilbert-base-uncased")
    target = TaskProfile(None, "single_label", 64, settings.backbone, 1)
    store = Store(settings.tracking_uri)
    assert portfolio_for(target, store=store, reference=PRIOR_FILE) == []


@pytest.mark.ray
def test_a_search_runs_the_portfolio_and_its_resume_reads_the_same_space(tmp_path, data_dir):
    settings = tiny_settings(
        root=tmp_path,
        data_dir=data_dir,
        portfolio=True,
        epochs=1,
        num_samples=2,
        max_concurrent=1,
        scheduler="none",
        name="portfolio",
    )
    prepared = prepare_search(settings)
    portfolio = expected_portfolio(settings, load_space(None, dataset="sst5"))
    result = execute_search(prepared)
    client = MlflowClient(settings.tracking_uri)
    trials = client.search_runs(
        [result.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{result.parent_run_id}'"
    )
    ran = sorted(trials, key=lambda r: r.info.start_time)
    assert len(ran) == 2
    for trial, config in zip(ran, portfolio, strict=False):
        params = trial.data.params
        assert params["loss"] == config["loss"] and float(params["lr"]) == config["lr"]
        assert int(params["batch_size"]) == config["batch_size"]
        assert float(params["delta"]) == config["delta"]
    parent = client.get_run(result.parent_run_id).data.params
    assert parent["space"] == prepared.settings.space and parent["portfolio"] == "True"
    again = prepare_search(dataclasses.replace(settings, resume=True))
    assert again.settings.space == prepared.settings.space  # read again, not chosen anew
    assert again.space.points == prepared.space.points
