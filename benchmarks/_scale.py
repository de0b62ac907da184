"""The scale flags the seed-comparison benchmarks share (model, data slice, schedule) and the
TrainConfig they make."""

from __future__ import annotations

import argparse
from typing import Any

import torch

from astune.config import TrainConfig


def add_scale_args(p: argparse.ArgumentParser, **defaults: Any) -> None:
    """``--backbone`` ... ``--threads``; ``defaults`` overrides a flag's default by its dest."""
    flags = {
        "backbone": (str, "minilm", None),
        "num_layers": (int, 2, None),
        "max_train_samples": (int, 400, None),
        "max_eval_samples": (int, 200, None),
        "max_length": (int, 64, None),
        "epochs": (float, 3, None),
        "batch_size": (int, 16, None),
        "lr": (float, 5e-4, None),
        "eval_every": (int, 5, "optimizer steps between evaluations"),
        "threads": (int, None, "torch threads (default: torch's)"),
    }
    for dest, (kind, default, help_) in flags.items():
        flag = "--" + dest.replace("_", "-")
        p.add_argument(flag, type=kind, default=defaults.get(dest, default), help=help_)


def scale_config(name: str, args: argparse.Namespace, **fields: Any) -> TrainConfig:
    """A validated TrainConfig of dataset ``name`` at the scale of ``args``, plus ``fields``."""
    return TrainConfig(
        dataset=name,
        data_dir=args.data_dir,
        backbone=args.backbone,
        num_layers=args.num_layers,
        max_length=args.max_length,
        max_train_samples=args.max_train_samples,
        max_eval_samples=args.max_eval_samples,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        eval_every=args.eval_every,
        device="cpu" if not torch.cuda.is_available() else "auto",
        **fields,
    ).validate()
