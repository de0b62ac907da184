"""Issue 70 item 5: can a rule measured on the tables carry a portfolio's learning rate to a
larger run? Per cell of a table (dataset, loss, batch size, epochs), the grid's learning rate
(``settings.LRS``) whose best config there scores highest (seed-mean final validation), against
the cell's optimizer steps (training rows x epochs / batch size). The rule would be the slope of
log10(best lr) on log10(steps) within each (dataset, loss, batch size), pooled, given with a 95%
bootstrap interval over those groups. Beside it, the full-size study's runs
(``results/full_size_runs.jsonl``, :mod:`.full_size`): each seed's arms at their steps, the best
test score among them marked.

    python -m benchmarks.search_efficiency.lr_scale    # seconds; results/lr_scale.{json,png}
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import provenance
from benchmarks.common.harness import commit, machine_line
from benchmarks.search_efficiency import RESULTS, full_size, full_size_tasks, settings, tables

OUTPUT = RESULTS / "lr_scale.json"
PLOT = RESULTS / "lr_scale.png"
DRAWS = 2000
"""Bootstrap resamples of the (dataset, loss, batch size) groups."""


@dataclass(frozen=True)
class Cell:
    """One cell of a table: its best learning rate and the optimizer steps a run of it takes."""

    dataset: str
    loss: str
    batch_size: int
    epochs: int
    steps: float  # training rows x epochs / batch size
    best_lr: float


def best_lrs(table: Any, dataset: str, train_rows: int) -> list[Cell]:
    """Each (loss, batch size, epochs) cell of ``table`` (a recorded table's rows): the lr
    whose best config (over the other keys) has the highest seed-mean final validation."""
    final = table[table["last"]]
    means = final.groupby(["key", "loss", "batch_size", "epochs", "lr"])["val"].mean()
    out = []
    for (loss, batch, epochs), cell in means.reset_index().groupby(
        ["loss", "batch_size", "epochs"]
    ):
        per_lr = cell.groupby("lr")["val"].max()
        steps = train_rows * int(epochs) / int(batch)
        out.append(Cell(dataset, str(loss), int(batch), int(epochs), steps, float(per_lr.idxmax())))
    return out


def within_slope(cells: Sequence[Cell], groups: Sequence[tuple] | None = None) -> float:
    """The pooled within-group least-squares slope of log10(best lr) on log10(steps), a group
    being a (dataset, loss, batch size); ``groups``: the groups to pool, repeats counting again
    (None: each once). NaN when no group varies in steps."""
    by_group: dict[tuple, list[Cell]] = {}
    for cell in cells:
        by_group.setdefault((cell.dataset, cell.loss, cell.batch_size), []).append(cell)
    sxy = sxx = 0.0
    for group in groups if groups is not None else list(by_group):
        x = np.log10([c.steps for c in by_group[group]])
        y = np.log10([c.best_lr for c in by_group[group]])
        sxy += float(((x - x.mean()) * (y - y.mean())).sum())
        sxx += float(((x - x.mean()) ** 2).sum())
    return sxy / sxx if sxx > 0 else math.nan


def bootstrap_interval(cells: Sequence[Cell], *, draws: int = DRAWS, seed: int = 0) -> list[float]:
    """The 95% percentile interval of :func:`within_slope` over groups drawn with replacement."""
    groups = sorted({(c.dataset, c.loss, c.batch_size) for c in cells})
    rng = np.random.default_rng(seed)
    slopes = [
        within_slope(cells, [groups[i] for i in rng.integers(0, len(groups), len(groups))])
        for _ in range(draws)
    ]
    low, high = np.nanpercentile(slopes, [2.5, 97.5])
    return [float(low), float(high)]


def full_size_points(runs: Sequence[dict[str, Any]], rows: dict[str, int]) -> list[dict]:
    """Each full-size run's lr, steps and test score, ``best`` where it scored highest of the
    two or more arms its dataset and seed ran."""
    top: dict[tuple, float] = {}
    count: dict[tuple, int] = {}
    for run in runs:
        key = (run["dataset"], run["seed"])
        top[key] = max(top.get(key, -math.inf), run["test"])
        count[key] = count.get(key, 0) + 1
    out = []
    for run in runs:
        config, key = run["config"], (run["dataset"], run["seed"])
        steps = rows[run["dataset"]] * config["epochs"] / config["batch_size"]
        out.append({
            "dataset": run["dataset"], "arm": run["arm"], "seed": run["seed"],
            "lr": config["lr"], "steps": steps, "test": run["test"],
            "best": count[key] > 1 and run["test"] == top[key],
        })  # fmt: skip
    return out


def plot(cells: Sequence[Cell], full: Sequence[dict], slope: float, path: Path) -> Path:
    """Best lr against steps: the tables' cells (one colour a dataset, jittered), the full-size
    runs (crosses; filled where best of their seed)."""
    from benchmarks.search_efficiency.plots import pyplot, save

    fig, ax = pyplot().subplots(figsize=(7, 4.5))
    rng = np.random.default_rng(0)
    names = list(dict.fromkeys([c.dataset for c in cells] + [p["dataset"] for p in full]))
    for i, name in enumerate(names):
        mine = [c for c in cells if c.dataset == name]
        jitter = 10 ** rng.uniform(-0.03, 0.03, len(mine))
        lrs = [c.best_lr * j for c, j in zip(mine, jitter, strict=True)]
        label = f"{name}: table cells' best lr"
        ax.scatter([c.steps for c in mine], lrs, s=14, alpha=0.6, color=f"C{i}", label=label)
        runs = [p for p in full if p["dataset"] == name]
        for best in (True, False):
            shown = [p for p in runs if p["best"] == best]
            if shown:
                label = f"{name} full size: {'best' if best else 'other'} arm"
                face = f"C{i}" if best else "none"
                ax.scatter([p["steps"] for p in shown], [p["lr"] for p in shown], marker="X",
                           s=70, color=face, edgecolors=f"C{i}", label=label)  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="optimizer steps (rows x epochs / batch)",
           ylabel="learning rate",
           title=f"Best lr against steps (tables' within slope {slope:+.2f})")  # fmt: skip
    ax.legend(fontsize=7, loc="lower left")
    return save(fig, path, dpi=120)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tables", type=Path, default=None, help="the tables' root (default: ours)")
    args = p.parse_args(argv)
    code = commit()
    cells = [
        cell
        for name, data in settings.DATASETS.items()
        for cell in best_lrs(tables.complete_table(name, args.tables), name, data.train)
    ]
    runs = full_size.finished()
    rows = {name: full_size_tasks.train_rows(name) for name in {r["dataset"] for r in runs}}
    slope = within_slope(cells)
    result = {
        "slope": slope, "interval": bootstrap_interval(cells), "cells": [asdict(c) for c in cells],
        "full_size": full_size_points(runs, rows), "commit": code,
        "machine": machine_line("cpu", threads=settings.THREADS),
    }  # fmt: skip
    OUTPUT.write_text(json.dumps(result, indent=1) + "\n")
    plot(cells, result["full_size"], slope, PLOT)
    inputs = {
        name: tables.table_digest(tables.table_dir(name, args.tables))["sha256"]
        for name in settings.DATASETS
    }
    for path in (OUTPUT, PLOT):
        provenance.record(path, inputs=inputs, machine=result["machine"], commit=code)
    print(f"within slope {slope:+.3f}, 95% {result['interval']}; wrote {OUTPUT} and {PLOT}")
    return result


if __name__ == "__main__":
    main()
