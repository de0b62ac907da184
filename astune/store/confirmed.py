"""The confirm runs of a search, grouped by the config they re-run: what `export`, `recommend`,
`report` and `confirm` itself read back (MLflow only, no Ray, no statistics)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from astune._text import value_text
from astune.store.conventions import CONFIRM_BASELINE, CONFIRMS_TAG, CONVENTION_PARAMS
from astune.store.reader import Store, param, trial_id

if TYPE_CHECKING:
    from mlflow.entities import Run

TIME_METRIC = "train_seconds"


@dataclass
class ConfirmedConfig:
    """One config re-run over seeds: its FINISHED confirm runs' best objective and training
    time (seconds) per seed, and the newest run (its params are the config)."""

    confirms: str  # the trial run id it re-runs, or CONFIRM_BASELINE
    label: str
    run: "Run"
    objectives: dict[int, float] = field(default_factory=dict)
    train_seconds: dict[int, float] = field(default_factory=dict)
    trial_id: str = ""  # the name of the trial it re-runs (:func:`trial_id`); "" for the baseline

    @property
    def name(self) -> str:
        """How tables name it: ``trial <trial id>`` (the trial's one name: the live and front
        tables show it too), ``baseline``, or ``run <run id>`` when the trial run is gone."""
        if self.is_baseline:
            return CONFIRM_BASELINE
        return f"trial {self.trial_id}" if self.trial_id else f"run {self.confirms}"

    @property
    def is_baseline(self) -> bool:
        return self.confirms == CONFIRM_BASELINE

    @property
    def seeds(self) -> list[int]:
        return sorted(self.objectives)

    @property
    def mean(self) -> float:
        """The mean best objective over the seeds."""
        return math.fsum(self.objectives.values()) / len(self.objectives)


def config_label(run: "Run") -> str:
    """A short name of a run's config: ``as_softmax delta=0.3 as_speed as_skip``."""
    parts = [str(param(run, "loss"))]
    delta = param(run, "delta")
    if delta is not None:
        parts.append(f"delta={delta:g}")
    parts += [name for name in ("as_speed", "as_skip") if param(run, name) is True]
    return " ".join(parts)


def confirmed_configs(store: Store, parent: "Run") -> list[ConfirmedConfig]:
    """The configs confirmed under the search ``parent``, in the order first confirmed (the
    baseline last); only FINISHED runs with a finite ``best_objective`` count, and of two runs
    of one config and seed the newest. Each is named by the trial it re-runs (its
    ``astune.trial_id``, read from the trial runs in one query)."""
    runs = store.confirm_runs(parent.info.run_id, [parent.info.experiment_id])
    groups: dict[str, ConfirmedConfig] = {}
    for run in sorted(runs, key=lambda r: r.info.start_time or 0):
        value = run.data.metrics.get("best_objective")
        seed = param(run, "seed")
        if run.info.status != "FINISHED" or value is None or not math.isfinite(value):
            continue
        confirms = run.data.tags.get(CONFIRMS_TAG, "")
        group = groups.setdefault(confirms, ConfirmedConfig(confirms, config_label(run), run))
        group.run = run
        group.objectives[int(seed)] = value
        group.train_seconds[int(seed)] = run.data.metrics.get(TIME_METRIC, math.nan)
    confirmed = [c for c in groups if c != CONFIRM_BASELINE]
    trials = store.runs_by_id(confirmed, parent.info.experiment_id)
    for confirms, group in groups.items():
        if confirms in trials:
            group.trial_id = trial_id(trials[confirms])
    ordered = [g for g in groups.values() if not g.is_baseline]
    return told_apart(ordered + [g for g in groups.values() if g.is_baseline])


def told_apart(configs: list[ConfirmedConfig]) -> list[ConfirmedConfig]:
    """``configs`` whose labels two or more share, each label lengthened by the params in
    which those configs differ (``as_softmax delta=0.2 lr=0.0003``; the seed aside): a table
    of twins says what tells them apart."""
    by_label: dict[str, list[ConfirmedConfig]] = {}
    for config in configs:
        by_label.setdefault(config.label, []).append(config)
    for twins in (group for group in by_label.values() if len(group) > 1):
        params = [c.run.data.params for c in twins]
        keys = sorted({k for p in params for k in p} - {"seed"}, key=_label_order)
        differ = [k for k in keys if len({p.get(k) for p in params}) > 1]
        for config in twins:
            extra = [f"{k}={value_text(param(config.run, k))}" for k in differ]
            config.label = " ".join([config.label, *extra])
    return configs


def _label_order(key: str) -> tuple[int, str]:
    """The convention params first (delta, warmup_ratio, lr, ...), in their order; then A-Z."""
    order = CONVENTION_PARAMS.index(key) if key in CONVENTION_PARAMS else len(CONVENTION_PARAMS)
    return order, key


def confirmed_winner(configs: list[ConfirmedConfig], mode: str = "max") -> ConfirmedConfig | None:
    """The config with the best mean objective over at least two seeds (``mode``: max or min)."""
    candidates = [c for c in configs if len(c.objectives) >= 2]
    if not candidates:
        return None
    sign = -1.0 if mode == "min" else 1.0
    return max(candidates, key=lambda c: sign * c.mean)


def tied_with(configs: list[ConfirmedConfig], winner: ConfirmedConfig) -> list[ConfirmedConfig]:
    """The other configs confirmed over at least two seeds whose mean equals ``winner``'s (the
    winner is then only the first of them in ``configs``' order)."""
    return [
        c
        for c in configs
        if c is not winner and len(c.objectives) >= 2 and math.isclose(c.mean, winner.mean)
    ]
