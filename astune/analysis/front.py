"""The Pareto front of a multi-objective search, and what drives each objective.

The front is the one `search` stored (:mod:`astune.store.pareto`: the trials that ran to the
end, none beaten on every objective). The importances are Optuna's fANOVA, once per objective,
over the same finished trials: which parameter moves the metric, which moves the cost.
"""

from __future__ import annotations

from pathlib import Path

from astune.analysis.importance import importances_of
from astune.analysis.plots import new_figure, save
from astune.analysis.study import StudyResult
from astune.metrics.objectives import modes
from astune.store.conventions import PARENT_TAG, ROLE_TAG
from astune.store.experiment import ExperimentRuns
from astune.store.pareto import FrontPoint, finished_points, pareto_front, search_objectives
from astune.store.pareto_plot import draw_front

IMAGE = "pareto.png"


def pareto(runs: ExperimentRuns, out_dir: Path) -> StudyResult:
    """The newest search's front (metric against the first cost) and, per objective, the
    parameters' fANOVA importances."""
    result = StudyResult(
        "pareto",
        "Pareto front and importances per objective",
        "Left: every trial that ran to the end, the metric against the first cost (marker: "
        "loss, colour: AS-Speed/AS-Skip); the circled trials form the Pareto front. Right: the "
        "share of each objective's variance that each parameter explains (Optuna's fANOVA).",
    )
    if runs.parent_run_id is None:
        result.notes.append("no search run in this experiment")
        return result
    parent = runs.client.get_run(runs.parent_run_id)
    objectives = search_objectives(parent)
    if len(objectives) < 2:
        result.notes.append(
            "a single-objective search: run it with --objectives objective,train_seconds "
            "for a Pareto front"
        )
        return result
    points = finished_points(_trial_runs(runs), objectives)
    if not points:
        result.notes.append("no trial ran to the end with every objective")
        return result
    front = pareto_front(points, objectives, runs.mode)
    directions = modes(objectives, runs.mode)
    importances = {
        name: found
        for name, direction in zip(objectives, directions)
        if (found := importances_of([(p.params, p.values[name]) for p in points], direction))
    }
    result.data = {
        "front": [(p.trial_id, dict(p.values)) for p in front],
        "importance": importances,
    }
    result.table = _table(front, objectives)
    result.image = _plot(points, front, objectives, importances, out_dir / IMAGE)
    return result


def _trial_runs(runs: ExperimentRuns) -> list:
    """The MLflow runs of the newest search's trials among ``runs.trials``."""
    query = f"tags.`{PARENT_TAG}` = '{runs.parent_run_id}' and tags.`{ROLE_TAG}` = 'trial'"
    found = runs.client.search_runs([runs.experiment_id], query, max_results=10000)
    given = set(runs.trials["run_id"]) if "run_id" in runs.trials else set()
    return [run for run in found if run.info.run_id in given]


def _table(front: list[FrontPoint], objectives: tuple[str, ...]) -> str:
    lines = ["| trial | loss | AS-Speed | AS-Skip | " + " | ".join(objectives) + " |"]
    lines.append("|---|---|---|---|" + "---:|" * len(objectives))
    for p in front:
        flags = ["on" if p.flag(f) else "off" for f in ("as_speed", "as_skip")]
        values = [f"{p.values[n]:.4g}" for n in objectives]
        lines.append("| " + " | ".join([p.trial_id, p.loss, *flags, *values]) + " |")
    return "\n".join(lines)


def _plot(
    points: list[FrontPoint],
    front: list[FrontPoint],
    objectives: tuple[str, ...],
    importances: dict[str, dict[str, float]],
    path: Path,
) -> Path:
    figure, axes = new_figure(columns=2)
    draw_front(axes[0], points, front, objectives)
    names = sorted({k for found in importances.values() for k in found})
    height = 0.8 / max(1, len(importances))
    for i, (objective, found) in enumerate(importances.items()):
        rows = [j + i * height for j in range(len(names))]
        axes[1].barh(rows, [found.get(n, 0.0) for n in names], height=height, label=objective)
    axes[1].set_yticks([j + 0.4 - height / 2 for j in range(len(names))], names)
    axes[1].set_xlabel("importance (fANOVA)")
    axes[1].set_title("importance per objective")
    if importances:
        axes[1].legend(fontsize="small")
    return save(figure, path)
