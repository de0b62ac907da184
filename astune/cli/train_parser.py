"""The ``train`` command's parser: one run, its settings as flags (the other commands' parsers
are in :mod:`astune.cli.parser`)."""

from __future__ import annotations

import argparse

from astune.checkpoint_policy import TRAIN_DEFAULT
from astune.cli.flags import (
    add_checkpoint_flag,
    add_compile_flag,
    add_data_flags,
    add_loss_kernel_flag,
    add_plugin_flag,
)
from astune.config import SKIP_POLICIES
from astune.losses.catalogue import DELTA_SCHEDULES


def add_train_parser(sub: argparse._SubParsersAction) -> None:
    """``train``: one run, its settings as flags (one left unset: --config's or the default)."""
    train = sub.add_parser("train", help="one training run (the unit of a search trial)")
    add_data_flags(train)
    train.add_argument("--config", help="YAML config written by `astune export`")
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --output-dir from its last checkpoint, with the settings it "
        "was started with (as a run stopped by SIGTERM or Ctrl-C leaves it)",
    )
    train.add_argument("--loss", default=None)
    train.add_argument("--delta", type=float, default=None)
    train.add_argument("--warmup-ratio", type=float, default=None)
    train.add_argument(
        "--delta-schedule",
        choices=list(DELTA_SCHEDULES),
        default=None,
        help="delta after the warm-up: fixed (default, the paper's); target-mask: moved so the "
        "masked ratio follows a line rising to --mask-target; ema: an average of the margin",
    )
    train.add_argument("--mask-target", type=float, default=None, help="default 0.5")
    train.add_argument("--delta-gain", type=float, default=None, help="default 0.5")
    train.add_argument("--delta-max-step", type=float, default=None, help="default 0.02")
    train.add_argument("--delta-min", type=float, default=None, help="default 0.05")
    train.add_argument("--delta-momentum", type=float, default=None, help="default 0.9")
    train.add_argument("--lam", type=float, default=None)
    train.add_argument("--max-accum-steps", type=int, default=None)
    train.add_argument("--as-speed", action="store_true", default=None)
    _add_pruning_flags(train)
    train.add_argument(
        "--fresh-head",
        action="store_true",
        default=None,
        help="spelling correction: a randomly initialised head instead of the backbone's "
        "embeddings of the candidate characters",
    )
    train.add_argument("--lr", type=float, default=None)
    train.add_argument("--batch-size", type=int, default=None)
    train.add_argument("--output-dir", default=None)
    train.add_argument(
        "--eval-every", type=int, default=None, help="evaluate every N optimizer steps"
    )
    train.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None)
    train.add_argument("--precision", choices=["auto", "fp32", "bf16"], default=None)
    add_loss_kernel_flag(train)
    add_compile_flag(train)
    add_plugin_flag(train)
    add_checkpoint_flag(train, TRAIN_DEFAULT)


def _add_pruning_flags(train: argparse.ArgumentParser) -> None:
    """``train``'s sample pruning: AS-Skip (issue 11) and InfoBatch, and grouping by length."""
    train.add_argument("--as-skip", action="store_true", default=None)
    train.add_argument("--skip-keep", type=float, default=None)
    train.add_argument("--skip-anneal", type=float, default=None)
    train.add_argument(
        "--skip-probe",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="re-check zero-loss samples by a forward pass without gradient (default: on; "
        "--no-skip-probe trains on them directly, AS-Skip v1)",
    )
    train.add_argument(
        "--skip-backoff",
        type=float,
        default=None,
        help="cap of the re-check back-off: a zero-loss sample is re-checked with chance "
        "skip_keep / w, w doubling each time it is found zero again (default 8; 1: no back-off)",
    )
    train.add_argument(
        "--skip-policy",
        choices=list(SKIP_POLICIES),
        default=None,
        help="zero: leave out the zero-loss samples (default); soft: also prune low-loss ones "
        "with chance --skip-prune, their kept peers' loss scaled by 1/(1-p), as InfoBatch does",
    )
    train.add_argument(
        "--skip-prune",
        type=float,
        default=None,
        help="the soft policy's chance of leaving out a sample below the mean loss (default 0.5)",
    )
    train.add_argument(
        "--infobatch",
        action="store_true",
        default=None,
        help="InfoBatch (any loss; not with --as-skip): prune samples below the mean loss with "
        "chance --infobatch-prune, rescale the kept ones, use all in the last --infobatch-anneal",
    )
    train.add_argument("--infobatch-prune", type=float, default=None, help="default 0.5")
    train.add_argument("--infobatch-anneal", type=float, default=None, help="default 0.125")
    train.add_argument(
        "--length-window",
        type=int,
        default=None,
        help="group micro-batches by length within windows of this many (text; default 0: off)",
    )
