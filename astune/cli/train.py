"""`astune train`: the run's config from its flags (or ``--config FILE``), checked before torch
loads; ``--resume``; the run, stopped gracefully by SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from astune.cli.errors import CLIError
from astune.config import INFOBATCH_FIELDS, SPEED_FIELDS
from astune.losses.catalogue import DELTA_CONTROL

if TYPE_CHECKING:
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
    "checkpoint_every",
)


# Where a resumed run reads its data, writes and trains may change (another mount, machine or
# GPU, and the loss kernel that suits it); the rest of its settings may not, or the resume
# would not be exact.
RESUME_MAY_CHANGE = ("output_dir", "data_dir", "device", "loss_kernel")


def train_config(args: argparse.Namespace):
    """The run's config: ``--config FILE`` (as `export` writes it) overridden by explicit flags."""
    from astune.backbones.registry import DEFAULT_BACKBONE
    from astune.config import TrainConfig

    config = TrainConfig.from_yaml(args.config).to_dict() if args.config else {}
    config.update({k: getattr(args, k) for k in TRAIN_FLAGS if getattr(args, k) is not None})
    if not config.get("output_dir"):  # an exported config holds `output_dir: null`
        config["output_dir"] = f"astune-runs/train/{config.get('dataset', 'run')}"
    if not args.config and args.backbone is None:
        config["backbone"] = DEFAULT_BACKBONE
    if not config.get("dataset"):
        raise CLIError("--dataset is required (or --config FILE)")
    return TrainConfig.from_dict(config).validate()


def _resumed(args: argparse.Namespace, config: TrainConfig) -> tuple[TrainConfig, dict]:
    """``--resume``: the config the run in ``config.output_dir`` was started with and the
    checkpoint it came from (read once: it holds the weights); a flag given now with another
    value is refused (the resume would not be exact)."""
    from astune.config import TrainConfig
    from astune.training.state import STATE_FILE, read_checkpoint

    folder = Path(config.output_dir) / "checkpoint"
    if not (folder / STATE_FILE).is_file():
        raise CLIError(
            f"--resume: no checkpoint in {folder}; give the --output-dir of a run that wrote one "
            "(each evaluation writes one unless --checkpoint-every says otherwise)"
        )
    state = read_checkpoint(folder)
    before = state["config"]
    for key in TRAIN_FLAGS:
        given = getattr(args, key)
        if key in RESUME_MAY_CHANGE or given is None or key not in before:
            continue
        if given != before[key]:
            raise CLIError(
                f"--resume: cannot change --{key.replace('_', '-')} (the run was started with "
                f"{before[key]!r}, now {given!r}); leave it out, or train into another --output-dir"
            )
    given_now = {k: getattr(args, k) for k in RESUME_MAY_CHANGE if getattr(args, k) is not None}
    resumed = {**before, **given_now, "output_dir": config.output_dir}
    return TrainConfig.from_dict(resumed).validate(), state


def train(args: argparse.Namespace) -> int:
    try:
        config, state = train_config(args), None  # bad flags refused before torch loads
    except (ValueError, OSError) as err:
        raise CLIError(str(err).splitlines()[0]) from None
    from astune.cli.train_stop import TrainingStopped, stop_after_step
    from astune.training import Run
    from astune.training.hooks import ProgressBar

    bar = ProgressBar()
    with stop_after_step() as stop:  # SIGTERM, Ctrl-C: the step under way ends, then the run
        try:  # building the run reads the data and the backbone: what fails here is bad input
            if args.resume:
                config, state = _resumed(args, config)
            run = Run(config, hooks=[bar, stop])
            if state is not None:
                run.restore(Path(config.output_dir) / "checkpoint", state=state)
        except (ValueError, OSError) as err:
            raise CLIError(str(err).splitlines()[0]) from None
        try:
            final = run.train()  # a failure from here on is a failed run (exit 1)
        except TrainingStopped as stopped:
            bar.close()
            print(f"astune train: {stopped}", file=sys.stderr)
            return stopped.exit_code
    keys = [k for k in final if k.startswith(("val_", "test_"))] + [
        "optimizer_steps",
        "train_seconds",
        "samples_seen",
        "samples_computed",
    ]
    for key in keys:
        print(
            f"{key:>24}: {final[key]:.4f}"
            if isinstance(final[key], float)
            else f"{key:>24}: {final[key]}"
        )
    folder = shlex.quote(str(config.output_dir))
    print(f"run folder: {folder} (metrics.jsonl, final.json, checkpoint/)")
    print(f"resume:     python -m astune train --output-dir {folder} --resume")
    return 0
