"""The flags several ``python -m astune`` subcommands share (data, tracking, storage,
checkpoints, the loss's kernel), each added to a parser by one function."""

from __future__ import annotations

import argparse

from astune.losses.catalogue import LOSS_KERNELS
from astune.store.storage_retry import DEFAULT_STORAGE_TIMEOUT


def add_data_flags(parser: argparse.ArgumentParser) -> None:
    """Flags shared by ``train`` and ``search``: data, backbone and budget."""
    parser.add_argument("--dataset", help="registry name (see `astune datasets`) or a folder")
    parser.add_argument("--data-dir", help="folder of <name>/{train,validation,test}.jsonl")
    parser.add_argument("--backbone", default=None, help="alias, hub id or local path")
    parser.add_argument("--num-layers", type=int, default=None, help="keep the first N layers")
    parser.add_argument(
        "--max-train-samples", type=int, default=None, metavar="N",
        help="train on a seeded random N of the training rows (default: all)",
    )  # fmt: skip
    parser.add_argument(
        "--max-eval-samples", type=int, default=None, metavar="N",
        help="a seeded random N of the validation rows, and of the test rows (default: all)",
    )  # fmt: skip
    parser.add_argument(
        "--epochs", type=float, default=None, metavar="E",
        help="epochs, fractions allowed (default: the paper's for the dataset; a search: the "
        "space's, and fixed at E in every trial when given)",
    )  # fmt: skip
    parser.add_argument(
        "--max-length", type=int, default=None, help="text: tokens kept per example (default 128)"
    )
    parser.add_argument(
        "--seed", type=int, default=None,
        help="the run's seed (default 42); a search: every trial's and its sampler's (default 0)",
    )  # fmt: skip
    parser.add_argument(
        "--max-audio-seconds",
        type=float,
        default=None,
        metavar="S",
        help="audio: cut longer clips at S seconds, saying how many (default 30); 0 refuses them",
    )
    add_validation_flag(parser)


def add_loss_kernel_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--loss-kernel",
        choices=LOSS_KERNELS,
        default=None,
        help="AS-Softmax's implementation: the fused Triton kernel (CUDA) or torch's; auto: "
        "the kernel on CUDA when triton is installed (default)",
    )


def add_plugin_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plugin",
        dest="plugins",
        action="append",
        default=None,
        metavar="MODULE",
        help="a module (import name or .py path) that registers losses (astune.losses.register); "
        "repeat for more (docs/extending.md)",
    )


def add_compile_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the model through torch.compile (on a GPU as CUDA graphs, lengths padded to "
        "a few buckets); off by default: on the CPU it measured slower (benchmarks/RESULTS.md)",
    )


def add_validation_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--validation-fraction",
        type=float,
        default=None,
        help="share of train carved as validation when a folder has none (default 0.1)",
    )


def add_tracking_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tracking-uri",
        default=None,
        help="MLflow tracking URI (default: the embedded sqlite store)",
    )


def add_storage_timeout_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long a call to an s3:// storage path is retried while the storage cannot be "
        f"reached, before the trial fails and is retried (default {DEFAULT_STORAGE_TIMEOUT:.0f})",
    )


def add_progress_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--progress-every",
        type=float,
        default=None,
        metavar="SECONDS",
        help="outside a terminal (a job's log, nohup), a line on how far the search is this "
        "often (default 60); MLflow's progress metric of each running trial at most every "
        "minute",
    )


def add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--verbose",
        action="store_true",
        default=None,
        help="Ray's and MLflow's own console output too (Ray's start-up notices, Tune's progress "
        "report and trial tracebacks, the trials' output, MLflow's INFO lines); default: "
        "astune's lines, warnings and errors",
    )


def add_checkpoint_flag(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--checkpoint-every",
        default=None,
        metavar="WHEN",
        help=f"resume checkpoints: 'eval' (every evaluation), 'end', or minutes such as '10m' "
        f"(default: {default})",
    )
