"""Issue 70 item 5's scale study: the tables' best learning rate per cell against its optimizer
steps, the pooled within-group slope (against a reference least-squares fit), and the
full-size runs' best arm per seed."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from synthetic_tables import synthetic_rows

from benchmarks.search_efficiency import full_size, lr_scale, settings


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


def test_a_full_size_run_is_marked_best_of_its_dataset_and_seed():
    run = {"dataset": "sst5", "seed": 0, "config": {"lr": 2e-5, "epochs": 7, "batch_size": 16}}
    runs = [
        {**run, "arm": "paper", "test": 0.50},
        {**run, "arm": "history", "test": 0.47, "config": {**run["config"], "lr": 3e-4}},
        {**run, "seed": 1, "arm": "history", "test": 0.40},
    ]  # fmt: skip
    points = lr_scale.full_size_points(runs, {"sst5": 8544})
    assert [(p["arm"], p["seed"], p["best"]) for p in points] == [
        ("paper", 0, True), ("history", 0, False), ("history", 1, True),
    ]  # fmt: skip
    assert points[0]["steps"] == 8544 * 7 / 16


def test_the_full_size_study_runs_history_and_the_paper_first():
    """Every seed's history and paper runs start before any scaled one, and a dataset named
    that the study has not is refused in one line."""
    order = full_size.run_order(["sst5"])
    assert len(order) == len(full_size.ARMS) * len(full_size.SEEDS)
    first = order[: 2 * len(full_size.SEEDS)]
    assert {arm for _, arm, _ in first} == {"history", "paper"}
    with pytest.raises(SystemExit, match="--datasets: mnist not one of sst5, conll2003"):
        full_size.main(["--datasets", "mnist"])
