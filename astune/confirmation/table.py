"""The confirm table: per config the mean +- 95% t interval of the objective and of training
time over seeds, and the paired difference to the baseline; as text, CSV, markdown and a PNG."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from astune.confirmation.stats import Interval, PairedDifference, paired_difference, t_interval
from astune.store.confirmed import ConfirmedConfig

CSV_COLUMNS = (
    "config",
    "confirms",
    "trial_id",
    "seeds",
    "objective_mean",
    "objective_low",
    "objective_high",
    "train_seconds_mean",
    "train_seconds_low",
    "train_seconds_high",
    "diff_mean",
    "diff_low",
    "diff_high",
    "p_value",
    "time_diff_mean",
    "time_diff_low",
    "time_diff_high",
    "time_p_value",
    "faster_at_equal_accuracy",
)


@dataclass(frozen=True)
class ConfirmRow:
    """One confirmed config: its seeds' statistics; ``difference`` (objective) and
    ``time_difference`` (training seconds), paired by seed with the baseline, are None for the
    baseline (and when no baseline seed pairs with it). ``faster_at_equal`` is the verdict of
    :func:`faster_at_equal_accuracy` (None when not asked for, or nothing to compare)."""

    config: ConfirmedConfig
    objective: Interval
    train_seconds: Interval
    difference: PairedDifference | None
    time_difference: PairedDifference | None = None
    faster_at_equal: bool | None = None


def summarize(
    configs: list[ConfirmedConfig], *, within: float | None = None, mode: str = "max"
) -> list[ConfirmRow]:
    """A row per config; each non-baseline config is paired with the baseline on the seeds
    both have. With ``within`` (percentage points), each gets the verdict of
    :func:`faster_at_equal_accuracy`."""
    baseline = next((c for c in configs if c.is_baseline), None)
    rows = []
    for config in configs:
        difference = time_difference = verdict = None
        if baseline is not None and not config.is_baseline:
            seeds = [s for s in config.seeds if s in baseline.objectives]
            if seeds:
                difference = paired_difference(
                    [config.objectives[s] for s in seeds], [baseline.objectives[s] for s in seeds]
                )
                time_difference = paired_difference(
                    [config.train_seconds[s] for s in seeds],
                    [baseline.train_seconds[s] for s in seeds],
                )
                if within is not None:
                    verdict = faster_at_equal_accuracy(
                        difference, time_difference, within=within, mode=mode
                    )
        times = [config.train_seconds[s] for s in config.seeds]
        objectives = [config.objectives[s] for s in config.seeds]
        rows.append(
            ConfirmRow(
                config,
                t_interval(objectives),
                t_interval(times),
                difference,
                time_difference=time_difference,
                faster_at_equal=verdict,
            )
        )
    return rows


def faster_at_equal_accuracy(
    difference: PairedDifference, time_difference: PairedDifference, *, within: float, mode: str
) -> bool:
    """True when the config trains significantly faster than the baseline (the 95% interval of
    the paired time difference lies below 0) and its metric is not worse by more than
    ``within`` percentage points (the paired metric interval lies above ``-within / 100``, or
    below ``+within / 100`` for a metric minimised)."""
    faster = time_difference.interval.high < 0.0
    tolerance = within / 100.0
    if mode == "min":
        return faster and difference.interval.high < tolerance
    return faster and difference.interval.low > -tolerance


def _cells(row: ConfirmRow) -> dict[str, object]:
    diff, time = row.difference, row.time_difference
    return {
        "config": row.config.label,
        "confirms": row.config.confirms,
        "trial_id": row.config.trial_id,
        "seeds": " ".join(str(s) for s in row.config.seeds),
        "objective_mean": row.objective.mean,
        "objective_low": row.objective.low,
        "objective_high": row.objective.high,
        "train_seconds_mean": row.train_seconds.mean,
        "train_seconds_low": row.train_seconds.low,
        "train_seconds_high": row.train_seconds.high,
        "diff_mean": diff.interval.mean if diff else math.nan,
        "diff_low": diff.interval.low if diff else math.nan,
        "diff_high": diff.interval.high if diff else math.nan,
        "p_value": diff.p_value if diff else math.nan,
        "time_diff_mean": time.interval.mean if time else math.nan,
        "time_diff_low": time.interval.low if time else math.nan,
        "time_diff_high": time.interval.high if time else math.nan,
        "time_p_value": time.p_value if time else math.nan,
        "faster_at_equal_accuracy": "" if row.faster_at_equal is None else row.faster_at_equal,
    }


def write_csv(rows: list[ConfirmRow], path: str | Path) -> None:
    import pandas as pd

    frame = pd.DataFrame([_cells(r) for r in rows], columns=list(CSV_COLUMNS))
    frame.to_csv(path, index=False)


def _difference_text(row: ConfirmRow) -> str:
    if row.difference is None:
        return "(baseline)" if row.config.is_baseline else "-"
    d = row.difference
    text = (
        f"{d.interval.mean:+.4f} [{d.interval.low:+.4f}, {d.interval.high:+.4f}] p={d.p_value:.3g}"
    )
    t = row.time_difference
    if t is not None and row.faster_at_equal is not None:  # a confirm of the Pareto front
        text += f"; time {t.interval.mean:+.1f} s [{t.interval.low:+.1f}, {t.interval.high:+.1f}]"
        text += "; faster at equal accuracy" if row.faster_at_equal else "; not shown faster"
    return text


def markdown(rows: list[ConfirmRow], metric: str = "objective") -> str:
    """A markdown table: config, seeds, mean +- 95% interval, time, difference to baseline."""
    lines = [
        f"| config | runs | {metric} (mean +- 95% CI) | train seconds (mean +- 95% CI) "
        "| difference to baseline [95% CI], paired t-test |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.config.label} ({row.config.name}) | {row.objective.n} "
            f"| {row.objective.format()} | {row.train_seconds.format(1)} "
            f"| {_difference_text(row)} |"
        )
    return "\n".join(lines) + "\n"


def format_table(rows: list[ConfirmRow], metric: str = "objective") -> str:
    """The console table (plain text, one line per config), each column as wide as its widest
    cell: a trial's label, or the metric's name, may run long."""
    head = ("config", "runs", f"{metric} mean +- 95% CI", "train s", "vs baseline")
    cells = [
        (f"{row.config.label} ({row.config.name})", str(row.objective.n), row.objective.format(),
         row.train_seconds.format(1), _difference_text(row))
        for row in rows
    ]  # fmt: skip
    widths = [max(len(line[i]) for line in (head, *cells)) for i in range(len(head) - 1)]

    def line(values: tuple[str, ...]) -> str:
        name, runs, score, seconds, difference = values
        return (
            f"{name:<{widths[0]}}  {runs:>{widths[1]}}  {score:<{widths[2]}}  "
            f"{seconds:<{widths[3]}}  {difference}"
        )

    return "\n".join(line(values) for values in (head, *cells))


def plot(rows: list[ConfirmRow], path: str | Path, metric: str = "objective") -> None:
    """Points per seed and the 95% interval bar of each config, into a PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 0.6 * len(rows) + 1.6), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for y, row in enumerate(rows):
        values = [row.config.objectives[s] for s in row.config.seeds]
        axes.scatter(values, [y] * len(values), color="tab:blue", s=22, zorder=3)
        if row.objective.n > 1:
            axes.plot([row.objective.low, row.objective.high], [y, y], color="black", lw=2)
        axes.plot([row.objective.mean], [y], marker="|", color="black", markersize=14)
    axes.set_yticks(range(len(rows)), [f"{r.config.label}\n{r.config.name}" for r in rows])
    axes.invert_yaxis()
    axes.set_xlabel(f"{metric} (points: seeds; bar: mean and 95% t interval)")
    figure.tight_layout()
    figure.savefig(path)
