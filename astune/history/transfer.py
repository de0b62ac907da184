"""What `recommend` transfers besides delta and r: the learning rate, the epochs, the batch size
and the speed knobs of the best trials of similar tasks, as seed points and narrowed ranges.

Reference trials come from the store (:func:`astune.history.trial_history.store_trials`)
and from the prior packaged with astune (:mod:`astune.history.reference`), so that a fresh
install transfers too. Each search keeps its best quarter of trials (:data:`BEST_SHARE`).

Weights: a trial counts with its task's :func:`similarity` to the target (difficulty, task
type, training rows, backbone) times its search's confidence ``n / (n + 3)`` for ``n`` ranked
trials, times ``1 - rank / 2`` (its search's best counts whole, the last of its best quarter
about 7/8). History's share is ``h = n_eff / (n_eff + 3)``, ``n_eff`` the summed weight of the
searches (each counted by its best trial), the shrinkage delta's fit uses. For each key:

- a range moves from the space's toward history's (weighted centre +- 2 weighted sd, at least
  :data:`MIN_SPREAD`; in log space for learning rate and epochs) by ``h``;
- the first seed point takes the centre moved from the space's own seed value by ``h``;
- a value the space fixes becomes a range from it to that point when they differ;
- a categorical or switch takes history's weighted mode when ``h >= 1/2``.

So little or noisy history leaves the space near the shipped one, and a task like none seen
leaves it as shipped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from astune._text import counted
from astune.losses.catalogue import MULTI_LABEL_TASKS

HISTORY_SHRINK = 3.0
"""History of ``n`` pieces counts ``n / (n + HISTORY_SHRINK)`` against the prior (searches for
delta's fit and the transfer; a search's trials for its own weight): a thin history defers."""

TRANSFER_KEYS = (
    "lr", "epochs", "batch_size", "as_speed", "lam", "max_accum_steps", "as_skip",
    "skip_policy", "infobatch", "length_window",
)  # fmt: skip
"""The config keys transferred as seed points and ranges (delta and r have their own rule);
a key the target space does not search is left as it is."""
LOG_KEYS = ("lr", "epochs")
"""Keys whose centre and spread are taken on a log scale (they act multiplicatively)."""
MIN_SPREAD = {"lr": math.log(10) / 4, "epochs": math.log(1.5), "lam": 0.25, "max_accum_steps": 1.0}
"""The smallest history sd per key (log units for :data:`LOG_KEYS`): a quarter decade of lr."""
SWITCHES = ("batch_size", "as_speed", "as_skip", "skip_policy", "infobatch", "length_window")
"""Keys transferred as a weighted mode, not a range."""
BEST_SHARE = 0.25
"""The share of a search's trials, best first, that the warm start learns from."""
SCALES = {"difficulty": 0.15, "size_decades": 0.5}
"""Gaussian widths of similarity: difficulty points; training rows in decades."""
OTHER_TASK, OTHER_BACKBONE, OTHER_LAYERS, UNKNOWN = 0.25, 0.3, 0.6, 0.5
"""Similarity factors: another task family, another backbone, the same backbone with other
layers kept, and an unknown difficulty or size."""
TRANSFER_POINTS = 3
"""Seed points transferred: the consensus first, then the best trials of the nearest tasks."""
BOUND_GRID = 201
"""Difficulties :func:`weight_bound` tries across [0, 1]: steps of 0.005, a thirtieth of the
difficulty scale (:data:`SCALES`), so the share between two points exceeds theirs by < 0.1%."""


@dataclass(frozen=True)
class TaskProfile:
    """What tasks are compared on: difficulty in [0, 1] (None: unknown), task family, training
    rows, backbone (registry alias or folder) and the layers kept (None: all); and the tokens a
    sample was cut to (``max_length``; None: unknown), which a portfolio reports, not weighs."""

    difficulty: float | None
    task: str | None
    train_size: int | None
    backbone: str
    num_layers: int | None = None
    max_length: int | None = None


@dataclass(frozen=True)
class ReferenceTrial:
    """One of the best trials of a past search: its task, its config and its rank there (0 is
    the search's best, 1 its worst) among ``search_size`` ranked trials."""

    source: str
    dataset: str
    profile: TaskProfile
    config: Mapping[str, Any]
    rank: float
    search_size: int

    @property
    def confidence(self) -> float:
        """A search that ranked more trials tells its best apart better."""
        return self.search_size / (self.search_size + HISTORY_SHRINK)


@dataclass
class TransferAdvice:
    """History's values for :data:`TRANSFER_KEYS` and how much they count (``weight`` = h)."""

    weight: float
    centre: dict[str, Any]
    spread: dict[str, float]
    sources: list[tuple[str, float]] = field(default_factory=list)  # (search, its weight)
    trials: list[ReferenceTrial] = field(default_factory=list)  # best weighted first
    notes: list[str] = field(default_factory=list)


def similarity(a: TaskProfile, b: TaskProfile) -> float:
    """How alike two tasks are, in (0, 1]: 1 for the same difficulty, family, size and
    backbone (module docstring's factors)."""
    out = 1.0
    if a.difficulty is None or b.difficulty is None:
        out *= UNKNOWN
    else:
        out *= _gauss(a.difficulty - b.difficulty, SCALES["difficulty"])
    if a.train_size is None or b.train_size is None:
        out *= UNKNOWN
    else:
        out *= _gauss(math.log10(a.train_size / b.train_size), SCALES["size_decades"])
    if _family(a.task) != _family(b.task):
        out *= OTHER_TASK
    if a.backbone != b.backbone:
        out *= OTHER_BACKBONE
    elif a.num_layers != b.num_layers:
        out *= OTHER_LAYERS
    return out


def _gauss(x: float, scale: float) -> float:
    return math.exp(-0.5 * (x / scale) ** 2)


def _family(task: str | None) -> str | None:
    if task is None:
        return None
    return "multi_label" if task in MULTI_LABEL_TASKS else task


def ranked(
    source: str,
    dataset: str,
    profile: TaskProfile,
    scored: Sequence[tuple[Mapping[str, Any], float]],
    *,
    mode: str = "max",
    share: float = BEST_SHARE,
) -> list[ReferenceTrial]:
    """The best ``share`` (at least one) of a search's ``(config, score)`` pairs as reference
    trials, best first; scores that are not finite are left out."""
    finite = [(c, s) for c, s in scored if math.isfinite(s)]
    order = sorted(finite, key=lambda cs: cs[1], reverse=mode == "max")
    n = len(order)
    keep = best_count(n, share)
    return [
        ReferenceTrial(source, dataset, profile, dict(c), i / max(1, n - 1), n)
        for i, (c, _) in enumerate(order[:keep])
    ]


def best_count(n: int, share: float = BEST_SHARE) -> int:
    """How many of a search's ``n`` ranked trials its best ``share`` holds (at least one)."""
    return max(1, math.ceil(share * n)) if n else 0


def advise(target: TaskProfile, trials: Iterable[ReferenceTrial]) -> TransferAdvice:
    """History's centre and spread of each transferred key for ``target``, and its weight;
    ``sources`` are (search, similarity x confidence), nearest first."""
    trials = list(trials)
    sims = {id(t): similarity(target, t.profile) for t in trials}
    weighted = sorted(
        ((t, w) for t in trials if (w := sims[id(t)] * t.confidence * (1 - t.rank / 2)) > 1e-6),
        key=lambda tw: -tw[1],
    )
    by_source = _by_source((t, sims[id(t)]) for t, _ in weighted)
    advice = TransferAdvice(
        weight=_share(by_source),
        centre={},
        spread={},
        sources=sorted(by_source.items(), key=lambda kv: -kv[1]),
        trials=[t for t, _ in weighted],
    )
    if not weighted:
        advice.notes.append("no reference trial of a similar task: the space stays as shipped")
        return advice
    for key in TRANSFER_KEYS:
        _centre(advice, key, [(t.config[key], w) for t, w in weighted if _applies(t, key)])
    return advice


def weight_bound(target: TaskProfile, trials: Iterable[ReferenceTrial]) -> float:
    """The largest share ``h`` that ``trials`` could have in :func:`advise` for ``target``
    whatever its difficulty turns out to be: the most of :func:`advise`'s share over the
    difficulties the probe could measure (every reference search's own, a grid of
    :data:`BOUND_GRID` points across [0, 1], and unknown). Known before the probe.

    One difficulty for all searches at once: the target cannot be as hard as two searches of
    different difficulties (summing each search at its own would overstate the share)."""
    trials = list(trials)
    grid = [i / (BOUND_GRID - 1) for i in range(BOUND_GRID)]
    own = {t.profile.difficulty for t in trials if t.profile.difficulty is not None}

    def share_at(difficulty: float | None) -> float:
        at = replace(target, difficulty=difficulty)
        return _share(_by_source((t, similarity(at, t.profile)) for t in trials))

    return max(share_at(d) for d in (None, *own, *grid))


def _by_source(similar: Iterable[tuple[ReferenceTrial, float]]) -> dict[str, float]:
    """Each search's weight from its trials' similarities: a search counts once, by its best
    trial, times its confidence."""
    out: dict[str, float] = {}
    for trial, sim in similar:
        out[trial.source] = max(out.get(trial.source, 0.0), sim * trial.confidence)
    return out


def _share(by_source: Mapping[str, float]) -> float:
    """History's share ``h = n_eff / (n_eff + 3)`` of searches weighing ``by_source``."""
    n_eff = sum(by_source.values())
    return n_eff / (n_eff + HISTORY_SHRINK)


def _applies(trial: ReferenceTrial, key: str) -> bool:
    """Whether ``key`` was a setting of the trial (lam and s only with AS-Speed on, the skip
    policy only with AS-Skip on)."""
    value = trial.config.get(key)
    if value is None:
        return False
    if key in ("lam", "max_accum_steps"):
        return bool(trial.config.get("as_speed"))
    if key == "skip_policy":
        return bool(trial.config.get("as_skip"))
    return True


def _centre(advice: TransferAdvice, key: str, values: list[tuple[Any, float]]) -> None:
    if not values:
        return
    if key in SWITCHES:
        tally: dict[Any, float] = {}
        for value, w in values:
            tally[value] = tally.get(value, 0.0) + w
        advice.centre[key] = max(tally.items(), key=lambda kv: kv[1])[0]
        return
    xs = [(_to_scale(key, float(v)), w) for v, w in values]
    total = sum(w for _, w in xs)
    mean = sum(w * x for x, w in xs) / total
    sd = math.sqrt(sum(w * (x - mean) ** 2 for x, w in xs) / total)
    advice.centre[key] = _from_scale(key, mean)
    advice.spread[key] = max(sd, MIN_SPREAD[key])


def _to_scale(key: str, value: float) -> float:
    return math.log(value) if key in LOG_KEYS else value


def _from_scale(key: str, value: float) -> float:
    return math.exp(value) if key in LOG_KEYS else value


def blend(key: str, history: float, shipped: float, weight: float) -> float:
    """``shipped`` moved toward ``history`` by ``weight`` (on :data:`LOG_KEYS`' log scale)."""
    mixed = weight * _to_scale(key, history) + (1 - weight) * _to_scale(key, shipped)
    return _from_scale(key, mixed)


def history_range(advice: TransferAdvice, key: str) -> tuple[float, float]:
    """History's own range of ``key``: its centre +- 2 sd (on its scale)."""
    centre, sd = _to_scale(key, advice.centre[key]), advice.spread[key]
    return _from_scale(key, centre - 2 * sd), _from_scale(key, centre + 2 * sd)


def describe(advice: TransferAdvice) -> list[str]:
    """The report's lines on what was transferred."""
    if not advice.trials:
        return [f"transfer:    none ({'; '.join(advice.notes)})"]
    values = ", ".join(f"{k} {value_text(v)}" for k, v in advice.centre.items())
    searches = counted(len(advice.sources), "search")
    lines = [f"transfer:    weight {advice.weight:.2f} from {searches}: {values}"]
    lines += [f"  {source}: weight {w:.2f}" for source, w in advice.sources[:5]]
    return lines + [f"  note: {n}" for n in advice.notes]


def value_text(value: Any) -> str:
    """A value as the reports print it: a float to 3 significant digits."""
    return f"{value:.3g}" if isinstance(value, float) else str(value)
