"""How far one dataset's best configs carry to another (issue 44, items 4 and 6): the most a
warm start could buy from this benchmark's history, read off the tables without a search.

For each held-out dataset and each other one (its source), the source's :data:`TOP` configs
by seed-mean final validation score are read on the held-out table: the same grid cell, its
epochs snapped to the held-out's grid. Each is scored there by its seed-mean validation score
at its last evaluation, its regret to the held-out's best config (percentage points), whether
that reaches ``T_common``, and the share of the held-out's configs that beat it. The base rate
is the share of all the held-out's configs whose last evaluation reaches ``T_common``: a
transferred config that reaches it no more often than a config drawn at random carries
nothing a first seed point could use.

    python -m benchmarks.search_efficiency transfer --datasets sst5,conll2003
"""

from __future__ import annotations

import math
from typing import Any

from benchmarks.search_efficiency import arms, settings
from benchmarks.search_efficiency.replay import Table

TOP = 3
"""Configs each source transfers: as many as ``recommend`` seeds (``TRANSFER_POINTS``)."""


def final_means(table: Table) -> dict[str, float]:
    """Each config's seed-mean validation score at its last evaluation (NaN where every seed
    diverged there)."""
    last: dict[str, int] = {}
    for (key, _seed), curve in table.curves.items():
        last[key] = max(last.get(key, 0), *(row.evaluation for row in curve))
    return {key: table.seed_mean.get((key, n), math.nan) for key, n in last.items()}


def ranked(means: dict[str, float]) -> list[str]:
    """Config keys best first; a diverged one (NaN) last."""
    return sorted(means, key=lambda k: -means[k] if not math.isnan(means[k]) else math.inf)


def on_grid(config: dict[str, Any], dataset: str) -> str:
    """The key of ``config`` on ``dataset``'s grid: its epochs the nearest the grid has."""
    # a table's values are numpy scalars, whose repr would put np.float64(...) in the key
    plain = {k: v.item() if hasattr(v, "item") else v for k, v in config.items()}
    epochs = min(settings.epochs_of(dataset), key=lambda e: (abs(e - plain["epochs"]), -e))
    return settings.config_key({**plain, "epochs": epochs})


def share_better(score: float, scored: list[float]) -> float:
    """The share of ``scored`` above ``score`` (all of them above a diverged one, NaN)."""
    if math.isnan(score):
        return 1.0
    return sum(v > score for v in scored) / len(scored)


def transfer(held: str, held_table: Table, sources: dict[str, Table]) -> dict[str, Any]:
    """The held-out dataset's reading of every source's :data:`TOP` configs (module
    docstring), with its targets and the base rate."""
    goal = arms.targets(held_table, held)
    means = final_means(held_table)
    scored = [v for v in means.values() if not math.isnan(v)]
    base_rate = sum(v >= goal["T_common"] for v in scored) / len(means)
    rows = []
    for source, table in sources.items():
        source_means = final_means(table)
        for rank, key in enumerate(ranked(source_means)[:TOP]):
            there = on_grid(table.configs[key], held)
            score = means.get(there, math.nan)
            rows.append(
                {
                    "source": source,
                    "source_rank": rank + 1,
                    "config": there,
                    "source_score": source_means[key],
                    "score": score,
                    "regret_points": 100 * (goal["best"] - score),
                    "reaches_T_common": bool(score >= goal["T_common"]),
                    "share_better": share_better(score, scored),
                }
            )
    return {
        "targets": goal,
        "configs": len(means),
        "base_rate": base_rate,
        "transferred": rows,
        "transferred_rate": sum(r["reaches_T_common"] for r in rows) / len(rows) if rows else None,
    }


def markdown(result: dict[str, dict[str, Any]]) -> str:
    """One row per held-out dataset and source: the scores its transferred configs reach."""
    lines = [
        f"| held out | T_common | reach it, all configs | source | its top {TOP} there "
        "(seed-mean; * reaches T_common) | share of configs better |",
        "|---|---|---|---|---|---|",
    ]
    for held, entry in result.items():
        by_source: dict[str, list[dict[str, Any]]] = {}
        for row in entry["transferred"]:
            by_source.setdefault(row["source"], []).append(row)
        for source, rows in by_source.items():
            scores = ", ".join(f"{r['score']:.3f}" + "*" * r["reaches_T_common"] for r in rows)
            better = ", ".join(f"{r['share_better']:.2f}" for r in rows)
            lines.append(
                f"| {held} | {entry['targets']['T_common']:.4f} | {entry['base_rate']:.2f} "
                f"| {source} | {scores} | {better} |"
            )
    return "\n".join(lines)
