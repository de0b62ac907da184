"""`astune recommend`: delta, r and the delta schedule for a dataset from its measured
difficulty and the store's history, and what the best trials of similar tasks (the store's and
the packaged prior's) transfer of the other keys (the package docstring says how)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astune.config import TRAIN_FIELDS
from astune.history.difficulty import Difficulty, dataset_name, measure_difficulty
from astune.history.portfolio_sources import search_portfolio, shipped_space
from astune.history.reference import PRIOR_FILE, load_reference
from astune.history.transfer import HISTORY_SHRINK, TaskProfile, advise, weight_bound
from astune.history.trial_history import store_trials
from astune.recommendation.delta_history import HistoryPoint, fit_line, history_points
from astune.recommendation.prior import (
    PRIOR_HALF_WIDTH,
    UNKNOWN_DIFFICULTY,
    prior_delta,
    prior_warmup,
)
from astune.recommendation.report import rationale
from astune.recommendation.result import Recommendation
from astune.recommendation.schedules import ScheduleAdvice, schedule_advice
from astune.store.conventions import BEST_TAG_PREFIX
from astune.store.reader import Store, finished_trials
from astune.store.snapshot import StoreSnapshot

if TYPE_CHECKING:
    from mlflow.entities import Run

NO_HISTORY_FIT_HALF_WIDTH = 0.1  # the spread of a fit through fewer than 3 points is unknown


def recommend(
    dataset: str,
    *,
    tracking_uri: str | None = None,
    data_dir: str | None = None,
    probe_options: dict[str, Any] | None = None,
    backbone: str | None = None,
    num_layers: int | None = None,
    train_size: int | None = None,
    max_length: int | None = None,
    reference: str | Path | None = PRIOR_FILE,
) -> Recommendation:
    """Measure ``dataset``'s difficulty, fit the store's history and recommend delta and r;
    transfer the other keys from the best trials of similar tasks.

    ``backbone`` (default: the dataset's default), ``num_layers``, ``train_size`` (default:
    the dataset's training rows) and ``max_length`` (default: a search's) describe the search
    to come; ``reference`` is the file of
    reference trials beside the store's (the packaged prior; None: the store's alone).
    Raises ValueError for a dataset that is neither a registry name nor a folder, or a
    reference file that cannot be read.
    """
    dataset_name(dataset)  # an unknown name fails before anything is opened
    store = StoreSnapshot(Store(tracking_uri))  # four modules ask it: one read serves them
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

    prior = load_reference(reference) if reference is not None else []
    points, notes = history_points(store, difficulty_of)
    d = target.value if target.value is not None else UNKNOWN_DIFFICULTY
    rec = _recommendation(target, points, notes, schedule_advice(store, points, d))
    profile = TaskProfile(
        difficulty=target.value,
        task=target.task,
        train_size=train_size or train_rows(dataset, data_dir, rec.notes),
        backbone=backbone or _default_backbone(dataset),
        num_layers=num_layers,
        max_length=max_length or TRAIN_FIELDS["max_length"].default,
    )
    rec.transfer = advise(profile, [*store_trials(store, difficulty_of), *prior])
    space = shipped_space(dataset, target.task)
    found = search_portfolio(profile, space, store=store, reference=reference)
    rec.portfolio, rec.portfolio_scale = found.entries, found.scale
    rec.backbone = profile.backbone
    return rec


def probe_options(
    *, validation_fraction: float | None = None, backbone: str | None = None
) -> dict[str, Any] | None:
    """The probe's options for :func:`recommend` from a command's flags (None: the defaults)."""
    options: dict[str, Any] = {}
    if validation_fraction is not None:
        options["validation_fraction"] = validation_fraction
    if backbone is not None:
        options["backbone"] = backbone
    return options or None


def nothing_to_learn(
    dataset: str,
    *,
    tracking_uri: str | None = None,
    reference: str | Path | None = PRIOR_FILE,
    data_dir: str | None = None,
    backbone: str | None = None,
    num_layers: int | None = None,
    train_size: int | None = None,
) -> str | None:
    """Why :func:`recommend` would learn nothing worth probing ``dataset`` for (one line), or
    None when it would. Nothing: no finished trial in the store, and reference trials (its
    other arguments as :func:`recommend`'s) that could weigh less than
    :data:`~astune.recommendation.warm_space.PROBE_MIN_WEIGHT` whatever difficulty the probe
    measured (none at all: the paper's rule for delta, which gives way to a space's own seed
    values). A warm start then searches the space as given without probing the dataset."""
    from astune.recommendation.warm_space import PROBE_MIN_WEIGHT

    if finished_trials(Store(tracking_uri).trials()):
        return None
    trials = load_reference(reference) if reference is not None else []
    if not trials:
        return "no finished trials in the store, no reference trials"
    notes: list[str] = []
    profile = TaskProfile(
        difficulty=None,
        task=dataset_task(dataset, data_dir),
        train_size=train_size or train_rows(dataset, data_dir, notes),
        backbone=backbone or _default_backbone(dataset),
        num_layers=num_layers,
    )
    if profile.task is None:  # no bound without the task's family: the probe will tell
        return None
    bound = weight_bound(profile, trials)
    if bound >= PROBE_MIN_WEIGHT:
        return None
    return (
        f"no finished trials in the store; the reference trials could weigh at most "
        f"{bound:.3f} < {PROBE_MIN_WEIGHT} for a {profile.task} task of "
        f"{profile.train_size or 'unknown'} rows on {profile.backbone}"
    )


def dataset_task(dataset: str, data_dir: str | None) -> str | None:
    """The dataset's task family before any probe: the registry's, or a folder's spec."""
    from astune.data import load_dataset_splits
    from astune.data.resolve import resolve_dataset

    spec = resolve_dataset(dataset).spec
    if spec is None:
        try:
            spec = load_dataset_splits(
                dataset, data_dir=data_dir, max_train_samples=1, max_eval_samples=1
            ).spec
        except (ValueError, OSError):
            return None
    return spec.task


def _default_backbone(dataset: str) -> str:
    """The backbone a search of ``dataset`` runs when none is given."""
    from astune.backbones.registry import DEFAULT_BACKBONE
    from astune.data.resolve import default_backbone, resolve_dataset

    return default_backbone(DEFAULT_BACKBONE, resolve_dataset(dataset).spec)


def train_rows(dataset: str, data_dir: str | None, notes: list[str]) -> int | None:
    """The dataset's training rows (None, with a note, where it cannot be read)."""
    from astune.data import load_dataset_splits

    try:
        data = load_dataset_splits(dataset, data_dir=data_dir, max_eval_samples=1)
    except (ValueError, OSError) as err:
        notes.append(f"training rows unknown: {str(err).splitlines()[0]}")
        return None
    return len(data.splits["train"])


def _recommendation(
    target: Difficulty,
    points: list[HistoryPoint],
    notes: list[str],
    schedule: ScheduleAdvice,
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
        fit_warmup_ratio=None if r_fit is None else round(r_fit.predict(d), 3),
        history_weight=h,
        schedule=schedule,
        points=points,
        notes=notes,
    )
    rec.rationale = rationale(rec)
    return rec
