"""Distribution of p_margin (paper, Figure "Distribution diagram of p_margin"): p_t minus the
largest non-target probability on the validation set, for the best softmax and the best
AS-Softmax trial, from each trial's ``p_margin.json`` artifact
(``{"edges": [41 floats over [-1, 1]], "counts": [40 ints]}``). Left of 0: wrong predictions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from astune.analysis import plots
from astune.analysis.study import StudyResult, absent
from astune.losses.catalogue import AS_LOSSES, SOFTMAX_LOSSES
from astune.store.experiment import ExperimentRuns

NAME = "p_margin"
TITLE = "Distribution of p_margin"
ARTIFACT = "p_margin.json"
FAMILIES = {"softmax": SOFTMAX_LOSSES, "AS-Softmax": AS_LOSSES}


def read_histogram(payload: Any) -> tuple[np.ndarray, np.ndarray]:
    """(edges, counts) of a ``p_margin.json`` payload.

    Raises:
        ValueError: the payload is not ``{"edges": [n + 1 increasing], "counts": [n >= 0]}``
            with at least one sample.
    """
    if not isinstance(payload, dict) or not {"edges", "counts"} <= payload.keys():
        raise ValueError("is not an object with 'edges' and 'counts'")
    try:
        edges = np.asarray(payload["edges"], dtype=float)
        counts = np.asarray(payload["counts"], dtype=float)
    except (TypeError, ValueError):
        raise ValueError("has edges or counts that are not numbers") from None
    if edges.ndim != 1 or counts.ndim != 1 or len(edges) != len(counts) + 1 or len(counts) < 1:
        raise ValueError(f"has {edges.size} edges and {counts.size} counts (want n + 1 and n)")
    if not (np.all(np.diff(edges) > 0) and np.all(counts >= 0) and np.isfinite(counts).all()):
        raise ValueError("needs increasing edges and non-negative counts")
    if counts.sum() == 0:
        raise ValueError("has no sample (every count is 0)")
    return edges, counts


def margin_data(runs: ExperimentRuns) -> tuple[dict[str, Any], list[str]]:
    """``histograms``: {family: {"edges", "fraction" (sums to 1), "count", "run_id", "name",
    "best_objective", "wrong" (the fraction below 0)}} and notes on what is missing."""
    histograms, notes = {}, []
    for family, losses in FAMILIES.items():
        trials = runs.finished(losses)
        if trials.empty and family == "softmax" and not runs.finished(losses, confirms=True).empty:
            trials = runs.finished(losses, confirms=True)  # the baseline confirm reran
            notes.append(
                "no softmax trial in this search; shown: the best of confirm's softmax runs"
            )
        if trials.empty:
            notes.append(absent(runs.trials, losses, family))
            continue
        found = _best_with_histogram(runs, trials, notes)
        if found is None:
            notes.append(
                f"no {family} trial has a valid {ARTIFACT} artifact "
                "(searches before p_margin logging have none)"
            )
            continue
        row, (edges, counts) = found
        if row.run_id != trials["run_id"].iloc[0]:
            notes.append(
                f"the best {family} trial has no {ARTIFACT}; shown: {row.name}, "
                "the best one that has it"
            )
        histograms[family] = _histogram(row, edges, counts)
    return {"histograms": histograms}, notes


def _best_with_histogram(runs: ExperimentRuns, trials: Any, notes: list[str]) -> tuple | None:
    for row in trials.itertuples():
        try:
            payload = runs.artifact_json(row.run_id, ARTIFACT)
            if payload is not None:
                return row, read_histogram(payload)
        except json.JSONDecodeError:
            notes.append(f"{ARTIFACT} of trial {row.name} is not JSON; skipped")
        except ValueError as err:
            notes.append(f"{ARTIFACT} of trial {row.name} {err}; skipped")
    return None


def _histogram(row: Any, edges: np.ndarray, counts: np.ndarray) -> dict[str, Any]:
    total = counts.sum()
    fraction = counts / total
    centers = (edges[:-1] + edges[1:]) / 2
    return {
        "edges": edges.tolist(),
        "fraction": fraction.tolist(),
        "count": int(total),
        "run_id": row.run_id,
        "name": row.name,
        "loss": row.loss,
        "best_objective": float(row.best_objective),
        "wrong": float(fraction[centers < 0].sum()),
    }


def p_margin(runs: ExperimentRuns, out_dir: Path) -> StudyResult:
    """Draw ``p_margin.png``; the data is :func:`margin_data`."""
    data, notes = margin_data(runs)
    result = StudyResult(NAME, TITLE, _caption(data), data, notes=notes)
    if data["histograms"]:
        result.image = _draw(data, out_dir / f"{NAME}.png")
    return result


def _caption(data: dict[str, Any]) -> str:
    shares = ", ".join(
        f"{family} {h['wrong']:.1%} of {h['count']}" for family, h in data["histograms"].items()
    )
    return (
        "Validation p_margin (p of the target minus the largest other p; per token for token "
        "tasks, min positive minus max negative for multi-label) of the best checkpoint of the "
        "best softmax and the best AS-Softmax trial, each histogram normalised to sum 1. Left of "
        "the dotted line (p_margin < 0) are wrong predictions" + (f": {shares}." if shares else ".")
    )


def _draw(data: dict[str, Any], path: Path) -> Path:
    figure, (ax,) = plots.new_figure(width=7.2)
    colors = {"softmax": "C0", "AS-Softmax": "C3"}
    for family, h in data["histograms"].items():
        edges = np.asarray(h["edges"])
        label = f"{family}: {h['name']} (best {h['best_objective']:.4g}, n={h['count']})"
        ax.stairs(h["fraction"], edges, fill=True, alpha=0.35, color=colors[family], label=label)
        ax.stairs(h["fraction"], edges, color=colors[family], linewidth=1.5)
    ax.axvline(0.0, color="black", linestyle=":", linewidth=1.2, label="p_margin = 0")
    low = min(h["edges"][0] for h in data["histograms"].values())
    ax.set_xlim(min(low, -1.0), max(max(h["edges"][-1] for h in data["histograms"].values()), 1.0))
    ax.set_xlabel("p_margin = p_target - max p_other")
    ax.set_ylabel("fraction of validation samples")
    ax.set_title("Validation p_margin: softmax against AS-Softmax (best trials)")
    ax.legend(fontsize="small", loc="best")
    return plots.save(figure, path)
