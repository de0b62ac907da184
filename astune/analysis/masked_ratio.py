"""Masked samples over training: the share of training samples whose every non-target class
AS-Softmax masked (``masked_ratio``, per evaluation window), one line per AS-Softmax trial; for
AS-Skip trials also the share of samples skipped (``skipped_ratio``), dashed."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from astune.analysis import plots
from astune.analysis.study import StudyResult, absent
from astune.losses.catalogue import AS_LOSSES
from astune.store.conventions import SKIPPED_RATIO
from astune.store.experiment import ExperimentRuns

NAME = "masked_ratio"
TITLE = "Masked samples over training"


def masked_data(runs: ExperimentRuns) -> dict[str, Any]:
    """``series``: {run_id: [(x, masked_ratio)]}, x the samples seen at each evaluation (the
    evaluation index when a trial did not log ``samples_seen``); ``labels``: {run_id: legend};
    ``best``: the run id of the best trial; ``x``: what x is; ``skipped``: {run_id: [(x,
    skipped_ratio)]} for the trials that ran AS-Skip."""
    trials = runs.finished(AS_LOSSES)
    series, skipped, labels, by_index = {}, {}, {}, False
    for row in trials.itertuples():
        ratio = runs.series(row.run_id, "masked_ratio").sort_index()
        seen = runs.series(row.run_id, "samples_seen").reindex(ratio.index)
        by_index |= bool(seen.isna().any())
        series[row.run_id] = [(float(x), float(y)) for x, y in zip(seen, ratio)]
        skip = runs.series(row.run_id, SKIPPED_RATIO).reindex(ratio.index)
        if skip.notna().any():
            skipped[row.run_id] = [(float(x), float(y)) for x, y in zip(seen, skip)]
        labels[row.run_id] = _label(row)
    x = "evaluation" if by_index else "samples seen"
    if by_index:  # one x for every line
        series, skipped = (
            {rid: [(float(i), y) for i, (_, y) in enumerate(pts)] for rid, pts in lines.items()}
            for lines in (series, skipped)
        )
    best = trials["run_id"].iloc[0] if len(trials) else None
    return {"series": series, "labels": labels, "best": best, "x": x, "skipped": skipped}


def _label(row: Any) -> str:
    delta = f"delta={row.delta:g}" if math.isfinite(row.delta) else "delta=?"
    return f"{row.name} ({delta}, best {row.best_objective:.4g})"


def masked_ratio(runs: ExperimentRuns, out_dir: Path) -> StudyResult:
    """Draw ``masked_ratio.png``; the data is :func:`masked_data`."""
    data = masked_data(runs)
    result = StudyResult(NAME, TITLE, _caption(data), data)
    if not data["series"]:
        result.notes.append(absent(runs.trials, AS_LOSSES, "AS-Softmax"))
        return result
    result.image = _draw(data, out_dir / f"{NAME}.png")
    return result


def _caption(data: dict[str, Any]) -> str:
    return (
        f"Share of the training samples masked by AS-Softmax (every non-target class dropped: "
        f"p_t exceeds each other class by more than delta) in each window between evaluations, "
        f"against the {data['x']}; one line per AS-Softmax trial, the best trial thick. A rising "
        "share is what AS-Speed turns into larger accumulation steps. Dashed: the share of "
        "samples AS-Skip left out of the forward/backward pass (AS-Skip trials)."
    )


def _draw(data: dict[str, Any], path: Path) -> Path:
    figure, (ax,) = plots.new_figure(width=7.2)
    others = [rid for rid in data["series"] if rid != data["best"]]
    many = len(others) > 8  # a legend entry per trial would hide the plot
    for i, rid in enumerate(others):
        label = (
            data["labels"][rid]
            if not many
            else (f"other trials ({len(others)})" if i == 0 else None)
        )
        ax.plot(
            *zip(*data["series"][rid]),
            marker="o",
            markersize=3,
            linewidth=1.0,
            alpha=0.55,
            color="gray" if many else f"C{(i % 9) + (i % 9 >= 3)}",
            label=label,
        )
    best = data["best"]
    ax.plot(
        *zip(*data["series"][best]),
        marker="o",
        linewidth=2.8,
        color="C3",
        zorder=4,
        label=f"best: {data['labels'][best]}",
    )
    _draw_skipped(ax, data)
    ax.set_xlabel(data["x"])
    ax.set_ylabel("masked ratio (share of training samples)")
    ax.set_ylim(bottom=0.0)
    ax.set_title("AS-Softmax: masked samples over training")
    ax.legend(fontsize="x-small", loc="best")
    return plots.save(figure, path)


def _draw_skipped(ax: Any, data: dict[str, Any]) -> None:
    """AS-Skip trials: the skipped share, dashed, in the colour of the trial's own line."""
    colours = {line.get_label(): line.get_color() for line in ax.get_lines()}
    for i, (rid, points) in enumerate(data.get("skipped", {}).items()):
        label = "best: " + data["labels"][rid] if rid == data["best"] else data["labels"][rid]
        ax.plot(
            *zip(*points),
            linestyle="--",
            linewidth=1.4,
            color=colours.get(label, "black"),
            label="skipped (AS-Skip)" if i == 0 else None,
        )
