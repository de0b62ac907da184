"""Parameter importances of a search: Optuna's fANOVA evaluator over the finished trials.

The trials are read from MLflow (so any astune search has them, whatever Optuna storage it
used) and put in an in-memory Optuna study: each param the trials vary gets a distribution
spanning the values they took. Params that do not apply to every trial (``delta`` of a softmax
trial) drop out of the importances over all trials; the AS-Softmax trials get their own table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from astune.analysis.plots import new_figure, save
from astune.analysis.study import StudyResult
from astune.losses.catalogue import AS_LOSSES
from astune.store.experiment import ExperimentRuns
from astune.store.optuna_trials import distributions, frozen_trial

IMAGE = "param_importance.png"
SEED = 0  # fANOVA's forest is random: a fixed seed gives one answer per search


def param_importance(runs: ExperimentRuns, out_dir: Path) -> StudyResult:
    """Importances over every finished trial, and over the AS-Softmax trials alone."""
    result = StudyResult(
        "param_importance",
        "Parameter importances (Optuna fANOVA)",
        "Share of the objective's variance over the finished trials that each searched "
        f"parameter explains (Optuna's FanovaImportanceEvaluator, seed {SEED}); parameters "
        "that not every trial has (a loss's own) are ranked within the AS-Softmax trials.",
    )
    done = runs.finished()
    # fANOVA's forest depends on the order of its trials: the order the search started them
    fetched = sorted(
        ((runs.client.get_run(r), v) for r, v in _values(done)),
        key=lambda rv: (rv[0].info.start_time, rv[0].info.run_id),
    )
    trials = [(run.data.params, v) for run, v in fetched]
    groups = {"all trials": trials}
    as_trials = [(p, v) for p, v in trials if p.get("loss") in AS_LOSSES]
    if 0 < len(as_trials) < len(trials):
        groups["AS-Softmax trials"] = as_trials
    for name, group in groups.items():
        if len({v for _, v in group}) == 1:
            result.notes.append(f"{name}: every finished trial has the same objective")
            continue
        importances = importances_of(group, runs.mode)
        if importances is None:
            result.notes.append(f"{name}: fewer than 2 finished trials that differ in a parameter")
            continue
        result.data[name] = importances
    if result.data:
        result.table = _table(result.data)
        result.image = _plot(result.data, out_dir / IMAGE)
    return result


def _values(done: Any) -> list[tuple[str, float]]:
    return [(str(r), float(v)) for r, v in zip(done["run_id"], done["best_objective"])]


def importances_of(
    trials: list[tuple[dict[str, str], float]], mode: str
) -> dict[str, float] | None:
    """fANOVA importance (summing to 1) of each param the trials vary; None when fewer than two
    trials or no param varies."""
    import optuna

    if len(trials) < 2:
        return None
    dists = distributions([p for p, _ in trials])
    if not dists:
        return None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize" if mode == "min" else "maximize")
    study.add_trials([frozen_trial(params, dists, value) for params, value in trials])
    try:
        found = optuna.importance.get_param_importances(
            study, evaluator=optuna.importance.FanovaImportanceEvaluator(seed=SEED)
        )
    except (ValueError, RuntimeError):  # no parameter common to every trial
        return None
    return {k: float(v) for k, v in found.items()} or None


def _table(data: dict[str, dict[str, float]]) -> str:
    lines = ["| trials | parameter | importance |", "|---|---|---:|"]
    for group, importances in data.items():
        for key, value in importances.items():
            lines.append(f"| {group} | {key} | {value:.3f} |")
    return "\n".join(lines)


def _plot(data: dict[str, dict[str, float]], path: Path) -> Path:
    figure, axes = new_figure(columns=len(data))
    for ax, (group, importances) in zip(axes, data.items()):
        names = list(importances)[::-1]
        ax.barh(names, [importances[n] for n in names], color="C0")
        ax.set_xlim(0, max(1.0, max(importances.values())) if importances else 1.0)
        ax.set_xlabel("importance (fANOVA)")
        ax.set_title(group)
    return save(figure, path)
