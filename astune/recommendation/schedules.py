"""Which delta schedule won in history, by difficulty band, and the delta trajectories of
similar tasks.

- Tally: a search whose AS trials tried more than one schedule (the space chose
  ``delta_schedule``) is a contest; the schedule of its best AS trial won it. Searches that tried
  one schedule are counted apart: they say nothing about which schedule is better.
- Trajectories: for an adaptive best trial, the ``delta_now`` it logged at each evaluation; for
  a fixed-delta best trial, the delta the ``ema`` schedule would have reached on it, replayed by
  :class:`~astune.losses.delta.EmaDelta` itself on the run's logged ``train_margin`` (the mean
  ``p_t - max p_i`` of the rows trained since the previous evaluation), each optimizer step of
  an interval seeing the interval's mean. ``ema`` is replayable because it reads only the
  margin, which a fixed delta changes little; ``target-mask`` reacts to the masked ratio its
  own delta sets, so it is not replayed. Both are read at :data:`FRACTIONS` of the samples
  trained.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from astune.config import TRAIN_FIELDS
from astune.losses.delta import EmaDelta
from astune.recommendation.delta_history import HistoryPoint
from astune.recommendation.prior import BANDS, band_of
from astune.store.reader import Store

FRACTIONS = (0.25, 0.5, 0.75, 1.0)
"""Where a trajectory is read: shares of the samples a run trained on."""
REPLAYED = "ema"


# ------------------------------------------------------------------------------------ tally
@dataclass
class ScheduleTally:
    """The searches of one difficulty ``band``: the contests (more than one schedule tried),
    grouped by the schedule that won, and how many tried one schedule only."""

    band: str
    wins: dict[str, list[HistoryPoint]] = field(default_factory=dict)
    single_schedule: int = 0

    @property
    def contests(self) -> int:
        return sum(len(points) for points in self.wins.values())

    def winner(self) -> str | None:
        """The schedule with the most wins (a tie: the one whose searches ran more AS trials);
        None without a contest."""
        if not self.wins:
            return None
        return max(
            self.wins, key=lambda s: (len(self.wins[s]), sum(p.n_trials for p in self.wins[s]))
        )

    def winner_params(self) -> dict[str, float]:
        """The winner's parameters: per key, the median over the searches it won."""
        winner = self.winner()
        points = self.wins.get(winner, []) if winner is not None else []
        keys = points[0].schedule_params if points else {}
        return {k: statistics.median(p.schedule_params[k] for p in points) for k in keys}


def tally_schedules(points: list[HistoryPoint]) -> dict[str, ScheduleTally]:
    """One :class:`ScheduleTally` per band of :data:`~astune.recommendation.prior.BANDS`, in
    order."""
    tallies = {name: ScheduleTally(name) for name, _ in BANDS}
    for point in points:
        tally = tallies[band_of(point.difficulty)]
        if len(point.schedules_tried) < 2:
            tally.single_schedule += 1
            continue
        tally.wins.setdefault(point.schedule, []).append(point)
    return tallies


# ------------------------------------------------------------------------------ trajectories
@dataclass(frozen=True)
class Trajectory:
    """delta over one run's training: after the warm-up (``start``) and at :data:`FRACTIONS`."""

    experiment: str
    schedule: str
    replayed: bool  # True: ema replayed on a fixed-delta run's margins; False: as it ran
    start: float
    deltas: tuple[float, ...]


def trajectory(store: Store, point: HistoryPoint) -> Trajectory | None:
    """The run's own ``delta_now`` when it was adaptive, else the replayed ``ema``; None when
    the run logged neither (runs from before ``train_margin`` was logged)."""
    series = _series(store, point.run_id, ("samples_seen", "delta_now", "train_margin"))
    samples = series["samples_seen"]
    if not samples:
        return None
    total = max(samples.values())
    if point.schedule != "fixed":
        deltas = _read_at(series["delta_now"], samples, total)
        if deltas is None:
            return None
        return Trajectory(point.experiment, point.schedule, False, point.delta, deltas)
    return _replay_ema(point, series["train_margin"], samples, total, store)


def _replay_ema(
    point: HistoryPoint,
    margins: dict[int, float],
    samples: dict[int, float],
    total: float,
    store: Store,
) -> Trajectory | None:
    steps = _series(store, point.run_id, ("optimizer_steps",))["optimizer_steps"]
    if not margins or not steps:
        return None
    schedule = EmaDelta(
        point.delta,
        point.warmup_ratio,
        max(1, round(total)),
        momentum=TRAIN_FIELDS["delta_momentum"].default,
        delta_min=min(point.delta, TRAIN_FIELDS["delta_min"].default),
    )
    replayed, done_samples, done_steps = {}, 0.0, 0
    for evaluation in sorted(margins):
        now_samples, now_steps = samples.get(evaluation), steps.get(evaluation)
        if now_samples is None or now_steps is None:
            continue
        k = max(0, round(now_steps) - done_steps)
        for i in range(1, k + 1):  # the interval's steps, spread evenly over its samples
            at = done_samples + (now_samples - done_samples) * i / k
            schedule.observe(round(at), masked_ratio=0.0, margin=margins[evaluation])
        replayed[evaluation] = schedule.delta_at(round(now_samples))
        done_samples, done_steps = now_samples, round(now_steps)
    deltas = _read_at(replayed, samples, total)
    if deltas is None:
        return None
    return Trajectory(point.experiment, REPLAYED, True, point.delta, deltas)


def _series(store: Store, run_id: str, keys: tuple[str, ...]) -> dict[str, dict[int, float]]:
    """Per metric key: evaluation step -> value (the last one logged at that step)."""
    out: dict[str, dict[int, float]] = {}
    for key in keys:
        history = store.client.get_metric_history(run_id, key) if run_id else []
        out[key] = {m.step: m.value for m in sorted(history, key=lambda m: m.timestamp)}
    return out


def _read_at(
    values: dict[int, float], samples: dict[int, float], total: float
) -> tuple[float, ...] | None:
    """``values`` (by evaluation) at :data:`FRACTIONS` of ``total`` samples: the last
    evaluation at or before each point (the first evaluation before any)."""
    timeline = sorted((samples[e], v) for e, v in values.items() if e in samples)
    if not timeline:
        return None
    read = []
    for fraction in FRACTIONS:
        before = [v for s, v in timeline if s <= fraction * total + 1e-9]
        read.append(before[-1] if before else timeline[0][1])
    return tuple(read)


def band_trajectories(
    store: Store, points: list[HistoryPoint], band: str
) -> tuple[list[Trajectory], list[str]]:
    """The trajectories of the best trials of ``band``'s searches, and a note per search
    whose run logged too little to draw one."""
    found, notes = [], []
    for point in points:
        if band_of(point.difficulty) != band:
            continue
        got = trajectory(store, point)
        if got is None:
            notes.append(f"{point.experiment}: its best trial logged no delta_now or train_margin")
        else:
            found.append(got)
    return found, notes


def median_trajectory(trajectories: list[Trajectory]) -> tuple[float, ...]:
    """Per point of :data:`FRACTIONS`, the median over ``trajectories`` (not empty)."""
    return tuple(
        statistics.median(t.deltas[i] for t in trajectories) for i in range(len(FRACTIONS))
    )


# ---------------------------------------------------------------------------------- advice
@dataclass
class ScheduleAdvice:
    """The schedule for a task of difficulty ``band``, and the evidence: every band's tally
    and the trajectories of the band's searches."""

    band: str
    schedule: str
    params: dict[str, float]
    tallies: dict[str, ScheduleTally]
    trajectories: list[Trajectory] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def contested(self) -> bool:
        """Whether a search of this band compared schedules (else the advice is the default)."""
        return self.tallies[self.band].contests > 0


def schedule_advice(store: Store, points: list[HistoryPoint], difficulty: float) -> ScheduleAdvice:
    """The schedule that won most contests of ``difficulty``'s band (``fixed``, the paper's,
    without one) with its median parameters, and the band's trajectories."""
    band = band_of(difficulty)
    tallies = tally_schedules(points)
    winner = tallies[band].winner()
    trajectories, notes = band_trajectories(store, points, band)
    return ScheduleAdvice(
        band=band,
        schedule=winner or "fixed",
        params=tallies[band].winner_params() if winner else {},
        tallies=tallies,
        trajectories=trajectories,
        notes=notes,
    )
