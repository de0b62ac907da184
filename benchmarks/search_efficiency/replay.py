"""The replay (issue 44 item 3): Ray Tune's real searchers and schedulers (``OptunaSearch``
over Optuna's TPE, ``ASHAScheduler``) driven on a recorded table in simulated time, with a
small event queue of ``workers`` workers in place of a Ray cluster.

Why not Syne Tune's simulator backend: syne-tune 0.16.0 resolves beside Ray 2.60 and Optuna 5
(``pip install --dry-run``), but no module of it imports Ray or Optuna any more, so its
simulator drives only Syne Tune's own schedulers, not the ones this benchmark must measure.

Time: a trial's reports happen at its recorded ``startup_seconds + elapsed_seconds`` after its
start on a fresh actor, plus Ray's actor start (``ACTOR_START_SECONDS``); on a reused actor
(an arm whose search reuses them, as astune's does) at ``elapsed_seconds`` plus
``ACTOR_REUSE_SECONDS``: its imports were paid by the worker's first trial. A trial that runs to
its end frees its worker at its ``trial_seconds`` (the final test included) so shifted, one
that ASHA stops frees it at the report that stopped it. Trial-seconds at a moment are the
seconds every trial has run until then, summed over workers; the search ends when they reach
the budget. A trial draws one of the table's seeds of its config at random.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from typing import Any

import numpy as np

from benchmarks.search_efficiency import settings


@dataclasses.dataclass(frozen=True)
class Row:
    """One recorded evaluation."""

    evaluation: int
    val: float
    test: float
    elapsed: float
    last: bool
    train_seconds: float = 0.0  # the training seconds so far (astune's cost objective)


class Table:
    """A recorded table (a DataFrame of efficiency_record's rows) as the replay reads it."""

    def __init__(self, frame: Any):
        if frame.empty:
            raise ValueError("the table is empty: record it first (efficiency_record.py)")
        self.metric = str(frame["metric"].iloc[0]) if "metric" in frame else "objective"
        self.curves: dict[tuple[str, int], list[Row]] = {}
        self.trial_seconds: dict[tuple[str, int], float] = {}
        self.configs: dict[str, dict[str, Any]] = {}
        self.startup: dict[tuple[str, int], float] = {}  # in the times above; a fresh actor's
        for (key, seed), runs in frame.groupby(["key", "seed"]):
            runs = runs.sort_values("evaluation")
            startup = float(runs["startup_seconds"].iloc[0]) if "startup_seconds" in runs else 0.0
            self.startup[key, int(seed)] = startup
            self.curves[key, int(seed)] = [
                Row(
                    int(r.evaluation),
                    float(r.val),
                    float(r.test),
                    startup + float(r.elapsed_seconds),
                    bool(r.last),
                    float(getattr(r, "train_seconds", r.elapsed_seconds)),
                )
                for r in runs.itertuples()
            ]
            self.trial_seconds[key, int(seed)] = startup + float(runs["trial_seconds"].iloc[-1])
            first = runs.iloc[0]
            self.configs[key] = settings.normalized({k: first.get(k) for k in settings.CONFIG_KEYS})
        cells = frame.groupby(["key", "evaluation"])["val"].agg(["mean", "std", "count"])
        self.seed_mean = {(k, int(e)): float(r["mean"]) for (k, e), r in cells.iterrows()}
        # the standard error of a cell's seed mean (fewer than two finite seeds: unknown, NaN)
        self.seed_se = {
            (k, int(e)): float(r["std"]) / math.sqrt(r["count"]) if r["count"] > 1 else math.nan
            for (k, e), r in cells.iterrows()
        }
        self.seeds = {key: sorted(s for k, s in self.curves if k == key) for key in self.configs}

    def trial_length(self) -> float:
        """The median wall seconds of the runs at the grid's most epochs (a trial-length)."""
        most = max(c["epochs"] for c in self.configs.values())
        return float(
            np.median(
                [s for (k, _), s in self.trial_seconds.items() if self.configs[k]["epochs"] == most]
            )
        )

    def best_mean(self, keep: Any = None) -> float:
        """The best seed-mean validation score over every (config, evaluation) cell whose
        config ``keep`` accepts (a predicate on the config; None: all); cells where every
        seed diverged (NaN) are left out."""
        return self.seed_mean[self.best_cell(keep)]

    def best_cell(self, keep: Any = None) -> tuple[str, int]:
        """The (config key, evaluation) cell of :meth:`best_mean`."""
        cells = [
            cell
            for cell, v in self.seed_mean.items()
            if not np.isnan(v) and (keep is None or keep(self.configs[cell[0]]))
        ]
        return max(cells, key=self.seed_mean.__getitem__)


@dataclasses.dataclass(frozen=True)
class Point:
    """The anytime curve after one report: trial-seconds spent, trials started, and the
    incumbent's observed validation score, seed-mean validation score and test score."""

    seconds: float
    trials: int
    val: float
    mean: float
    test: float


@dataclasses.dataclass
class TrialLog:
    """One replayed trial: its config key, the seed drawn, when it ran, its evaluations."""

    key: str
    seed: int
    start: float
    end: float | None = None
    evaluations: int = 0
    stopped: bool = False


@dataclasses.dataclass
class _Active:
    trial: Any
    log: TrialLog
    curve: list[Row]
    shift: float  # seconds from the trial's start to its recorded times' zero (Ray's launch)
    result: dict[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class SimTrial:
    """What ASHA reads of a trial: its id."""

    trial_id: str


class Replay:
    """One repetition of one arm on a table: ``run()`` fills ``curve`` and ``trials``."""

    def __init__(
        self,
        table: Table,
        arm: Any,
        *,
        seed: int,
        budget: float,
        workers: int = settings.WORKERS,
        overhead: float = 0.0,
    ):
        """``overhead``: wall seconds before the first trial starts (a warm arm's probe and
        recommendation), which every worker waits out: ``workers x overhead`` trial-seconds."""
        self.table, self.budget, self.workers, self.overhead = table, budget, workers, overhead
        np.random.seed(seed)  # ASHA draws its bracket from numpy's global generator
        self.rng = np.random.default_rng(seed)
        self.searcher, self.scheduler = arm.searcher(seed), arm.scheduler()
        self.reuse_actors = bool(arm.reuse_actors)
        self.curve: list[Point] = []
        self.trials: list[TrialLog] = []
        self.active: dict[str, _Active] = {}
        self.events: list[tuple[float, int, str, str]] = []
        self.spent = workers * overhead  # trial-seconds of the trials that ended, and the wait
        self._seq = 0
        self.best: tuple[float, float, float] | None = None
        self.incumbent: tuple[str, int] | None = None
        """The config key and evaluation of :attr:`best` (the first found keeps a tie)."""

    def busy(self, now: float) -> float:
        """Trial-seconds spent by ``now``: the ended trials' and the running ones' so far."""
        return self.spent + sum(now - a.log.start for a in self.active.values())

    def run(self) -> Replay:
        for _ in range(self.workers):
            self._launch(self.overhead, fresh=True)
        while self.events:
            now, _, kind, tid = heapq.heappop(self.events)
            if self.busy(now) >= self.budget:
                break
            if kind == "report":
                self._report(now, tid)
            else:
                self._end(now, tid)
        return self

    def _push(self, when: float, kind: str, tid: str) -> None:
        self._seq += 1  # ties keep the order they were pushed in
        heapq.heappush(self.events, (when, self._seq, kind, tid))

    def _launch(self, now: float, *, fresh: bool) -> None:
        """Start the searcher's next trial on a worker at ``now``: on a ``fresh`` actor (Ray's
        actor start, then the table's start-up), else on the ended trial's, whose imports are
        paid."""
        tid = f"trial_{len(self.trials):05d}"
        config = settings.normalized(self.searcher.suggest(tid))
        key = settings.config_key(config)
        if key not in self.table.seeds:
            raise KeyError(f"the searcher proposed {key}, which the table lacks")
        seed = int(self.rng.choice(self.table.seeds[key]))
        log = TrialLog(key, seed, start=now)
        self.trials.append(log)
        trial = SimTrial(tid)
        self.scheduler.on_trial_add(None, trial)
        curve = self.table.curves[key, seed]
        if fresh:
            shift = settings.ACTOR_START_SECONDS
        else:
            shift = settings.ACTOR_REUSE_SECONDS - self.table.startup[key, seed]
        self.active[tid] = _Active(trial, log, curve, shift)
        self._push(now + shift + curve[0].elapsed, "report", tid)

    def _report(self, now: float, tid: str) -> None:
        from ray.tune.schedulers import TrialScheduler

        act = self.active[tid]
        row = act.curve[act.log.evaluations]
        if np.isnan(row.val):  # the recorded run diverged here: an errored trial
            return self._end(now, tid, error=True)
        act.log.evaluations += 1
        act.result = {
            "objective": row.val,
            "train_seconds": row.train_seconds,
            "training_iteration": row.evaluation,
            "final": row.last,
        }
        self.searcher.on_trial_result(tid, act.result)
        decision = self.scheduler.on_trial_result(None, act.trial, act.result)
        if self.best is None or row.val > self.best[0]:
            self.best = (row.val, self.table.seed_mean[act.log.key, row.evaluation], row.test)
            self.incumbent = (act.log.key, row.evaluation)
        self.curve.append(Point(self.busy(now), len(self.trials), *self.best))
        if decision == TrialScheduler.STOP and not row.last:
            act.log.stopped = True
            self._end(now, tid)
        elif row.last:
            total = self.table.trial_seconds[act.log.key, act.log.seed]
            self._push(act.log.start + act.shift + total, "end", tid)
        else:
            following = act.curve[act.log.evaluations].elapsed
            self._push(act.log.start + act.shift + following, "report", tid)

    def _end(self, now: float, tid: str, *, error: bool = False) -> None:
        act = self.active.pop(tid)
        act.log.end = now
        self.spent += now - act.log.start
        if error:
            self.scheduler.on_trial_remove(None, act.trial)
            self.searcher.on_trial_complete(tid, None, error=True)
        else:
            self.scheduler.on_trial_complete(None, act.trial, act.result)
            self.searcher.on_trial_complete(tid, act.result)
        if self.busy(now) < self.budget:
            self._launch(now, fresh=not self.reuse_actors)


def seconds_to_target(curve: list[Point], target: float, *, budget: float) -> tuple[float, bool]:
    """The trial-seconds at which the incumbent's seed-mean score first reaches ``target``, and
    True; ``(budget, False)`` when it never does within the budget."""
    for point in curve:
        if point.mean >= target and point.seconds <= budget:
            return point.seconds, True
    return budget, False


def median_interval(
    values: list[float], *, resamples: int = settings.BOOTSTRAP_RESAMPLES, seed: int = 0
) -> dict[str, float]:
    """The median of ``values`` and its percentile-bootstrap 95% interval (low, high)."""
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(data, size=(resamples, len(data)), replace=True), axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return {"median": float(np.median(data)), "low": float(low), "high": float(high)}


def anytime(curve: list[Point], at: np.ndarray, field: str, *, axis: str = "seconds") -> np.ndarray:
    """The curve's ``field`` (val, mean, test) at ``at`` on ``axis`` (``seconds``: trial-seconds;
    ``trials``: trials started); NaN before the first report."""
    seconds = np.array([getattr(p, axis) for p in curve])
    values = np.array([getattr(p, field) for p in curve])
    index = np.searchsorted(seconds, at, side="right") - 1
    return np.where(index >= 0, values[np.maximum(index, 0)], np.nan)
