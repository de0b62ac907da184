"""How hard a task is, measured: the softmax probe and the softmax baselines recorded in MLflow.

Each piece of evidence is a score relative to chance, ``s = (metric - chance) / (1 - chance)``
clipped to [0, 1], with chance the majority baseline (``astune.data.majority_baseline``) on the
probe's validation slice. The difficulty is one minus their weighted mean::

    difficulty = 1 - sum_i(w_i * s_i) / sum_i(w_i)

- the probe (:mod:`astune.history.probe`): weight 1;
- the best finished ``softmax`` trial of the dataset in MLflow: weight
  ``2 * min(1, samples_seen / 5000)``: a fine-tuned run that saw 5,000 examples counts twice the
  probe; a tiny run counts in proportion to what it saw.

Its uncertainty ``sd`` adds the evidence's own noise (the binomial error of the probe's
validation slice; 0.05 for an MLflow score) and the spread between the pieces of evidence.
A probe result is stored as tag ``astune.probe`` (JSON) on the dataset's search runs, with the
difficulty as tag ``astune.difficulty``, so that later recommendations reuse it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from astune._text import counted
from astune.history.probe import ProbeResult, normalized, run_probe
from astune.store.reader import (
    SOFTMAX_LOSSES,
    Store,
    best_trial,
    dataset_of,
    finished_trials,
    objective,
)

if TYPE_CHECKING:
    from mlflow.entities import Run

logger = logging.getLogger(__name__)

PROBE_TAG = "astune.probe"
DIFFICULTY_TAG = "astune.difficulty"
FULL_WEIGHT_SAMPLES = 5000
MLFLOW_WEIGHT = 2.0
MLFLOW_SCORE_SE = 0.05


@dataclass
class Evidence:
    """One measurement: ``value`` of ``metric`` against ``chance``, counted with ``weight``."""

    source: str  # "probe" or "mlflow"
    metric: str
    value: float
    chance: float
    weight: float
    se: float
    detail: str

    @property
    def score(self) -> float:
        return normalized(self.value, self.chance)

    def describe(self) -> str:
        return (
            f"{self.source}: {self.metric} {self.value:.3f} vs chance {self.chance:.3f} "
            f"-> {self.score:.2f} (weight {self.weight:.2f}; {self.detail})"
        )


@dataclass
class Difficulty:
    """A task's difficulty in [0, 1] (1 = hard), ``None`` when nothing could be measured."""

    dataset: str
    task: str | None
    value: float | None
    sd: float
    evidence: list[Evidence] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.value is None:
            return "unknown (no evidence could be measured)"
        return f"{self.value:.2f} +- {self.sd:.2f} (1 = hard)"


def combine(
    dataset: str, task: str | None, evidence: list[Evidence], notes: list[str]
) -> Difficulty:
    """The module docstring's formula over ``evidence``."""
    total = sum(e.weight for e in evidence)
    if not evidence or total <= 0:
        return Difficulty(dataset, task, None, 0.25, evidence, notes)
    mean = sum(e.weight * e.score for e in evidence) / total
    noise = math.sqrt(sum((e.weight * e.se) ** 2 for e in evidence)) / total
    spread = math.sqrt(sum(e.weight * (e.score - mean) ** 2 for e in evidence) / total)
    return Difficulty(dataset, task, 1.0 - mean, math.hypot(noise, spread), evidence, notes)


def dataset_name(dataset: str) -> str:
    """The name runs are tagged with: the registry name, or a folder's own name (the one
    precedence of :func:`astune.data.resolve.resolve_dataset`)."""
    from astune.data.resolve import resolve_dataset

    return resolve_dataset(dataset).name


def measure_difficulty(
    dataset: str,
    *,
    data_dir: str | None = None,
    tracking_uri: str | None = None,
    store: Store | None = None,
    probe_options: dict[str, Any] | None = None,
    reuse_stored: bool = True,
) -> Difficulty:
    """Measure ``dataset`` (a registry name or a folder with dataset.json).

    The probe runs unless ``reuse_stored`` and a probe result with the same options is stored
    on one of the dataset's search runs; the softmax baseline comes from the MLflow store.
    """
    store = store or Store(tracking_uri)
    name = dataset_name(dataset)
    options = dict(probe_options or {})
    notes: list[str] = []
    probe = stored_probe(store, name, options) if reuse_stored else None
    if probe is None:
        try:
            probe = run_probe(dataset, data_dir=data_dir, **options)
            notes.append(f"probe measured now ({probe.seconds:.0f} s)")
        except (ValueError, OSError) as err:
            notes.append(f"probe failed: {str(err).splitlines()[0]}")
    else:
        notes.append(f"probe result reused from MLflow tag {PROBE_TAG}")
    evidence = [_probe_evidence(probe)] if probe is not None else []
    baseline = softmax_evidence(store, name, probe)
    if baseline is not None:
        evidence.append(baseline)
    difficulty = combine(name, probe.task if probe else None, evidence, notes)
    if probe is not None:
        save_probe(store, name, probe, options, difficulty)
    return difficulty


def _probe_evidence(probe: ProbeResult) -> Evidence:
    detail = (
        f"linear softmax probe on frozen {probe.backbone} ({probe.num_layers} layers), "
        f"{probe.n_train} train / {probe.n_eval} validation examples"
    )
    return Evidence("probe", probe.metric, probe.value, probe.chance, 1.0, probe.score_se, detail)


def softmax_evidence(store: Store, name: str, probe: ProbeResult | None) -> Evidence | None:
    """The best finished softmax trial of dataset ``name`` in the store, if any."""
    if probe is None or not store.exists:
        return None
    trials = finished_trials(store.dataset_trials(name), SOFTMAX_LOSSES)
    if not trials:
        return None
    best = best_trial(trials, "max")  # the dataset's primary metric: higher is better
    seen = best.data.metrics.get("samples_seen") or 0.0
    weight = MLFLOW_WEIGHT * min(1.0, seen / FULL_WEIGHT_SAMPLES)
    experiment = store.experiment_name(best.info.experiment_id)
    detail = (
        f"best of {counted(len(trials), 'softmax trial')} in MLflow, search {experiment!r}, "
        f"{seen:.0f} examples seen"
    )
    return Evidence(
        "mlflow", probe.metric, objective(best), probe.chance, weight, MLFLOW_SCORE_SE, detail
    )


def _searches_of(store: Store, name: str) -> list["Run"]:
    if not store.exists:
        return []
    return [run for run in store.searches() if dataset_of(run) == name]


def stored_probe(store: Store, name: str, options: dict[str, Any]) -> ProbeResult | None:
    """A probe result stored on a search run of ``name`` with the same probe options."""
    for run in _searches_of(store, name):
        raw = run.data.tags.get(PROBE_TAG)
        if not raw:
            continue
        try:
            stored = json.loads(raw)
            if stored.pop("options", {}) == options:
                return ProbeResult(**stored)
        except (ValueError, TypeError):
            continue
    return None


def save_probe(
    store: Store, name: str, probe: ProbeResult, options: dict[str, Any], difficulty: Difficulty
) -> None:
    """Tag the dataset's search runs with the probe and the difficulty; a store that refuses
    (read-only server) only costs a later re-measurement."""
    from mlflow.exceptions import MlflowException

    value = json.dumps({**dataclasses.asdict(probe), "options": options})
    for run in _searches_of(store, name):
        try:
            store.client.set_tag(run.info.run_id, PROBE_TAG, value)
            if difficulty.value is not None:
                store.client.set_tag(run.info.run_id, DIFFICULTY_TAG, f"{difficulty.value:.4f}")
        except MlflowException as err:
            logger.warning("could not tag run %s: %s", run.info.run_id, str(err).splitlines()[0])
            return
