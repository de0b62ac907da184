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
from astune.config import DEVICES, PRECISIONS, SKIP_POLICIES, TRAIN_FIELDS
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
    train.add_argument(
        "--overwrite", action="store_true",
        help="replace the run --output-dir holds (without it, such a folder is refused)",
    )  # fmt: skip
    train.add_argument(
        "--loss", default=None, help="as_softmax (default) or another (see `astune losses`)"
    )
    train.add_argument(
        "--delta", type=float, default=None,
        help=f"AS losses: mask class i where p_t - p_i > delta (default {_default('delta')})",
    )  # fmt: skip
    train.add_argument(
        "--warmup-ratio", type=float, default=None, metavar="R",
        help=f"AS losses: delta = 1 for the first R of training ({_default_help('warmup_ratio')})",
    )  # fmt: skip
    train.add_argument(
        "--delta-schedule",
        choices=list(DELTA_SCHEDULES),
        default=None,
        help="delta after the warm-up: fixed (default, the paper's); target-mask: moved so the "
        "masked ratio follows a line rising to --mask-target; ema: an average of the margin",
    )
    train.add_argument("--mask-target", type=float, default=None, help=_default_help("mask_target"))
    train.add_argument("--delta-gain", type=float, default=None, help=_default_help("delta_gain"))
    train.add_argument(
        "--delta-max-step", type=float, default=None, help=_default_help("delta_max_step")
    )
    train.add_argument("--delta-min", type=float, default=None, help=_default_help("delta_min"))
    train.add_argument(
        "--delta-momentum", type=float, default=None, help=_default_help("delta_momentum")
    )
    train.add_argument(
        "--as-speed", action="store_true", default=None,
        help="AS-Speed: accumulate lam * N_all / (N_all - N_masked) micro-batches a step",
    )  # fmt: skip
    train.add_argument(
        "--lam", type=float, default=None,
        help=f"AS-Speed's lambda (default {_default('lam')})",
    )  # fmt: skip
    train.add_argument(
        "--max-accum-steps", type=int, default=None, metavar="S",
        help=f"AS-Speed's cap s on the accumulation (default {_default('max_accum_steps')})",
    )  # fmt: skip
    _add_pruning_flags(train)
    train.add_argument(
        "--fresh-head",
        action="store_true",
        default=None,
        help="spelling correction: a randomly initialised head instead of the backbone's "
        "embeddings of the candidate characters",
    )
    train.add_argument(
        "--lr", type=float, default=None, help="peak learning rate (default: the paper's)"
    )
    train.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="samples a batch, a micro-batch with AS-Speed (default: the paper's)",
    )
    train.add_argument(
        "--output-dir", default=None, metavar="DIR",
        help="its metrics, checkpoints and final.json (default: astune-runs/train/<dataset>, "
        "else <dataset>-2, ... : the first that holds no run)",
    )  # fmt: skip
    train.add_argument(
        "--eval-every", type=int, default=None, help="evaluate every N optimizer steps"
    )
    train.add_argument(
        "--device", choices=DEVICES, default=None, help="auto (default): CUDA when there is one"
    )
    train.add_argument(
        "--precision", choices=PRECISIONS, default=None,
        help="auto (default): bf16 autocast on a card that has it, else fp32",
    )  # fmt: skip
    add_loss_kernel_flag(train)
    add_compile_flag(train)
    add_plugin_flag(train)
    add_checkpoint_flag(train, TRAIN_DEFAULT)


def _default(name: str) -> str:
    """A field's default as its help says it (``0.3``), from :data:`TRAIN_FIELDS`."""
    return f"{TRAIN_FIELDS[name].default:g}"


def _default_help(name: str) -> str:
    return f"default {_default(name)}"


def _add_pruning_flags(train: argparse.ArgumentParser) -> None:
    """``train``'s sample pruning: AS-Skip (issue 11) and InfoBatch, and grouping by length."""
    train.add_argument(
        "--as-skip", action="store_true", default=None,
        help="AS-Skip (AS losses): leave out samples whose loss was zero, re-checking some",
    )  # fmt: skip
    train.add_argument(
        "--skip-keep", type=float, default=None, metavar="P",
        help=f"the chance a zero-loss sample is re-checked (default {_default('skip_keep')})",
    )  # fmt: skip
    train.add_argument(
        "--skip-anneal", type=float, default=None, metavar="A",
        help=f"the last A of training uses every sample (default {_default('skip_anneal')})",
    )  # fmt: skip
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
        "skip_keep / w, w doubling each time it is found zero again ("
        + _default_help("skip_backoff")
        + "; 1: no back-off)",
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
        help="the soft policy's chance of leaving out a sample below the mean loss ("
        + _default_help("skip_prune")
        + ")",
    )
    train.add_argument(
        "--infobatch",
        action="store_true",
        default=None,
        help="InfoBatch (any loss; not with --as-skip): prune samples below the mean loss with "
        "chance --infobatch-prune, rescale the kept ones, use all in the last --infobatch-anneal",
    )
    train.add_argument(
        "--infobatch-prune", type=float, default=None, help=_default_help("infobatch_prune")
    )
    train.add_argument(
        "--infobatch-anneal", type=float, default=None, help=_default_help("infobatch_anneal")
    )
    train.add_argument(
        "--length-window",
        type=int,
        default=None,
        help="group micro-batches by length within windows of this many (text; "
        + _default_help("length_window")
        + ": off)",
    )
