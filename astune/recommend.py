"""`astune recommend`: delta (and the warm-up r) for a dataset from its measured difficulty.

The prior is the paper's rule (Settings): delta 0.3 for most tasks, about 0.35 for easy ones and
about 0.2 for hard ones; r > 0 (0.15-0.25) only for easy tasks with a high baseline (Clinc_oos,
Conll2003). On the probe's difficulty scale (:mod:`astune.difficulty`) the paper's easy tasks
measure about 0.3 (Clinc_oos) and 0.4 (Conll2003) and SST5, which it calls hard, about 0.9, so
the prior runs linearly through (0.45, 0.35), (0.75, 0.30) and (1.0, 0.20), flat outside; r is
0.2 up to difficulty 0.45 and falls linearly to 0 at 0.6.

History: every search in the MLflow store with finished AS-Softmax trials gives a point
(difficulty of its dataset, delta and r of its best AS trial). A weighted least-squares line
through them (a weighted mean below 3 points or with a single difficulty; predictions kept
inside the range of the observed deltas) is blended with the prior with weight
``n / (n + 3)`` for n searches, so that the paper's rule dominates a thin history. The range
adds the fit's residual spread (the prior's own: 0.05) and the difficulty's uncertainty
carried through the slope of the blended curve.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astune.difficulty import Difficulty, dataset_name, measure_difficulty
from astune.store.confirmed import confirmed_configs, confirmed_winner
from astune.store.conventions import BEST_TAG_PREFIX, PARENT_TAG
from astune.store.reader import AS_LOSSES, Store, dataset_of, finished_trials, objective, param

if TYPE_CHECKING:
    from mlflow.entities import Run

PRIOR_ANCHORS = ((0.45, 0.35), (0.75, 0.30), (1.0, 0.20))
PRIOR_HALF_WIDTH = 0.05
R_EASY, R_FULL_UNTIL, R_ZERO_FROM = 0.2, 0.45, 0.6
HISTORY_SHRINK = 3.0
NO_HISTORY_FIT_HALF_WIDTH = 0.1  # the spread of a fit through fewer than 3 points is unknown
UNKNOWN_DIFFICULTY = 0.75  # a task nothing could be measured on counts as medium


def prior_delta(difficulty: float) -> float:
    """The paper's rule as a function of difficulty (module docstring)."""
    (x0, y0), *rest = PRIOR_ANCHORS
    if difficulty <= x0:
        return y0
    for x1, y1 in rest:
        if difficulty <= x1:
            return y0 + (y1 - y0) * (difficulty - x0) / (x1 - x0)
        x0, y0 = x1, y1
    return y0


def prior_warmup(difficulty: float) -> float:
    """The paper's warm-up r: 0.2 for easy tasks with a high baseline, 0 otherwise."""
    if difficulty <= R_FULL_UNTIL:
        return R_EASY
    return R_EASY * max(0.0, (R_ZERO_FROM - difficulty) / (R_ZERO_FROM - R_FULL_UNTIL))


# ----------------------------------------------------------------------------------- history
@dataclass
class HistoryPoint:
    """The best AS-Softmax trial of one search, placed at its dataset's difficulty."""

    experiment: str
    dataset: str
    difficulty: float
    delta: float
    warmup_ratio: float
    objective: float
    n_trials: int
    confirmed_seeds: int = 0  # > 0: delta, r and objective are `astune confirm`'s winner's

    @property
    def weight(self) -> float:
        """A search with more AS trials pins its best delta down better."""
        return self.n_trials / (self.n_trials + 3.0)


def history_points(
    store: Store, difficulty_of: Callable[[str, "Run"], Difficulty]
) -> tuple[list[HistoryPoint], list[str]]:
    """One point per search with finished AS-Softmax trials, and notes on searches left out."""
    by_parent: dict[str, list[Run]] = {}
    for run in finished_trials(store.trials(), AS_LOSSES):
        by_parent.setdefault(run.data.tags.get(PARENT_TAG, ""), []).append(run)
    points, notes = [], []
    for parent in store.searches():
        trials = [t for t in by_parent.get(parent.info.run_id, []) if param(t, "delta") is not None]
        if not trials:
            continue
        name = store.client.get_experiment(parent.info.experiment_id).name
        difficulty = difficulty_of(dataset_of(parent) or "", parent)
        if difficulty.value is None:
            notes.append(f"search {name!r} left out: difficulty of {dataset_of(parent)!r} unknown")
            continue
        best, value, seeds = _best_as_trial(store, parent, trials)
        points.append(
            HistoryPoint(
                experiment=name,
                dataset=dataset_of(parent) or "",
                difficulty=difficulty.value,
                delta=float(param(best, "delta")),
                warmup_ratio=float(param(best, "warmup_ratio") or 0.0),
                objective=value,
                n_trials=len(trials),
                confirmed_seeds=seeds,
            )
        )
    return points, notes


def _best_as_trial(store: Store, parent: "Run", trials: list["Run"]) -> tuple["Run", float, int]:
    """The search's best AS trial, its objective and seeds: by confirmed mean where
    `astune confirm` re-ran AS trials of the search, else by single-run objective."""
    by_id = {t.info.run_id: t for t in trials}
    confirmed = [c for c in confirmed_configs(store, parent) if c.confirms in by_id]
    winner = confirmed_winner(confirmed, "min" if param(parent, "mode") == "min" else "max")
    if winner is not None:
        return by_id[winner.confirms], winner.mean, len(winner.seeds)
    best = max(trials, key=objective)
    return best, objective(best), 0


@dataclass
class LineFit:
    """``y = intercept + slope * x`` through weighted points; predictions clipped to [low, high]."""

    intercept: float
    slope: float
    low: float
    high: float
    resid_sd: float | None  # None below 3 points

    def predict(self, x: float) -> float:
        return min(self.high, max(self.low, self.intercept + self.slope * x))


def fit_line(xs: list[float], ys: list[float], ws: list[float]) -> LineFit:
    """Weighted least squares; a weighted mean below 3 points or when all x are equal."""
    total = sum(ws)
    mx = sum(w * x for w, x in zip(ws, xs)) / total
    my = sum(w * y for w, y in zip(ws, ys)) / total
    sxx = sum(w * (x - mx) ** 2 for w, x in zip(ws, xs))
    slope = 0.0
    if len(xs) >= 3 and sxx > 1e-9:
        slope = sum(w * (x - mx) * (y - my) for w, x, y in zip(ws, xs, ys)) / sxx
    intercept = my - slope * mx
    resid_sd = None
    if len(xs) >= 3:
        dof = len(xs) - (2 if slope else 1)
        rss = sum(w * (y - intercept - slope * x) ** 2 for w, x, y in zip(ws, xs, ys)) / total
        resid_sd = math.sqrt(rss * len(xs) / max(1, dof))
    return LineFit(intercept, slope, min(ys), max(ys), resid_sd)


# ------------------------------------------------------------------------------ recommendation
@dataclass
class Recommendation:
    """delta with its range, r, the difficulty they rest on, and why."""

    dataset: str
    delta: float
    low: float
    high: float
    warmup_ratio: float
    difficulty: Difficulty
    prior_delta: float
    fit_delta: float | None
    history_weight: float
    points: list[HistoryPoint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rationale: str = ""


def recommend(
    dataset: str,
    *,
    tracking_uri: str | None = None,
    data_dir: str | None = None,
    probe_options: dict[str, Any] | None = None,
) -> Recommendation:
    """Measure ``dataset``'s difficulty, fit the store's history and recommend delta and r.

    Raises ValueError for a dataset that is neither a registry name nor a folder.
    """
    dataset_name(dataset)  # an unknown name fails before anything is opened
    store = Store(tracking_uri)
    target = measure_difficulty(
        dataset, data_dir=data_dir, store=store, probe_options=probe_options
    )
    cache = {target.dataset: target}

    def difficulty_of(name: str, parent: "Run") -> Difficulty:
        if name not in cache:
            located = parent.data.tags.get(f"{BEST_TAG_PREFIX}dataset") or name
            folder = parent.data.tags.get(f"{BEST_TAG_PREFIX}data_dir") or data_dir
            try:
                cache[name] = measure_difficulty(
                    located, data_dir=folder, store=store, probe_options=probe_options
                )
            except (ValueError, OSError) as err:
                cache[name] = Difficulty(name, None, None, 0.0, notes=[str(err).splitlines()[0]])
        return cache[name]

    points, notes = history_points(store, difficulty_of)
    return _recommendation(target, points, notes)


def _recommendation(
    target: Difficulty, points: list[HistoryPoint], notes: list[str]
) -> Recommendation:
    d = target.value if target.value is not None else UNKNOWN_DIFFICULTY
    h = len(points) / (len(points) + HISTORY_SHRINK)
    delta_fit = r_fit = None
    fit_hw = NO_HISTORY_FIT_HALF_WIDTH
    if points:
        ws = [p.weight for p in points]
        xs = [p.difficulty for p in points]
        delta_fit = fit_line(xs, [p.delta for p in points], ws)
        r_fit = fit_line(xs, [p.warmup_ratio for p in points], ws)
        if delta_fit.resid_sd is not None:
            fit_hw = max(0.025, delta_fit.resid_sd)

    def curve(x: float) -> float:
        if delta_fit is None:
            return prior_delta(x)
        return h * delta_fit.predict(x) + (1 - h) * prior_delta(x)

    delta = curve(d)
    slope = (curve(min(1.0, d + 0.05)) - curve(max(0.0, d - 0.05))) / 0.1
    half = math.hypot(math.sqrt(h * fit_hw**2 + (1 - h) * PRIOR_HALF_WIDTH**2), slope * target.sd)
    delta, half = round(delta, 2), max(0.01, round(half, 2))
    r = prior_warmup(d) if r_fit is None else h * r_fit.predict(d) + (1 - h) * prior_warmup(d)
    rec = Recommendation(
        dataset=target.dataset,
        delta=delta,
        low=max(0.0, round(delta - half, 2)),
        high=min(1.0, round(delta + half, 2)),
        warmup_ratio=round(r * 20) / 20,
        difficulty=target,
        prior_delta=round(prior_delta(d), 3),
        fit_delta=None if delta_fit is None else round(delta_fit.predict(d), 3),
        history_weight=h,
        points=points,
        notes=notes,
    )
    rec.rationale = rationale(rec)
    return rec


def rationale(rec: Recommendation) -> str:
    """One paragraph: the evidence for the difficulty, the rule, the history, the result."""
    d = rec.difficulty
    if d.value is None:
        measured = (
            f"Nothing could be measured on {rec.dataset} ({'; '.join(d.notes)}), so it "
            f"counts as a medium task (difficulty {UNKNOWN_DIFFICULTY})."
        )
    else:
        pieces = "; ".join(e.describe() for e in d.evidence)
        measured = f"{rec.dataset} measures difficulty {d.describe()} from {pieces}."
    prior = (
        f"The paper's rule (delta about 0.35 for easy tasks, 0.3 for most, 0.2 for hard ones) "
        f"gives {rec.prior_delta:.2f} at this difficulty{_paper_context(rec.dataset)}."
    )
    if not rec.points:
        history = (
            "The MLflow store holds no search with finished AS-Softmax trials, so the "
            "recommendation is the paper prior alone."
        )
    else:
        seen = ", ".join(
            f"{p.experiment} (difficulty {p.difficulty:.2f}, best delta {p.delta:.2f})"
            for p in rec.points
        )
        which = "mostly the paper prior" if rec.history_weight < 0.5 else "mostly the history fit"
        history = (
            f"The store holds {len(rec.points)} search(es) with AS-Softmax trials: {seen}; "
            f"their fit gives {rec.fit_delta:.2f}, blended with weight "
            f"{rec.history_weight:.2f} against the prior's {1 - rec.history_weight:.2f} "
            f"({which})."
        )
    warm = (
        "a warm-up keeping delta = 1 for the first r of training, as the paper does for easy "
        "tasks with a high baseline"
        if rec.warmup_ratio > 0
        else "no warm-up (the paper uses one only for easy tasks with a high baseline)"
    )
    result = (
        f"Recommended: delta {rec.delta:.2f} (range {rec.low:.2f}-{rec.high:.2f}) and "
        f"r = {rec.warmup_ratio:.2f}, {warm}."
    )
    caveat = (
        "For multi-label tasks the rule is a weak guide: the paper used delta 0.05 on Eurlex "
        "and 0.35 on WOS-46985."
        if d.task == "multi_label"
        else ""
    )
    return " ".join(part for part in (measured, prior, history, result, caveat) if part)


def _paper_context(dataset: str) -> str:
    """What the paper itself said and used for a registry dataset."""
    from astune.data.registry import REGISTRY

    spec = REGISTRY.get(dataset)
    if spec is None or spec.delta is None:
        return ""
    said = f"calls {dataset} {spec.difficulty_hint} and " if spec.difficulty_hint else ""
    r = spec.warmup_ratio or 0.0
    return f" (the paper {said}trained {dataset} with delta {spec.delta:.2f}, r {r:.2f})"


# ------------------------------------------------------------------------------------ output
def format_recommendation(rec: Recommendation) -> str:
    """The CLI's report."""
    lines = [
        f"dataset:     {rec.dataset}",
        f"delta:       {rec.delta:.2f}  (range {rec.low:.2f} - {rec.high:.2f})",
        f"r:           {rec.warmup_ratio:.2f}  (delta = 1 for the first r of training)",
        f"difficulty:  {rec.difficulty.describe()}",
    ]
    lines += [f"  {e.describe()}" for e in rec.difficulty.evidence]
    lines += [f"  note: {n}" for n in rec.difficulty.notes]
    prior_share = 1 - rec.history_weight
    lines.append(
        f"history:     {len(rec.points)} search(es) with AS-Softmax trials; "
        f"prior weight {prior_share:.2f}, fit weight {rec.history_weight:.2f}"
    )
    lines += [
        f"  {p.experiment}: {p.dataset}, difficulty {p.difficulty:.2f}, best delta "
        f"{p.delta:.2f}, r {p.warmup_ratio:.2f} ({p.n_trials} AS trials"
        + (f"; confirmed over {p.confirmed_seeds} seeds)" if p.confirmed_seeds else ")")
        for p in rec.points
    ]
    lines += [f"  note: {n}" for n in rec.notes]
    lines.append("rationale:")
    lines.append(textwrap.fill(rec.rationale, 99, initial_indent="  ", subsequent_indent="  "))
    return "\n".join(lines)


def write_space(rec: Recommendation, dataset: str, path: str | Path) -> Path:
    """The dataset's search space with delta narrowed to the recommended range (and r to
    +-0.1 around its recommendation where the space searches it), written as YAML."""
    from astune.data.resolve import resolve_dataset
    from astune.space.space import load_space

    space = load_space(dataset=resolve_dataset(dataset).registry_name)
    task = rec.difficulty.task
    if task is not None:
        space = space.for_task(task)
    loss = "multilabel_as_softmax" if task == "multi_label" else "as_softmax"
    space = space.narrowed("delta", rec.low, rec.high, loss=loss)
    warm = space.loss_params.get(loss, {}).get("warmup_ratio")
    if warm is not None and warm.kind in ("float", "int"):
        r = rec.warmup_ratio
        low, high = round(max(0.0, r - 0.1), 2), round(min(1.0, r + 0.1), 2)
        space = space.narrowed("warmup_ratio", low, high, loss=loss)
    return _with_seed_point(space, loss, rec).dump(path)


def _with_seed_point(space: Any, loss: str, rec: Recommendation) -> Any:
    """The recommendation itself as the first config the search evaluates (when it lies on the
    space's grid)."""
    import dataclasses

    params = space.loss_params.get(loss, {})
    point: dict[str, Any] = {"loss": loss, "delta": rec.delta}
    if "warmup_ratio" in params and params["warmup_ratio"].contains(rec.warmup_ratio):
        point["warmup_ratio"] = rec.warmup_ratio
    if loss not in space.losses or not params["delta"].contains(rec.delta):
        return space
    return dataclasses.replace(space, points=(point, *space.points))


__all__ = [
    "HistoryPoint",
    "LineFit",
    "Recommendation",
    "dataset_name",
    "fit_line",
    "format_recommendation",
    "history_points",
    "measure_difficulty",
    "prior_delta",
    "prior_warmup",
    "recommend",
    "write_space",
]
