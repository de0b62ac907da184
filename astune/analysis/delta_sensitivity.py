"""Impact of delta (paper, "Result Analysis"): the best objective of each AS-Softmax trial
against its delta, per dataset, with the best softmax trial as the baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from astune.analysis import plots
from astune.analysis.study import StudyResult, absent
from astune.losses.catalogue import AS_LOSSES, SOFTMAX_LOSSES
from astune.store.experiment import ExperimentRuns

NAME = "delta_sensitivity"
TITLE = "Impact of delta"


def delta_data(runs: ExperimentRuns) -> dict[str, Any]:
    """Per dataset: ``points`` [(delta, best objective)] of the finished AS-Softmax trials
    (``early``: whether the scheduler stopped each), ``means`` [(delta, mean)], ``baseline``
    (the best softmax objective; absent when the dataset has no finished softmax trial) and
    ``confirmed`` (where the search ran no softmax trial but ``confirm`` reran a softmax
    baseline: how many seeds, whose mean is then the ``baseline``)."""
    as_trials = runs.finished(AS_LOSSES)
    as_trials = as_trials[as_trials["delta"].notna()].sort_values("delta", kind="stable")
    softmax = runs.finished(SOFTMAX_LOSSES)
    reruns = runs.finished(SOFTMAX_LOSSES, confirms=True)
    data: dict[str, Any] = {"points": {}, "early": {}, "means": {}, "baseline": {}, "confirmed": {}}
    for dataset in sorted(
        set(as_trials["dataset"]) | set(softmax["dataset"]) | set(reruns["dataset"])
    ):
        own = as_trials[as_trials["dataset"] == dataset]
        if len(own):
            data["points"][dataset] = _pairs(own["delta"], own["best_objective"])
            data["early"][dataset] = [bool(e) for e in own["stopped_early"]]
            means = own.groupby("delta")["best_objective"].mean()
            data["means"][dataset] = _pairs(means.index, means)
        base = softmax[softmax["dataset"] == dataset]["best_objective"]
        seeds = reruns[reruns["dataset"] == dataset]["best_objective"]
        if len(base):
            data["baseline"][dataset] = float(base.iloc[0])  # finished() sorts best first
        elif len(seeds):  # one config over seeds: their mean, as confirm's table gives it
            data["baseline"][dataset] = float(seeds.mean())
            data["confirmed"][dataset] = len(seeds)
    return data


def _pairs(xs: Any, ys: Any) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in zip(xs, ys)]


def delta_sensitivity(runs: ExperimentRuns, out_dir: Path) -> StudyResult:
    """Draw ``delta_sensitivity.png``; the result's data is :func:`delta_data`."""
    data = delta_data(runs)
    metric = _metric_label(runs.finished(AS_LOSSES + SOFTMAX_LOSSES))
    result = StudyResult(NAME, TITLE, _caption(metric), data)
    if not data["points"]:
        result.notes.append(absent(runs.trials, AS_LOSSES, "AS-Softmax"))
    if not data["baseline"]:
        result.notes.append(absent(runs.trials, SOFTMAX_LOSSES, "softmax"))
    for dataset, seeds in data["confirmed"].items():
        result.notes.append(
            f"no softmax trial of {dataset} in this search; its baseline is confirm's softmax "
            f"rerun, the mean of its {seeds} seeds"
        )
    if data["points"] or data["baseline"]:
        result.image = _draw(data, metric, out_dir / f"{NAME}.png")
    return result


def _metric_label(trials: pd.DataFrame) -> str:
    metrics = sorted(set(trials["metric"]) - {"objective"})
    return f"objective ({', '.join(metrics)})" if metrics else "objective"


def _caption(metric: str) -> str:
    return (
        f"Best validation {metric} of each AS-Softmax trial against its delta (points; hollow: "
        "stopped early by the scheduler), the mean per delta (line) and the best softmax trial "
        "(dashed line). Too large a delta masks nothing and AS-Softmax becomes softmax; too "
        "small a delta discards useful classes."
    )


def _draw(data: dict[str, Any], metric: str, path: Path) -> Path:
    datasets = sorted(set(data["points"]) | set(data["baseline"]))
    figure, axes = plots.new_figure(columns=len(datasets))
    for ax, dataset in zip(axes, datasets):
        _draw_dataset(ax, data, dataset)
        ax.set_xlabel("delta")
        ax.set_ylabel(f"best {metric}")
        ax.set_title(f"{dataset}: best validation {metric.split(' ')[0]} against delta")
        ax.legend(fontsize="small", loc="best")
    return plots.save(figure, path)


def _draw_dataset(ax: Any, data: dict[str, Any], dataset: str) -> None:
    points = data["points"].get(dataset, [])
    early = data["early"].get(dataset, [])
    for stopped in (False, True):
        xy = [p for p, e in zip(points, early) if e == stopped]
        if xy:
            label = "AS-Softmax trial" + (" (stopped early)" if stopped else "")
            ax.scatter(
                *zip(*xy),
                s=40,
                label=label,
                edgecolors="C3",
                facecolors="none" if stopped else "C3",
                zorder=3,
            )
    means = data["means"].get(dataset)
    if means:
        ax.plot(*zip(*means), color="C3", alpha=0.6, label="AS-Softmax, mean per delta")
    if dataset in data["baseline"]:
        seeds = data["confirmed"].get(dataset)
        which = "best" if seeds is None else f"confirm's mean of {seeds} seeds"
        ax.axhline(
            data["baseline"][dataset],
            color="C0",
            linestyle="--",
            label=f"softmax, {which} ({data['baseline'][dataset]:.4g})",
        )
