"""What a run writes: one record per evaluation (``metrics.jsonl``, the MLflow metrics of a
trial) and the final record (``final.json``). Names follow the MLflow conventions of
docs/contract.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from astune.run_folder import FINAL_FILE, METRICS_FILE
from astune.training.evaluate import Evaluation
from astune.training.progress import Position, Window


def evaluation_record(
    result: Evaluation,
    *,
    metric: str,
    since_eval: Window,
    pos: Position,
    n_train: int,
    seconds: float,
    train_seconds: float,
    accum_steps: int,
    delta_now: float,
    lr_now: float,
) -> dict[str, Any]:
    """``val_<metric>`` of ``result``, ``objective`` (its ``metric``), the training figures
    summed in ``since_eval`` over the last ``seconds`` of training, and the run's costs so far
    (:data:`astune.metrics.objectives.COSTS`: ``train_seconds`` in all, ``samples_computed``,
    ``optimizer_steps``); ``train_margin``, the mean ``p_t - max p_i`` of the rows trained
    since the last evaluation, when measured (AS losses: what ``recommend`` replays an adaptive
    delta on)."""
    window = since_eval
    train_margin = window.mean_margin()
    margin = {} if train_margin is None else {"train_margin": train_margin}
    return {
        **margin,
        **{f"val_{k}": v for k, v in result.metrics.items()},
        "objective": result.metrics[metric],
        "val_loss": result.loss,
        "train_loss": window.loss / max(1, window.active),
        "masked_ratio": window.masked_ratio(),
        "accum_steps": accum_steps,
        "delta_now": delta_now,
        "lr_now": lr_now,
        "samples_per_second": window.samples / max(1e-9, seconds),
        "epoch": pos.samples / n_train,
        "step": pos.steps,
        "samples_seen": pos.samples,
        "samples_computed": pos.computed,
        "optimizer_steps": pos.steps,
        "train_seconds": train_seconds,
        "evaluation": pos.evaluations,
    }


def final_record(
    history: list[dict[str, Any]],
    test: Evaluation,
    *,
    pos: Position,
    train_seconds: float,
    checkpoint_stats: dict[str, int],
    best_margins: dict[str, list] | None,
) -> dict[str, Any]:
    """The best evaluation's ``val_`` metrics, the test split's (of the best weights) and the
    run's costs."""
    best = max(history, key=lambda r: r["objective"])
    return {
        **{k: v for k, v in best.items() if k.startswith("val_")},
        **{f"test_{k}": v for k, v in test.metrics.items()},
        "test_loss": test.loss,
        "best_evaluation": best["evaluation"],
        "best_objective": best["objective"],
        "optimizer_steps": pos.steps,
        "samples_seen": pos.samples,
        "samples_computed": pos.computed,
        "train_seconds": train_seconds,
        **checkpoint_stats,
        "p_margin_json": json.dumps(best_margins),
    }


class RunLog:
    """The run folder's ``metrics.jsonl`` (one record per evaluation) and ``final.json``."""

    def __init__(self, out: Path):
        self.out = out
        self.metrics = out / METRICS_FILE

    def start(self, history: list[dict[str, Any]]) -> None:
        """A fresh run starts a fresh log; a resumed one was rewritten by :meth:`rewrite`."""
        self.out.mkdir(parents=True, exist_ok=True)
        if not history:
            self.metrics.write_text("")

    def append(self, record: dict[str, Any]) -> None:
        with open(self.metrics, "a") as fh:
            fh.write(json.dumps(record) + "\n")

    def rewrite(self, history: list[dict[str, Any]]) -> None:
        """The log as of a checkpoint: the evaluations made after it are dropped."""
        self.out.mkdir(parents=True, exist_ok=True)
        with open(self.metrics, "w") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in history)

    def write_final(self, final: dict[str, Any]) -> None:
        (self.out / FINAL_FILE).write_text(json.dumps(final, indent=2))
