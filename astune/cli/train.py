"""`astune train`: the run's config from its flags (or ``--config FILE``), checked before torch
loads; ``--resume``; the run, stopped gracefully by SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import TYPE_CHECKING, Any

from astune._text import as_flag
from astune.cli.errors import CLIError, refusal
from astune.config import INFOBATCH_FIELDS, SPEED_FIELDS
from astune.losses.catalogue import DELTA_CONTROL

if TYPE_CHECKING:
    from astune.api._train import TrainResult
    from astune.config import TrainConfig


TRAIN_FLAGS = (
    "dataset",
    "data_dir",
    "backbone",
    "num_layers",
    "max_train_samples",
    "max_eval_samples",
    "validation_fraction",
    "max_audio_seconds",
    "epochs",
    "max_length",
    "seed",
    "loss",
    "delta",
    "warmup_ratio",
    *(p.name for p in DELTA_CONTROL),
    *SPEED_FIELDS,
    *INFOBATCH_FIELDS,
    "length_window",
    "fresh_head",
    "lr",
    "batch_size",
    "output_dir",
    "eval_every",
    "device",
    "precision",
    "loss_kernel",
    "compile",
    "plugins",
    "checkpoint_every",
)


def given_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields the command line gave."""
    return {k: getattr(args, k) for k in TRAIN_FLAGS if getattr(args, k) is not None}


def train_config(args: argparse.Namespace) -> TrainConfig:
    """The run's config: ``--config FILE`` (as `export` writes it) overridden by explicit flags."""
    from astune.api._train import train_config as config_of

    return config_of(args.config, given_fields(args), spell=as_flag, overwrite=args.overwrite)


def train(args: argparse.Namespace) -> int:
    fields, config = given_fields(args), args.config
    if args.resume and args.overwrite:
        raise CLIError(
            "--resume continues the run in --output-dir, --overwrite replaces it: give one"
        )
    if not args.resume:
        try:
            config = train_config(args)  # bad flags refused before torch loads
        except (ValueError, OSError) as err:
            raise CLIError(refusal(err, args)) from None
    from astune.api._train import TrainResult, build_run
    from astune.training.hooks import ProgressBar
    from astune.training.stop import TrainingStopped, stop_after_step

    bar = ProgressBar()
    with stop_after_step() as stop:  # SIGTERM, Ctrl-C: the step under way ends, then the run
        try:  # building the run reads the data and the backbone: what fails here is bad input
            run = build_run(
                config, fields, resume=args.resume, overwrite=args.overwrite,
                hooks=[bar, stop], spell=as_flag,
            )  # fmt: skip
        except (ValueError, OSError) as err:
            raise CLIError(refusal(err, args)) from None
        try:
            final = run.train()  # a failure from here on is a failed run (exit 1)
        except TrainingStopped as stopped:
            bar.close()
            print(f"astune train: {stopped}", file=sys.stderr)
            return stopped.exit_code
    print_result(TrainResult.of(run, final))
    return 0


def print_result(result: TrainResult) -> None:
    """The run's final metrics, its folder and the command that resumes it."""
    final = result.metrics
    keys = [k for k in final if k.startswith(("val_", "test_"))] + [
        "optimizer_steps",
        "train_seconds",
        "samples_seen",
        "samples_computed",
    ]
    for key in keys:
        value = final[key]
        print(f"{key:>24}: {value:.4f}" if isinstance(value, float) else f"{key:>24}: {value}")
    folder = shlex.quote(str(result.config.output_dir))
    print(f"run folder: {folder} (metrics.jsonl, final.json, checkpoint/)")
    print(f"resume:     python -m astune train --output-dir {folder} --resume")
