"""Helpers of the training-loop tests (test_training, test_training_checkpoints, test_skip): run
configs on slices of the shared data, the slices' encoded data, and a run's metrics."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

from astune.config import TrainConfig
from astune.data.encoded import load_encoded
from astune.data.media_encoding import TrainData
from astune.training import fit

# checkpoints only where a test reads or resumes from them: each costs ~0.4 s on 2 CPU cores
LOOP_BASE = dict(
    backbone="minilm", num_layers=1, max_length=32, seed=7, weight_decay=0.0, checkpoint_every="end"
)
EVERY_EVALUATION = dict(checkpoint_every="eval")


def run_config(
    base: dict[str, Any], tmp_path: Path, name: str, data_dir: Path, **overrides: Any
) -> TrainConfig:
    """``base`` with the shared data folder, an output folder ``tmp_path / name`` and
    ``overrides``."""
    values = dict(base, data_dir=str(data_dir), output_dir=str(tmp_path / name))
    values.update(overrides)
    return TrainConfig(**values)


def loop_config(tmp_path: Path, name: str, data_dir: Path, **overrides: Any) -> TrainConfig:
    """:data:`LOOP_BASE` run config of the training-loop tests (:func:`run_config`)."""
    return run_config(LOOP_BASE, tmp_path, name, data_dir, **overrides)


def sst5_slice(base: dict[str, Any], data_dir: Path, n_train: int, n_eval: int) -> TrainData:
    """SST-5 encoded, cut to ``n_train`` training and ``n_eval`` validation and test sentences
    (``TrainConfig.max_train_samples`` / ``max_eval_samples``)."""
    return load_encoded(
        TrainConfig(
            dataset="sst5",
            data_dir=str(data_dir),
            max_train_samples=n_train,
            max_eval_samples=n_eval,
            **base,
        )
    )


def read_metrics(run: TrainConfig) -> list[dict]:
    """The records of ``metrics.jsonl``, one per evaluation."""
    text = Path(run.output_dir, "metrics.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


WALL_CLOCK = ("samples_per_second", "train_seconds")


def timeless(records: list[dict]) -> list[dict]:
    """``records`` without their wall-clock fields (:data:`WALL_CLOCK`), for comparing runs."""
    return [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in records]


class Interrupt(Exception):
    """Raised from a ``fit`` callback to cut a run short at an evaluation."""


class Snapshots:
    """A ``fit`` callback keeping the run folder as it stands after each evaluation that wrote
    a checkpoint, in ``root / f"e{evaluation}"``: what a run killed right there leaves behind,
    so that one uninterrupted run serves as both the reference and the interrupted run.
    Checkpoint files are hard-linked (a run replaces them, never rewrites one), the rest copied.
    """

    def __init__(self, root: Path):
        self.root = root
        self.taken: list[int] = []

    def __call__(self, record: dict[str, Any], folder: Path | None) -> None:
        if folder is None:
            return
        shutil.copytree(folder.parent, self.folder(record["evaluation"]), copy_function=_link_pt)
        self.taken.append(record["evaluation"])

    def folder(self, evaluation: int) -> Path:
        return self.root / f"e{evaluation}"

    def resume(
        self, run: TrainConfig, evaluation: int, data: TrainData
    ) -> tuple[TrainConfig, dict]:
        """``run`` continued from its snapshot after ``evaluation``: its config (the snapshot's
        folder) and the final record."""
        resumed = dataclasses.replace(run, output_dir=str(self.folder(evaluation)))
        checkpoint = self.folder(evaluation) / "checkpoint"
        return resumed, fit(resumed, data=data, resume_from=checkpoint)


def _link_pt(src: str, dst: str) -> None:
    if src.endswith(".pt"):
        os.link(src, dst)
    else:
        shutil.copy2(src, dst)
