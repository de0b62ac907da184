"""The replay command's work (issue 44 item 3, issue 62): every arm of a line-up replayed on one
dataset's table, summarised as the benchmark's JSON holds it: times to each target, final
regret, the anytime curves, what the warm and portfolio arms started from, the table's noise
and the verdicts."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.search_efficiency import arms, lineup, replay, settings, tables, verdicts
from benchmarks.search_efficiency.portfolio_arm import (
    PORTFOLIO_ARMS,
    PortfolioStart,
    portfolio_start,
)

CURVE_POINTS = 50
"""Budget fractions the anytime curves are read at."""


def time_stats(per_rep: list[tuple[float, bool]]) -> dict[str, Any]:
    """The ``seconds_to_target`` shape of item 7 from (seconds, reached) per repetition."""
    seconds = [s for s, _ in per_rep]
    return {
        **replay.median_interval(seconds),
        "per_repetition": seconds,
        "reached": [r for _, r in per_rep],
    }


def column_medians(rows: list[np.ndarray]) -> list[float | None]:
    """The median of each column over ``rows``, NaN left out; None where a column is all NaN
    (no report yet: JSON has no NaN)."""
    table = np.asarray(rows, dtype=float)
    return [None if np.isnan(col).all() else float(np.nanmedian(col)) for col in table.T]


def final_cells(runs: Sequence[replay.Replay], regret: list[float]) -> list[dict[str, Any]]:
    """The cells the repetitions end on, most often first: each one's config key, evaluation,
    final regret (points) and how many repetitions end there, so that a median regret can be
    traced to the configs behind it."""
    ends: dict[tuple[str, int], list[float]] = {}
    for run, points in zip(runs, regret, strict=True):
        if run.incumbent is not None:
            ends.setdefault(run.incumbent, []).append(points)
    return [
        {"config": key, "evaluation": evaluation, "regret": found[0], "repetitions": len(found)}
        for (key, evaluation), found in sorted(ends.items(), key=lambda kv: -len(kv[1]))
    ]


def replay_arm(
    table: replay.Table,
    plan: Sequence[tuple[arms.Arm, float]],
    *,
    goal: dict[str, float],
    budget: float,
) -> dict[str, Any]:
    """Replay one arm once per entry of ``plan`` (repetition i seeded i) and summarise it; each
    entry is the arm of that repetition and the seconds before its first trial (a warm arm's
    probe and recommend, a portfolio's build): one arm for all, but mode b's, whose store
    differs by repetition."""
    runs = [
        replay.Replay(table, arm, seed=i, budget=budget, overhead=overhead).run()
        for i, (arm, overhead) in enumerate(plan)
    ]
    repetitions, arm = len(plan), plan[0][0]
    overhead = float(np.median([o for _, o in plan]))
    at = np.linspace(0, budget, CURVE_POINTS + 1)[1:]
    counts = np.arange(1, int(np.median([len(r.trials) for r in runs])) + 1)
    curves = {
        (f, axis): column_medians([replay.anytime(r.curve, grid, f, axis=axis) for r in runs])
        for f in ("mean", "test")
        for axis, grid in (("seconds", at), ("trials", counts))
    }
    regret = [100 * (goal["best"] - r.curve[-1].mean) for r in runs]
    return {
        "seconds_to_target": time_stats(
            [replay.seconds_to_target(r.curve, goal["T_common"], budget=budget) for r in runs]
        ),
        "seconds_to_target_all": time_stats(
            [replay.seconds_to_target(r.curve, goal["T_all"], budget=budget) for r in runs]
        ),
        "seconds_to_target_se": time_stats(
            [replay.seconds_to_target(r.curve, goal["T_se"], budget=budget) for r in runs]
        ),
        "final_regret": replay.median_interval(regret),
        "final_cells": final_cells(runs, regret),
        "repetitions": repetitions,
        "budget_seconds": budget,
        "overhead_seconds": overhead,
        "seed_points": [dict(p) for p in arm.seed_points],
        "values": {k: list(v) for k, v in arm.values.items()},
        "trials": {
            "median": float(np.median([len(r.trials) for r in runs])),
            "stopped_share": float(np.mean([np.mean([t.stopped for t in r.trials]) for r in runs])),
        },
        "curve": {
            "trial_seconds": at.tolist(),
            "val_seed_mean": curves["mean", "seconds"],
            "test": curves["test", "seconds"],
        },
        "curve_by_trials": {
            "trials": counts.tolist(),
            "val_seed_mean": curves["mean", "trials"],
            "test": curves["test", "trials"],
        },
    }


def replay_dataset(
    dataset: str,
    names: list[str],
    *,
    repetitions: int,
    root: Path | None = None,
    budget_lengths: float = settings.BUDGET_TRIAL_LENGTHS,
    histories: Sequence[str] = (),
) -> dict[str, Any]:
    """Every arm of ``names`` on ``dataset``'s recorded table (under ``root``, default
    benchmarks/search_efficiency/tables), each with a budget of ``budget_lengths`` trial-lengths;
    ``histories``: the URIs of mode b's stores (:mod:`.history_store`), one a repetition."""
    folder = tables.table_dir(dataset, root)
    table = replay.Table(tables.complete_table(dataset, root))
    goal = arms.targets(table, dataset)
    length = table.trial_length()
    budget = budget_lengths * length
    data = settings.DATASETS[dataset]
    warm = None
    if any(name in arms.WARM_ARMS for name in names):
        from benchmarks.search_efficiency.warm import warm_start

        warm = warm_start(dataset, root=root)
    starts = portfolio_starts(dataset, names, root=root, histories=histories)
    plans = {}
    for name in names:
        if name in PORTFOLIO_ARMS:
            source = PORTFOLIO_ARMS[name][0]  # each distinct start's arm built once
            own = [
                (lineup.build_arm(name, dataset, portfolios={source: start}), start.seconds)
                for start in starts[source]
            ]
            plans[name] = [own[i % len(own)] for i in range(repetitions)]
            continue
        arm = lineup.build_arm(name, dataset, warm=warm)
        overhead = warm.seconds if warm is not None and name in arms.WARM_ARMS else 0.0
        plans[name] = [(arm, overhead)] * repetitions
    results = {
        name: replay_arm(table, plan, goal=goal, budget=budget) for name, plan in plans.items()
    }
    check = verdicts.target_check(results, budget=budget, trial_length=length)
    return {
        "targets": goal,
        "metric": table.metric,
        "workers": settings.WORKERS,
        "slices": {"train": data.train, "validation": data.eval, "test": data.eval},
        "noise": noise(table, goal, data.eval),
        "trial_length_seconds": length,
        "table": tables.table_digest(folder)["sha256"],
        "warm_start": None if warm is None else warm_summary(warm),
        "portfolio": {
            source: [portfolio_summary(start) for start in own] for source, own in starts.items()
        },
        "arms": results,
        "warm_minus_cold": {
            warm_name: verdicts.paired_difference(results[warm_name], results[cold_name])
            for warm_name, cold_name in verdicts.WARM_PAIRS
            if warm_name in results and cold_name in results
        },
        "target_check": check,
        "portfolio_check": verdicts.portfolio_check(results, counts=check["counts"]),
    }


NOISE_CELLS = 5
"""How many of the best cells the noise of a table is read on."""


def noise(table: Any, goal: dict[str, float], rows: int) -> dict[str, Any]:
    """How noisy the targets are, in points: a binomial standard error of the best score on
    ``rows`` validation rows, and the seed standard deviation of the best cells (the best
    :data:`NOISE_CELLS` by seed mean)."""
    best = goal["best"]
    cells = sorted(table.seed_mean, key=table.seed_mean.__getitem__, reverse=True)
    finite = [c for c in cells if math.isfinite(table.seed_se[c])][:NOISE_CELLS]
    sds = [100 * table.seed_se[c] * math.sqrt(len(table.seeds[c[0]])) for c in finite]
    return {
        "validation_rows": rows,
        "binomial_se_points": 100 * math.sqrt(best * (1 - best) / rows),
        "best_cells_seed_sd_points": [round(s, 2) for s in sds],
        "best_common_se_points": 100 * goal["best_common_se"],
    }


def portfolio_starts(
    dataset: str, names: list[str], *, root: Path | None, histories: Sequence[str]
) -> dict[str, list[PortfolioStart]]:
    """The portfolios each source of ``names``' portfolio arms starts ``dataset``'s searches
    from: the prior's one, and mode b's one a store of ``histories``."""
    sources = {PORTFOLIO_ARMS[n][0] for n in names if n in PORTFOLIO_ARMS}
    out = {}
    if "prior" in sources:
        out["prior"] = [portfolio_start(dataset, root=root)]
    if "store" in sources:
        if not histories:
            raise ValueError("the store's portfolio arm needs its history stores (history_store)")
        out["store"] = [portfolio_start(dataset, root=root, store_uri=uri) for uri in histories]
    return out


def portfolio_summary(start: PortfolioStart) -> dict[str, Any]:
    """What the portfolio arm ran first: its configs in order, each with its source."""
    return {
        "learnt_from": list(start.reference_datasets),
        "source": start.source,
        "seconds": start.seconds,
        "configs": [
            {"config": e.config, "source": e.source, "mean_regret": e.mean_regret}
            for e in start.entries
        ],
    }


def warm_summary(warm: Any) -> dict[str, Any]:
    """What the warm arms started from: the datasets learnt from, the probe's seconds, the
    recommendation's delta and r and what it transferred."""
    rec = warm.recommendation
    if rec is None:
        return {"learnt_from": [], "seconds": warm.seconds, "recommendation": None}
    transfer = rec.transfer
    return {
        "learnt_from": list(warm.reference_datasets),
        "seconds": warm.seconds,
        "difficulty": rec.difficulty.value,
        "delta": [rec.low, rec.delta, rec.high],
        "warmup_ratio": rec.warmup_ratio,
        "transfer_weight": None if transfer is None else transfer.weight,
        "transferred": {} if transfer is None else dict(transfer.centre),
    }
