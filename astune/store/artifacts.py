"""The outcome of a search on its parent run: ``best_config.yaml``, ``trials.csv``, the
objective-against-delta plot and the ``astune.best.*`` tags."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astune.metrics.objectives import MODES
from astune.store.conventions import BEST_TAG_PREFIX, TrackingError
from astune.store.values import flat_params, now_ms, param_value
from astune.store.writer import SearchTracker

if TYPE_CHECKING:
    import pandas as pd

logger = logging.getLogger(__name__)


def best_config_mapping(
    best_config: Mapping[str, Any], *, dataset: str, base_config: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The ``astune train --config`` mapping of the best trial: the search's fixed settings
    (``base_config``) overridden by the trial config, kept to TrainConfig fields and the flat
    baseline-loss parameters; keys that do not apply (``None``) are dropped."""
    from astune.config import TrainConfig

    accepted = TrainConfig.accepted_keys()
    merged = {"dataset": dataset, **(base_config or {}), **best_config}
    mapping = {k: _plain(v) for k, v in merged.items() if k in accepted and v is not None}
    dropped = sorted(set(merged) - accepted)
    if dropped:
        logger.debug("best config: keys that are not TrainConfig fields dropped: %s", dropped)
    TrainConfig.from_dict(mapping)  # same check as `astune train --config`
    return mapping


def _plain(value: Any) -> Any:
    """Numpy scalars (and containers of them) as Python values, for YAML."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _column(df: "pd.DataFrame", name: str) -> str | None:
    for candidate in (f"config/{name}", name):
        if candidate in df.columns:
            return candidate
    return None


def plot_objective_vs_delta(
    trials_df: "pd.DataFrame", path: str | Path, *, metric: str = "objective", mode: str = "max"
) -> dict[str, Any]:
    """Draw ``metric`` against ``delta``, one point per trial colored by loss, into a PNG.

    Losses without ``delta`` (softmax and the other baselines) are drawn as a horizontal line
    at their best value (by ``mode``). Trials without a finite ``metric`` are left out.
    Returns the data drawn:
    ``{"points": {loss: [(delta, value), ...]}, "lines": {loss: best value}}``.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    points, lines = _plot_series(trials_df, metric, mode)
    figure = Figure(figsize=(6.4, 4.4), dpi=100)
    FigureCanvasAgg(figure)  # no pyplot: no global backend or figure state
    axes = figure.add_subplot()
    colors = _loss_colors([*points, *lines])
    for loss, xy in points.items():
        axes.scatter([x for x, _ in xy], [y for _, y in xy], color=colors[loss], label=loss, s=30)
    for loss, value in lines.items():
        axes.axhline(value, color=colors[loss], linestyle="--", label=f"{loss} (no delta), best")
    axes.set_xlabel("delta")
    axes.set_ylabel(metric)
    axes.set_title(f"{metric} against delta, one point per trial")
    axes.grid(alpha=0.3)
    if points or lines:
        axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, format="png")
    return {"points": points, "lines": lines}


def _plot_series(df: "pd.DataFrame", metric: str, mode: str) -> tuple[dict, dict]:
    loss_col, delta_col = _column(df, "loss"), _column(df, "delta")
    points: dict[str, list[tuple[float, float]]] = {}
    no_delta: dict[str, list[float]] = {}
    if metric not in df.columns:
        return points, {}
    for _, row in df.iterrows():
        value = _finite(row[metric])
        if value is None:
            continue
        loss = str(row[loss_col]) if loss_col else "trial"
        delta = _finite(row[delta_col]) if delta_col else None
        if delta is None:
            no_delta.setdefault(loss, []).append(value)
        else:
            points.setdefault(loss, []).append((delta, value))
    best = max if mode == "max" else min
    return points, {loss: best(values) for loss, values in no_delta.items()}


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _loss_colors(losses: list[str]) -> dict[str, str]:
    palette = [f"C{i}" for i in range(10)]
    return {loss: palette[i % len(palette)] for i, loss in enumerate(dict.fromkeys(losses))}


def log_search_artifacts(
    tracker: SearchTracker,
    *,
    best_config: Mapping[str, Any],
    trials_df: "pd.DataFrame",
    best_objective: float | None = None,
    mode: str = "max",
    base_config: Mapping[str, Any] | None = None,
    metric: str = "objective",
) -> dict[str, Any]:
    """Store the search's outcome on the parent run.

    Artifacts ``best_config.yaml`` (runs with ``astune train --config``), ``trials.csv`` (one
    row per trial) and ``objective_vs_delta.png``; metric ``best_objective`` (from
    ``trials_df`` by ``mode`` unless given); tags ``astune.best.<key>`` for the best config
    (tags, not params, so that a resumed search may update them). Returns what was logged:
    ``{"config": mapping, "best_objective": value, "plot": plotted series}``.
    """
    import tempfile

    import yaml
    from mlflow.entities import Metric

    if mode not in MODES:
        raise TrackingError(f"mode must be 'max' or 'min', got {mode!r}.")
    run_id = tracker.require_parent()
    mapping = best_config_mapping(best_config, dataset=tracker.dataset, base_config=base_config)
    if best_objective is None:
        best_objective = _best_value(trials_df, metric, mode)
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        header = (
            f"# best config of search {tracker.search_id!r} ({metric} = {best_objective})\n"
            "# run it with: python -m astune train --config best_config.yaml\n"
        )
        (out / "best_config.yaml").write_text(header + yaml.safe_dump(mapping, sort_keys=False))
        trials_df.to_csv(out / "trials.csv", index=False)
        plot = out / "objective_vs_delta.png"
        series = plot_objective_vs_delta(trials_df, plot, metric=metric, mode=mode)
        for name in ("best_config.yaml", "trials.csv", "objective_vs_delta.png"):
            tracker.client.log_artifact(run_id, str(out / name))
    tags = {f"{BEST_TAG_PREFIX}{k}": param_value(v) for k, v in flat_params(mapping).items()}
    metrics = []
    if best_objective is not None:
        metrics.append(Metric("best_objective", best_objective, now_ms(), 0))
    tracker.client.log_batch(run_id, metrics=metrics)
    tracker.tag_run(run_id, tags)
    return {"config": mapping, "best_objective": best_objective, "plot": series}


def _best_value(df: "pd.DataFrame", metric: str, mode: str) -> float | None:
    if metric not in df.columns:
        return None
    values = [v for v in (_finite(x) for x in df[metric]) if v is not None]
    if not values:
        return None
    return max(values) if mode == "max" else min(values)
