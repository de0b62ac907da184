"""A portfolio from history: the configs to run first on a new task, in order.

Zero-shot HPO portfolios (Wistuba et al. 2015; Syne Tune's ``ZeroShotTransfer``; Auto-sklearn
2.0's portfolio): every past task of the target's backbone scores the candidate configs by
normalised regret (0 for that task's best, 1 for its worst); the portfolio adds, one at a time,
the candidate that most lowers the weighted mean over tasks of the best regret so far. So its
first config is the one that is good on most tasks, and each next one covers the tasks the
earlier ones left worst served.

The tasks are the packaged prior's recorded tables and the store's searches (issue 62). A
task's weight is its :func:`~astune.history.transfer.similarity` to the target as a share
of the nearest task's, raised to at least a floor: similarity weights a task, it never silences
one. How much similarity counts is learnt from the tasks themselves (:func:`chosen_floor`):
each floor of :data:`FLOORS` builds, for each task left out in turn, the portfolio of the others
for it, and the floor whose portfolios served the left-out tasks best is kept; 1 (every task
alike, as the papers above weigh them) wins ties and stands when there are too few tasks to
leave one out. A task records its own configs; a candidate it did not run takes the regret of
its nearest config of the same loss and switches within :data:`MATCH_RADIUS`, else 1 (as bad as
that task's worst).

Only the tasks recorded at the size nearest the target's count (:func:`at_nearest_size`, as
Feurer et al. 2015 warm-start from the datasets nearest by meta-features, the rows among
them): a learning rate that won on short runs does not carry to long ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from astune.history.transfer import LOG_KEYS, TaskProfile, similarity, value_text
from astune.losses.catalogue import family_loss
from astune.metrics.objectives import MODES

PORTFOLIO_SIZE = 4
"""Configs a portfolio holds by default: the first trials of a search."""
FLOORS = (0.25, 0.5, 1.0)
"""The least weights a task of the target's backbone may have, as a share of the nearest's,
that :func:`chosen_floor` tries; 1 weighs every task alike."""
UNIFORM = 1.0
"""The floor that weighs every task alike: the one kept on ties and with fewer than
:data:`MIN_TASKS_TO_CHOOSE` tasks."""
MIN_TASKS_TO_CHOOSE = 3
"""Tasks needed to choose a floor: each left out in turn leaves two to weigh against each
other."""
MATCH_RADIUS = 0.5
"""How near (:func:`distance`, strictly) a task's nearest config must lie to score a candidate
it did not run: closer than half a decade of learning rate or 0.2 of delta; never another
epoch count of a grid that doubles them."""
SCALES = {
    "lr": 1.0,
    "epochs": 2.0,
    "delta": 2.5,
    "warmup_ratio": 2.5,
    "lr_warmup_ratio": 2.5,
    "lam": 1.0,
    "max_accum_steps": 0.25,
}
"""Distance per unit of each numeric key (log10 for lr and epochs): a decade of lr is 1, a
doubling of epochs 0.6, 0.2 of delta 0.5."""
SAME = ("loss", "batch_size", "as_speed", "as_skip", "infobatch", "length_window", "skip_policy")
"""Keys two configs must share for one to score the other."""
SIZE_FACTOR = 4.0
"""A portfolio learns from the tasks whose training rows lie within this factor of the task
nearest the target in rows (the search-efficiency tables, 500-2,000 rows, are one such size).
Within those tables the best lr rises with optimizer steps, while on the whole of SST-5 the
paper's 2e-5 beat their 3e-4 (benchmarks/search_efficiency, ``lr_scale``): what won at one size
is no evidence at another."""


@dataclass(frozen=True)
class SourceTask:
    """One past task: its configs and their normalised regrets (0: its best, 1: its worst)."""

    name: str
    dataset: str
    profile: TaskProfile
    configs: tuple[Mapping[str, Any], ...]
    regrets: tuple[float, ...]

    @classmethod
    def from_scores(
        cls,
        name: str,
        dataset: str,
        profile: TaskProfile,
        scored: Iterable[tuple[Mapping[str, Any], float]],
        *,
        mode: str = "max",
    ) -> SourceTask | None:
        """The task of ``(config, score)`` pairs (``mode``: whether higher scores are better);
        None when fewer than two finite scores differ (nothing to rank)."""
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: use one of {', '.join(MODES)}")
        finite = [(dict(c), float(s)) for c, s in scored if math.isfinite(float(s))]
        scores = [s if mode == "max" else -s for _, s in finite]
        if len(set(scores)) < 2:
            return None
        best, worst = max(scores), min(scores)
        regrets = tuple((best - s) / (best - worst) for s in scores)
        return cls(name, dataset, profile, tuple(c for c, _ in finite), regrets)

    def regret_of(self, config: Mapping[str, Any]) -> float:
        """The regret this task gives ``config`` (translated to its task family): its own
        config's, else its nearest's if nearer than :data:`MATCH_RADIUS` (the better of equally
        near ones), else 1."""
        config = for_task(config, self.profile.task)
        exact = self._by_key.get(_key(config))
        if exact is not None:
            return exact
        found = (math.inf, 1.0)  # (distance, regret) of the nearest so far
        for own, regret in self._by_switches.get(_switches(config), ()):
            found = min(found, (distance(config, own), regret))
        return found[1] if found[0] < MATCH_RADIUS else 1.0

    @cached_property
    def _by_key(self) -> dict[tuple, float]:
        out: dict[tuple, float] = {}
        for config, regret in zip(self.configs, self.regrets, strict=True):
            out[_key(config)] = min(regret, out.get(_key(config), 1.0))
        return out

    @cached_property
    def _by_switches(self) -> dict[tuple, list[tuple[Mapping[str, Any], float]]]:
        out: dict[tuple, list[tuple[Mapping[str, Any], float]]] = {}
        for config, regret in zip(self.configs, self.regrets, strict=True):
            out.setdefault(_switches(config), []).append((config, regret))
        return out


@dataclass(frozen=True)
class PortfolioEntry:
    """One config of a portfolio: where it was recorded, the portfolio's weighted mean regret
    over the tasks once it is in (``mean_regret``: the first entry's alone, then falling), and
    the config's own (``regret_alone``: how it serves the tasks by itself)."""

    config: dict[str, Any]
    source: str
    mean_regret: float
    regret_alone: float


def distance(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """How far apart two configs are (:data:`SCALES`); infinite when a :data:`SAME` key
    differs."""
    if _switches(a) != _switches(b):
        return math.inf
    total = 0.0
    for key, scale in SCALES.items():
        x, y = a.get(key), b.get(key)
        if x is None or y is None:
            continue
        if key in LOG_KEYS:
            x, y = math.log10(float(x)), math.log10(float(y))
        total += (scale * (float(x) - float(y))) ** 2
    return math.sqrt(total)


def for_task(config: Mapping[str, Any], task: str | None) -> dict[str, Any]:
    """``config`` with its loss named for ``task``'s family (softmax <-> multilabel_softmax)."""
    out = dict(config)
    if task is not None and "loss" in out:
        out["loss"] = family_loss(str(out["loss"]), task)
    return out


def task_weights(target: TaskProfile, tasks: Sequence[SourceTask], floor: float) -> list[float]:
    """Each task's weight for ``target``: its similarity as a share of the largest, at least
    ``floor``."""
    sims = [similarity(target, t.profile) for t in tasks]
    top = max(sims, default=1.0) or 1.0
    return [max(s / top, floor) for s in sims]


def build_portfolio(
    target: TaskProfile,
    tasks: Iterable[SourceTask],
    *,
    size: int = PORTFOLIO_SIZE,
    losses: Sequence[str] | None = None,
    floor: float | None = None,
) -> list[PortfolioEntry]:
    """The greedy portfolio of at most ``size`` configs for ``target`` from the ``tasks`` of its
    backbone (the others are left out: a learning rate does not carry across backbones);
    ``losses``: the losses a candidate may have (named for the target's family; None: any);
    ``floor``: the tasks' least weight (None: :func:`chosen_floor`). Empty when no task of the
    backbone is given."""
    tasks = at_nearest_size(target, [t for t in tasks if t.profile.backbone == target.backbone])
    if floor is None:
        floor = chosen_floor(tasks, size=size, losses=losses)
    return _greedy(target, tasks, size, losses, [task_weights(target, tasks, floor)])[0]


def at_nearest_size(target: TaskProfile, tasks: Sequence[SourceTask]) -> list[SourceTask]:
    """The ``tasks`` recorded at the size nearest ``target``'s: those whose training rows are
    within :data:`SIZE_FACTOR` of the nearest task's, and those of unknown rows; all of them
    when the target's rows are unknown."""
    sized = [t.profile.train_size for t in tasks if t.profile.train_size]
    if not target.train_size or not sized:
        return list(tasks)
    nearest = min(sized, key=lambda rows: abs(math.log(rows / target.train_size)))
    return [
        t
        for t in tasks
        if not t.profile.train_size
        or max(t.profile.train_size / nearest, nearest / t.profile.train_size) <= SIZE_FACTOR
    ]


def chosen_floor(
    tasks: Sequence[SourceTask], *, size: int = PORTFOLIO_SIZE, losses: Sequence[str] | None
) -> float:
    """The floor of :data:`FLOORS` whose leave-one-task-out portfolios have the lowest mean
    over the left-out tasks of their anytime regret there (the best regret after each of
    ``size`` configs, averaged); :data:`UNIFORM` on ties and with fewer than
    :data:`MIN_TASKS_TO_CHOOSE` tasks. ``tasks``: one backbone's."""
    if len(tasks) < MIN_TASKS_TO_CHOOSE:
        return UNIFORM
    cost = {floor: 0.0 for floor in FLOORS}
    for i, held in enumerate(tasks):
        others = [*tasks[:i], *tasks[i + 1 :]]
        named = losses
        if losses is not None and held.profile.task is not None:
            named = [family_loss(x, held.profile.task) for x in losses]
        weightings = [task_weights(held.profile, others, floor) for floor in FLOORS]
        portfolios = _greedy(held.profile, others, size, named, weightings)
        for floor, entries in zip(FLOORS, portfolios, strict=True):
            cost[floor] += anytime_regret(held, entries, size)
    return min(sorted(FLOORS, key=lambda f: f != UNIFORM), key=cost.__getitem__)


def anytime_regret(task: SourceTask, entries: Sequence[PortfolioEntry], size: int) -> float:
    """The mean over ``size`` steps of ``task``'s best regret after the first entries (a
    shorter portfolio keeps its last best; none: 1)."""
    best, total = 1.0, 0.0
    for step in range(size):
        if step < len(entries):
            best = min(best, task.regret_of(entries[step].config))
        total += best
    return total / size


def _greedy(
    target: TaskProfile,
    tasks: Sequence[SourceTask],
    size: int,
    losses: Sequence[str] | None,
    weightings: Sequence[Sequence[float]],
) -> list[list[PortfolioEntry]]:
    """The greedy portfolio over ``tasks`` (module docstring) under each of ``weightings`` (a
    weight a task), the candidates scored once for all."""
    candidates = _candidates(tasks, target.task, losses)
    table = [[t.regret_of(config) for t in tasks] for config, _ in candidates]
    out = []
    for weights in weightings:
        chosen: list[PortfolioEntry] = []
        best_so_far = [1.0] * len(tasks)
        alone = [_weighted(weights, row) for row in table]
        for _ in range(min(size, len(candidates))):
            scored = [
                (_weighted(weights, [min(b, r) for b, r in zip(best_so_far, row, strict=True)]), i)
                for i, row in enumerate(table)
                if not any(e.config == candidates[i][0] for e in chosen)
            ]
            # ties: the candidate better on its own, then the one seen first
            mean, _, pick = min((mean, alone[i], i) for mean, i in scored)
            chosen.append(PortfolioEntry(*candidates[pick], mean, alone[pick]))
            best_so_far = [min(b, r) for b, r in zip(best_so_far, table[pick], strict=True)]
        out.append(chosen)
    return out


def _candidates(
    tasks: Sequence[SourceTask], task: str | None, losses: Sequence[str] | None
) -> list[tuple[dict[str, Any], str]]:
    """Every task's configs, named for the target's family, each once: with the source where
    it did best (the first such), the better configs of each task first."""
    best: dict[tuple, tuple[float, int, dict[str, Any], str]] = {}
    order = 0
    for source in tasks:
        for i in sorted(range(len(source.configs)), key=lambda i: source.regrets[i]):
            config = for_task(source.configs[i], task)
            if losses is not None and config.get("loss") not in losses:
                continue
            key, regret = _key(config), source.regrets[i]
            if key not in best:
                best[key] = (regret, order, config, source.name)
                order += 1
            elif regret < best[key][0]:
                best[key] = (regret, best[key][1], config, source.name)
    return [(config, name) for _, _, config, name in sorted(best.values(), key=lambda b: b[1])]


def _switches(config: Mapping[str, Any]) -> tuple:
    return tuple(config.get(key) for key in SAME)


def _key(config: Mapping[str, Any]) -> tuple:
    return tuple(
        sorted((k, round(v, 12) if isinstance(v, float) else v) for k, v in config.items())
    )


def _weighted(weights: Sequence[float], regrets: Sequence[float]) -> float:
    total = sum(weights)
    return sum(w * r for w, r in zip(weights, regrets, strict=True)) / total if total else 0.0


def describe_portfolio(entries: Sequence[PortfolioEntry], backbone: str) -> list[str]:
    """The report's lines: the configs a search runs first, where each was recorded."""
    if not entries:
        return [f"portfolio:   none (no past task on {backbone}: the space's own seed points)"]
    lines = [f"portfolio:   the first {len(entries)} trials a search runs ({backbone}):"]
    for i, entry in enumerate(entries, 1):
        lines.append(f"  {i}. {config_text(entry.config)}")
        lines.append(
            f"     from {entry.source}; mean regret {entry.regret_alone:.2f} alone, "
            f"{entry.mean_regret:.2f} for the first {i} together"
        )
    return lines


def config_text(config: Mapping[str, Any]) -> str:
    """A config in a few words: its loss, then the values that are set (switches when on)."""
    words = [str(config.get("loss", "?"))]
    for key, value in config.items():
        if key == "loss" or value is None or value is False or (key in QUIET_ZEROS and not value):
            continue
        words.append(key if value is True else f"{SHORT.get(key, key)} {value_text(value)}")
    return " ".join(words)


SHORT = {"batch_size": "batch", "warmup_ratio": "r", "lr_warmup_ratio": "lr warm-up"}
"""Shorter names in :func:`config_text`."""
QUIET_ZEROS = ("lr_warmup_ratio", "length_window")
"""Keys left out of :func:`config_text` at 0 (their default, off)."""
