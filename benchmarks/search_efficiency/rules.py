r"""Issue 70 item 2: the scheduler and the portfolio size a search from history runs with, chosen
by leave-one-source-out on the sources alone (as ``chosen_floor`` chooses its floor), then the
final replay of every held-out dataset under the rule its own sources chose, beside by-hand.

A rule is a scheduler (ASHA, asynchronous Hyperband or FIFO, with its grace period and
reduction factor) and how many portfolio configs run first. Its cost on a set of source tables:
each source is left out in turn, the portfolio is learnt from the others (their tables as the
packaged prior holds them), the portfolio arm under the rule is replayed on the left-out table,
and the cost is the mean over repetitions of the anytime normalised regret area (the incumbent's
seed-mean regret over the budget, 0 at the table's best cell and 1 at its worst, before the
first report 1). The rule of least mean cost wins, ties to the earlier in :data:`RULES` (today's
default first). The held-out dataset never enters its own choice: its rule is chosen on the
other three, and every rule, candidate and budget is fixed here before the final replay.

``--criterion no-worse`` (the second round, added after the first round's held-out replays
were seen: CLINC150 ended worse than by-hand under the rule its sources chose) makes the
issue's target a constraint of the choice: among the rules whose median final regret is no
worse than by-hand's on every source, the least mean cost wins; where none is, the rule of
least summed excess over by-hand. The rules, repetitions and budgets are the first round's.

``--candidates handover`` (the third round, also added after the first rounds were seen) asks
the same of the portfolio's hand-over to TPE (:data:`HANDOVER_RULES`): FIFO behind the
portfolio, TPE modelling once the seed points are in or after Optuna's default 10 trials.
``--candidates neighbours`` (the fourth) asks it of 4 or 8 trials one step from the incumbent
after the seed points (:data:`NEIGHBOUR_RULES`).

    python -m benchmarks.search_efficiency rules --datasets sst5,clinc_oos,conll2003,go_emotions
    python -m benchmarks.search_efficiency rules --criterion no-worse \
        --output benchmarks/search_efficiency/results/rules_no_worse.json
    python -m benchmarks.search_efficiency rules --criterion no-worse --candidates handover \
        --output benchmarks/search_efficiency/results/rules_handover.json
    python -m benchmarks.search_efficiency rules --criterion no-worse --candidates neighbours \
        --output benchmarks/search_efficiency/results/rules_neighbours.json
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.search_efficiency import arms, replay, settings, tables
from benchmarks.search_efficiency.portfolio_arm import target_profile
from benchmarks.search_efficiency.replay_runs import CURVE_POINTS, replay_arm
from benchmarks.search_efficiency.warm import base_space, grid_arm


@dataclasses.dataclass(frozen=True)
class Rule:
    """A scheduler of :data:`arms.SCHEDULES` with its grace period and reduction factor, the
    portfolio's size, and its hand-over to TPE: ``handover`` lets TPE model from the trials of
    the seed points on (its ``n_startup_trials`` their number), else after Optuna's default 10
    trials, random ones filling the gap."""

    schedule: str
    grace_period: int
    reduction_factor: int
    size: int
    handover: bool = False
    neighbours: int = 0
    """Trials after the seed points that run a neighbour of the best so far, before TPE."""


RULES = {
    "asha-g1-rf3-n4": Rule("asha", 1, 3, 4),  # astune's default since issue 62
    "asha-g1-rf3-n2": Rule("asha", 1, 3, 2),
    "asha-g1-rf3-n6": Rule("asha", 1, 3, 6),
    "asha-g2-rf3-n4": Rule("asha", 2, 3, 4),
    "asha-g1-rf2-n4": Rule("asha", 1, 2, 4),
    "hyperband-g1-rf3-n4": Rule("hyperband", 1, 3, 4),
    "fifo-n4": Rule("fifo", 1, 3, 4),
    "fifo-n6": Rule("fifo", 1, 3, 6),
}
"""The candidate rules, fixed before any replay of this study (2026-11-29)."""
HANDOVER_RULES = {
    "fifo-n4": Rule("fifo", 1, 3, 4),  # astune's default since the first two rounds
    "fifo-n4-tpe": Rule("fifo", 1, 3, 4, handover=True),
    "fifo-n6-tpe": Rule("fifo", 1, 3, 6, handover=True),
}
"""The third round's candidates (``--candidates handover``): the hand-over to TPE, which the
issue names beside the scheduler and the size; fixed before any replay of that round
(2026-11-29, after the first two rounds' results were seen)."""
NEIGHBOUR_RULES = {
    "fifo-n4": Rule("fifo", 1, 3, 4),  # astune's default since the first three rounds
    "fifo-n4-near4": Rule("fifo", 1, 3, 4, neighbours=4),
    "fifo-n4-near8": Rule("fifo", 1, 3, 4, neighbours=8),
}
"""The fourth round's candidates (``--candidates neighbours``): after the seed points, 4 or 8
trials one step from the incumbent before TPE alone; fixed before any replay of that round
(2026-11-29, after traces of CoNLL-2003's default replay showed the portfolio's best one step
from cells that reach its target)."""
CANDIDATES = {"schedulers": RULES, "handover": HANDOVER_RULES, "neighbours": NEIGHBOUR_RULES}
"""The candidate sets ``--candidates`` names."""
INNER_REPETITIONS = 10
"""Repetitions of each inner (choosing) replay; the final replay takes the CLI's."""
CRITERIA = ("area", "no-worse")
"""How a rule is chosen on the sources (module docstring)."""


def subset_reference(datasets: Sequence[str], folder: Path, root: Path | None) -> Path:
    """A reference file in ``folder`` of ``datasets``' tables only, their recorded difficulty
    (no probe)."""
    from astune.history.reference import write_reference
    from benchmarks.search_efficiency.prior import recorded_difficulty, reference_entries

    entries = reference_entries(
        list(datasets), root=root, difficulty=recorded_difficulty(), log=lambda _line: None
    )
    name = "reference-" + "-".join(sorted(datasets)) + ".json"
    return write_reference(folder / name, entries, sources=sorted(datasets))


def rule_arm(dataset: str, sources: Sequence[str], rule: Rule, root: Path | None) -> arms.Arm:
    """The portfolio arm of ``dataset`` under ``rule``: the portfolio of ``rule.size`` learnt
    from ``sources``' tables, run first in the astune space widened to hold it."""
    from astune.history.portfolio_sources import portfolio_for
    from astune.history.portfolio_space import with_portfolio
    from astune.store.reader import Store

    space = base_space(dataset, fast=False)
    with tempfile.TemporaryDirectory() as folder:
        entries = portfolio_for(
            target_profile(dataset),
            store=Store(f"sqlite:///{folder}/empty.db"),
            reference=subset_reference(sources, Path(folder), root),
            losses=list(space.losses),
            size=rule.size,
        )
    arm = grid_arm("astune-portfolio-rule", dataset, with_portfolio(space, entries), fast=False)
    return dataclasses.replace(
        arm,
        schedule=rule.schedule,
        grace_period=rule.grace_period,
        reduction_factor=rule.reduction_factor,
        startup_trials=len(arm.seed_points) if rule.handover else None,
        neighbour_trials=rule.neighbours,
    )


def regret_area(table: replay.Table, runs: Sequence[replay.Replay], budget: float) -> float:
    """The mean over ``runs`` of the anytime normalised regret area (module docstring)."""
    means = [v for v in table.seed_mean.values() if not np.isnan(v)]
    best, worst = max(means), min(means)
    at = np.linspace(0, budget, CURVE_POINTS + 1)[1:]
    areas = []
    for run in runs:
        value = replay.anytime(run.curve, at, "mean")
        regret = np.where(np.isnan(value), 1.0, (best - value) / (best - worst))
        areas.append(float(np.mean(np.clip(regret, 0.0, 1.0))))
    return float(np.mean(areas))


def final_regret(table: replay.Table, runs: Sequence[replay.Replay]) -> float:
    """The median over ``runs`` of the final regret, in points below the table's best cell."""
    best = max(v for v in table.seed_mean.values() if not np.isnan(v))
    return float(np.median([100 * (best - run.curve[-1].mean) for run in runs]))


def rule_cost(
    sources: Sequence[str], rule: Rule | None, *, root: Path | None, repetitions: int
) -> dict[str, dict[str, float]]:
    """Each source's regret area and final regret under ``rule`` (None: by-hand), its
    portfolio learnt from the other sources."""
    costs = {}
    for held in sources:
        others = [s for s in sources if s != held]
        table = replay.Table(tables.complete_table(held, root))
        budget = settings.BUDGET_TRIAL_LENGTHS * table.trial_length()
        arm = arms.by_hand(held) if rule is None else rule_arm(held, others, rule, root)
        runs = [replay.Replay(table, arm, seed=i, budget=budget).run() for i in range(repetitions)]
        costs[held] = {"area": regret_area(table, runs, budget), "final": final_regret(table, runs)}
    return costs


def choose_rule(
    sources: Sequence[str],
    *,
    root: Path | None,
    repetitions: int = INNER_REPETITIONS,
    criterion: str = "area",
    rules: dict[str, Rule] = RULES,
) -> dict[str, Any]:
    """The rule of ``rules`` that ``criterion`` chooses over ``sources`` left out in turn, and
    every rule's costs (each source's regret area; with ``no-worse`` its final regret and
    by-hand's too)."""
    found = {
        name: rule_cost(sources, rule, root=root, repetitions=repetitions)
        for name, rule in rules.items()
    }
    costs = {name: {s: c["area"] for s, c in by.items()} for name, by in found.items()}
    means = {name: float(np.mean(list(c.values()))) for name, c in costs.items()}
    order = {name: (round(means[name], 9), list(rules).index(name)) for name in rules}
    out: dict[str, Any] = {"sources": list(sources), "criterion": criterion}
    if criterion == "no-worse":
        hand = rule_cost(sources, None, root=root, repetitions=repetitions)
        excess = {
            name: sum(max(0.0, by[s]["final"] - hand[s]["final"]) for s in sources)
            for name, by in found.items()
        }
        order = {name: (round(excess[name], 9), *order[name]) for name in rules}
        out["final_regret"] = {
            name: {s: c["final"] for s, c in by.items()} for name, by in found.items()
        }
        out["final_regret_by_hand"] = {s: c["final"] for s, c in hand.items()}
        out["excess"] = excess
    chosen = min(rules, key=lambda name: order[name])
    return {**out, "chosen": chosen, "mean_cost": means, "costs": costs}


def held_out_replay(
    dataset: str,
    choice: dict[str, Any],
    *,
    root: Path | None,
    repetitions: int,
    rules: dict[str, Rule] = RULES,
) -> dict[str, Any]:
    """``dataset`` replayed under the rule its sources chose and as by-hand, side by side."""
    table = replay.Table(tables.complete_table(dataset, root))
    goal = arms.targets(table, dataset)
    budget = settings.BUDGET_TRIAL_LENGTHS * table.trial_length()
    rule = rules[choice["chosen"]]
    chosen = rule_arm(dataset, choice["sources"], rule, root)
    hand = arms.by_hand(dataset)
    out = {}
    for name, arm in (("by-hand", hand), (f"astune ({choice['chosen']})", chosen)):
        out[name] = replay_arm(table, [(arm, 0.0)] * repetitions, goal=goal, budget=budget)
        runs = [replay.Replay(table, arm, seed=i, budget=budget).run() for i in range(repetitions)]
        out[name]["regret_area"] = regret_area(table, runs, budget)
    return {"targets": goal, "rule": dataclasses.asdict(rule), "choice": choice, "arms": out}


def study(
    datasets: Sequence[str],
    *,
    root: Path | None,
    repetitions: int,
    criterion: str = "area",
    rules: dict[str, Rule] = RULES,
) -> dict[str, Any]:
    """Each dataset held out in turn (its rule of ``rules`` chosen on the others by
    ``criterion``, then replayed), and the rule chosen on all of them: the product's default."""
    result: dict[str, Any] = {"rules": {k: dataclasses.asdict(v) for k, v in rules.items()}}
    result["held_out"] = {}
    for dataset in datasets:
        others = [d for d in datasets if d != dataset]
        choice = choose_rule(others, root=root, criterion=criterion, rules=rules)
        print(f"{dataset}: its sources choose {choice['chosen']}", flush=True)
        result["held_out"][dataset] = held_out_replay(
            dataset, choice, root=root, repetitions=repetitions, rules=rules
        )
    result["default"] = choose_rule(list(datasets), root=root, criterion=criterion, rules=rules)
    print(f"all four: {result['default']['chosen']}", flush=True)
    return result
