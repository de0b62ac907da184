"""``pareto.png`` and the front on the parent run: the artifacts and tags of a
multi-objective search (:mod:`astune.store.pareto` computes the front)."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from astune.store.pareto import (
    PARETO_CSV,
    PARETO_PNG,
    PARETO_TAG,
    FrontPoint,
    write_front_csv,
)
from astune.store.writer import SearchTracker

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from mlflow.entities import Run

# AS-Speed / AS-Skip on or off: the colour of a point (its marker is its loss)
SPEED_COLORS = {
    (False, False): "C0",
    (True, False): "C1",
    (False, True): "C2",
    (True, True): "C3",
}
SPEED_LABELS = {
    (False, False): "plain",
    (True, False): "AS-Speed",
    (False, True): "AS-Skip",
    (True, True): "AS-Speed + AS-Skip",
}
MARKERS = "osD^vP*X<>"


def plot_front(
    points: Sequence[FrontPoint],
    front_points: Sequence[FrontPoint],
    objectives: Sequence[str],
    path: Path,
) -> None:
    """:func:`draw_front` alone in a PNG at ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 4.4), dpi=100)
    FigureCanvasAgg(figure)  # no pyplot: no global backend or figure state
    draw_front(figure.add_subplot(), points, front_points, objectives)
    figure.tight_layout()
    figure.savefig(path, format="png")


def draw_front(
    axes: Axes,
    points: Sequence[FrontPoint],
    front_points: Sequence[FrontPoint],
    objectives: Sequence[str],
) -> None:
    """The metric (y) against the first cost (x): every finished trial a point (marker: loss,
    colour: AS-Speed/AS-Skip on or off), the front circled and joined by a step line."""
    from matplotlib.lines import Line2D

    metric, cost = objectives[0], objectives[1]
    losses = list(dict.fromkeys(p.loss for p in points))
    for p in points:
        key = (p.flag("as_speed"), p.flag("as_skip"))
        marker = MARKERS[losses.index(p.loss) % len(MARKERS)]
        axes.scatter(p.values[cost], p.values[metric], color=SPEED_COLORS[key], marker=marker)
    xs = [p.values[cost] for p in front_points]
    ys = [p.values[metric] for p in front_points]
    axes.step(xs, ys, where="post", color="black", linewidth=1.2, alpha=0.7)
    axes.scatter(xs, ys, s=140, facecolors="none", edgecolors="black", linewidths=1.2)
    handles = [
        Line2D([], [], color="black", marker="o", markerfacecolor="none", markersize=10,
               label="Pareto front"),
    ]  # fmt: skip
    handles += [
        Line2D([], [], color="grey", marker=MARKERS[i % len(MARKERS)], linestyle="", label=loss)
        for i, loss in enumerate(losses)
    ]
    used = {(p.flag("as_speed"), p.flag("as_skip")) for p in points}
    handles += [
        Line2D([], [], color=SPEED_COLORS[k], marker="o", linestyle="", label=SPEED_LABELS[k])
        for k in SPEED_COLORS
        if k in used
    ]
    axes.legend(handles=handles, fontsize="small")
    axes.set_xlabel(cost)
    axes.set_ylabel(metric)
    axes.set_title(f"{metric} against {cost}: {len(points)} finished trials")
    axes.grid(alpha=0.3)


def log_front(
    tracker: SearchTracker,
    points: Sequence[FrontPoint],
    front_points: Sequence[FrontPoint],
    objectives: Sequence[str],
    *,
    trial_runs: Sequence[Run],
) -> None:
    """``pareto.csv`` and ``pareto.png`` on the parent run; ``astune.pareto=true`` on the runs
    of the front's trials, and off those of ``trial_runs`` (the search's, which ``points``
    came from) no longer on it (a resumed search's front moves)."""
    run_id = tracker.require_parent()
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        write_front_csv(front_points, objectives, out / PARETO_CSV)
        plot_front(points, front_points, objectives, out / PARETO_PNG)
        for name in (PARETO_CSV, PARETO_PNG):
            tracker.client.log_artifact(run_id, str(out / name))
    on_front = {p.run_id for p in front_points}
    for run in trial_runs:
        if run.info.run_id in on_front:
            tracker.tag_run(run.info.run_id, {PARETO_TAG: "true"})
        elif PARETO_TAG in run.data.tags:
            tracker.client.delete_tag(run.info.run_id, PARETO_TAG)
