"""Loss/metric consistency (paper, Table "Pearson correlation coefficient between loss and
accuracy"): per loss function, how the validation loss tracks the validation metric.

The number per loss is the mean over its trials of each trial's Pearson r between ``val_loss``
and the primary metric across that trial's evaluations. Per trial, as the paper measures it on
one training run: pooling the evaluations of several trials would mix their hyperparameters
(a trial with another learning rate has another loss scale) into the correlation. Trials
whose r is undefined (a constant series, fewer than two evaluations) are left out of the mean
and counted; the pooled r is in the table for reference. -1 is ideal: the loss falls exactly
when the metric rises.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from astune.analysis import plots
from astune.analysis.study import StudyResult
from astune.metrics.scores import pearson
from astune.store.experiment import ExperimentRuns

NAME = "loss_metric_correlation"
TITLE = "Loss/metric consistency"
COLUMNS = ["loss", "trials", "trials_with_r", "evaluations", "r_mean", "r_pooled"]


def trial_series(runs: ExperimentRuns, run_id: str) -> tuple[np.ndarray, np.ndarray]:
    """(val_loss, objective) at the evaluations where the trial logged both."""
    pair = pd.concat(
        [runs.series(run_id, "val_loss"), runs.series(run_id, "objective")], axis=1, join="inner"
    ).sort_index()
    return pair["val_loss"].to_numpy(float), pair["objective"].to_numpy(float)


def correlation_data(runs: ExperimentRuns) -> dict[str, Any]:
    """``table``: a row per loss (``COLUMNS``); ``per_trial``: {loss: {run_id: r}};
    ``series``: {loss: {run_id: (val_loss values, metric values)}}."""
    trials = runs.finished()
    multi = trials["dataset"].nunique() > 1
    rows, per_trial, series = [], {}, {}
    for key, group in trials.groupby(_group_key(trials, multi), sort=True):
        series[key] = {rid: trial_series(runs, rid) for rid in group["run_id"]}
        per_trial[key] = {rid: pearson(x, y) for rid, (x, y) in series[key].items()}
        rows.append(_row(key, series[key], per_trial[key]))
    return {"table": pd.DataFrame(rows, columns=COLUMNS), "per_trial": per_trial, "series": series}


def _group_key(trials: pd.DataFrame, multi: bool) -> pd.Series:
    if not multi:
        return trials["loss"]
    return trials["loss"] + " (" + trials["dataset"] + ")"


def _row(key: str, series: dict, rs: dict[str, float]) -> dict[str, Any]:
    defined = [r for r in rs.values() if math.isfinite(r)]
    xs = np.concatenate([x for x, _ in series.values()]) if series else np.zeros(0)
    ys = np.concatenate([y for _, y in series.values()]) if series else np.zeros(0)
    return {
        "loss": key,
        "trials": len(rs),
        "trials_with_r": len(defined),
        "evaluations": len(xs),
        "r_mean": float(np.mean(defined)) if defined else float("nan"),
        "r_pooled": pearson(xs, ys),
    }


def markdown_table(table: pd.DataFrame) -> str:
    """The table as markdown; an undefined r is shown as ``nan``."""
    head = (
        "| loss | trials (with r) | evaluations | Pearson r, mean per trial | "
        "Pearson r, pooled |\n|---|---:|---:|---:|---:|"
    )
    lines = [
        f"| {row.loss} | {row.trials} ({row.trials_with_r}) | {row.evaluations} | "
        f"{_fmt(row.r_mean)} | {_fmt(row.r_pooled)} |"
        for row in table.itertuples()
    ]
    return "\n".join([head, *lines])


def _fmt(value: float) -> str:
    return "nan" if not math.isfinite(value) else f"{value:+.3f}"


def loss_metric_correlation(runs: ExperimentRuns, out_dir: Path) -> StudyResult:
    """Draw ``loss_metric_correlation.png``; the data is :func:`correlation_data`."""
    data = correlation_data(runs)
    result = StudyResult(NAME, TITLE, _caption(runs), data)
    table = data["table"]
    if table.empty:
        result.notes.append("no finished trial in this search: nothing to correlate")
        return result
    result.table = markdown_table(table)
    undefined = table.loc[table["trials_with_r"] == 0, "loss"].tolist()
    if undefined:
        result.notes.append(
            f"r is undefined (nan) for {', '.join(undefined)}: every trial's loss or metric "
            "was constant or it had fewer than two evaluations"
        )
    result.image = _draw(data, out_dir / f"{NAME}.png")
    return result


def _caption(runs: ExperimentRuns) -> str:
    metric = sorted(set(runs.finished()["metric"]) - {"objective"}) or ["objective"]
    return (
        "Pearson correlation between the validation loss and the validation metric "
        f"({', '.join(metric)}) "
        "over the evaluations of each trial, averaged over the trials of each loss (bars; dots: "
        "single trials). -1 is ideal (the loss falls exactly when the metric rises); near 0 or "
        "positive means the loss does not track the metric (the paper's train-test mismatch)."
    )


def _draw(data: dict[str, Any], path: Path) -> Path:
    table = data["table"]
    colors = plots.loss_colors(k.split(" (")[0] for k in table["loss"])
    figure, (ax,) = plots.new_figure(width=max(5.0, 1.3 * len(table) + 2.5))
    dot_label = "one trial"
    for i, row in enumerate(table.itertuples()):
        color = colors[row.loss.split(" (")[0]]
        if math.isfinite(row.r_mean):
            ax.bar(i, row.r_mean, color=color, alpha=0.75, width=0.6)
            ax.annotate(
                f"{row.r_mean:+.2f}",
                (i + 0.32, row.r_mean),
                ha="left",
                va="center",
                fontsize="small",
            )  # beside the bar: the trial dots sit at its end
        else:
            ax.annotate("nan", (i, 0.0), ha="center", va="bottom", fontsize="small")
        rs = [r for r in data["per_trial"][row.loss].values() if math.isfinite(r)]
        if rs:
            ax.scatter([i] * len(rs), rs, color="black", s=14, zorder=3, label=dot_label)
            dot_label = None
    ax.axhline(0.0, color="gray", linewidth=0.8)
    ax.set_xticks(range(len(table)), list(table["loss"]))
    ax.set_ylim(-1.1, 1.1)
    ax.set_xlim(-0.6, len(table) - 0.1)
    ax.set_xlabel("loss function")
    ax.set_ylabel("Pearson r (val_loss, metric)")
    ax.set_title("Validation loss against metric: Pearson r per loss")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small", loc="best")
    return plots.save(figure, path)
