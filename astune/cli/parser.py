"""The argument parser of ``python -m astune``: every subcommand and its flags (the handlers
are in :mod:`astune.cli`)."""

from __future__ import annotations

import argparse
import math

from astune.checkpoint_policy import SEARCH_DEFAULT
from astune.cli.flags import (
    add_checkpoint_flag,
    add_compile_flag,
    add_data_flags,
    add_loss_kernel_flag,
    add_plugin_flag,
    add_progress_flag,
    add_storage_timeout_flag,
    add_tracking_flag,
    add_validation_flag,
    add_verbose_flag,
)
from astune.cli.train_parser import add_train_parser
from astune.exporting import FORMATS
from astune.metrics.objectives import COSTS
from astune.space.files import SCHEDULER_TYPES
from astune.tuning.searchers.samplers import SAMPLERS


class OneLineParser(argparse.ArgumentParser):
    """argparse's errors (an unknown flag, a value outside the choices) in one line, exit 2,
    instead of the usage block and then the error; its subcommands' parsers are of this
    class too (``add_subparsers`` makes its parsers of the parser's own class)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand; ``main`` dispatches on ``command``."""
    parser = OneLineParser(
        prog="astune", description="Hyperparameter search for AS-Softmax and AS-Speed."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    _add_search_parser(sub)
    add_train_parser(sub)
    _add_export_parser(sub)
    _add_recommend_parser(sub)
    report = sub.add_parser("report", help="the paper's analyses for one search, as PNG + markdown")
    add_tracking_flag(report)
    report.add_argument("--experiment", required=True, help="the search's name (its --name)")
    report.add_argument(
        "--output-dir", default=None, help="default: astune-runs/reports/<experiment>"
    )

    _add_confirm_parser(sub)
    _add_prepare_parser(sub)
    datasets = sub.add_parser("datasets", help="list the dataset registry")
    datasets.add_argument(
        "--check",
        action="store_true",
        help="ask the hub whether each entry's source still resolves (lists files only)",
    )
    status = sub.add_parser(
        "status", help="a running or finished search, from its store; without --experiment, "
        "the store's searches, one a line",
    )  # fmt: skip
    add_tracking_flag(status)
    status.add_argument(
        "--experiment", help="the search's name (its --name); left out: list the store's searches"
    )
    status.add_argument(
        "--watch", action="store_true",
        help="show it again until it is no longer running (needs --experiment)",
    )  # fmt: skip
    status.add_argument(
        "--every", type=_positive_seconds, default=10.0, metavar="SECONDS",
        help="with --watch: seconds between two views (default 10)",
    )  # fmt: skip
    sub.add_parser("backbones", help="list the backbone aliases")
    losses = sub.add_parser("losses", help="list the losses: the built-ins and the plugins'")
    add_plugin_flag(losses)
    return parser


def _add_search_parser(sub: argparse._SubParsersAction) -> None:
    """``search``: a Ray Tune + Optuna search of a space, tracked in MLflow."""
    search = sub.add_parser("search", help="run a Ray Tune + Optuna search, tracked in MLflow")
    add_data_flags(search)
    add_tracking_flag(search)
    search.add_argument("--space", help="YAML search space (default: search_spaces/<dataset>.yaml)")
    add_loss_kernel_flag(search)
    add_compile_flag(search)
    add_plugin_flag(search)
    add_progress_flag(search)
    search.add_argument(
        "--warm-start",
        action="store_true",
        default=None,
        help="search the space warmed by `astune recommend` (its ranges and seed points)",
    )
    search.add_argument(
        "--no-portfolio",
        dest="portfolio",
        action="store_false",
        default=None,
        help="do not run first the configs that won on past tasks of the backbone (the "
        "packaged prior's and the store's searches); search the space as given",
    )
    search.add_argument(
        "--reference",
        default=None,
        metavar="FILE",
        help="the reference trials of --warm-start and the portfolio beside the store's "
        "(default: the prior packaged with astune; 'none': the store's alone)",
    )
    search.add_argument(
        "--probe-backbone",
        default=None,
        help="--warm-start's probe backbone, as recommend's (needed for your own image or "
        "audio folder)",
    )
    search.add_argument(
        "--num-samples", type=int, default=None, metavar="N",
        help="trials in all, the portfolio's first configs among them (default: the space's)",
    )  # fmt: skip
    _add_resource_flags(search, inherited=False)
    search.add_argument(
        "--address", default=None, help="`auto` or ray://host:port to join a cluster"
    )
    search.add_argument(
        "--storage-path", default=None,
        help="Ray Tune's trial folders and checkpoints: a folder, or s3:// for a cluster "
        "(default: astune-runs/ray)",
    )  # fmt: skip
    add_storage_timeout_flag(search)
    search.add_argument("--name", default=None, help="search name = MLflow experiment name")
    search.add_argument(
        "--resume", action="store_true",
        help="continue the search named --name (default astune-<dataset>) where it stopped",
    )  # fmt: skip
    search.add_argument("--losses", default=None, help="comma-separated losses to compare")
    search.add_argument(
        "--scheduler",
        choices=[t for t in SCHEDULER_TYPES if t != "auto"],
        default=None,
        help="default: the space's (asha: successive halving; with several objectives it "
        "ranks trials by non-dominated sorting); hyperband: asynchronous Hyperband, every "
        "bracket (one objective); none: no early stopping",
    )
    search.add_argument(
        "--objectives",
        default=None,
        help="the metric and costs to minimise, e.g. objective,train_seconds (also "
        f"{', '.join(COSTS)}): a multi-objective search with a Pareto front",
    )
    search.add_argument(
        "--sampler",
        choices=list(SAMPLERS),
        default=None,
        help="Optuna's sampler (default: tpe; cmaes searches one objective only)",
    )
    add_checkpoint_flag(search, SEARCH_DEFAULT)
    add_verbose_flag(search)
    search.add_argument(
        "--keep-checkpoints",
        action="store_true",
        default=None,
        help="keep finished trials' checkpoints and best weights on the storage path (default: "
        "deleted when a trial finishes; only an unfinished trial resumes from them)",
    )


def _add_export_parser(sub: argparse._SubParsersAction) -> None:
    """``export``: a search's best config (or a front point) as code or config."""
    export = sub.add_parser("export", help="write the best config of a search as code or config")
    add_tracking_flag(export)
    export.add_argument("--experiment", required=True, help="the search's name (its --name)")
    export.add_argument(
        "--format", choices=FORMATS, default="yaml",
        help="yaml (default) or json: a config `astune train --config` reads (json: beside "
        "its trial's ids and score); python: a script that trains it; hf: a transformers "
        "Trainer script",
    )  # fmt: skip
    export.add_argument("-o", "--output", default=None, help="the file (default: standard output)")
    point = export.add_mutually_exclusive_group()
    point.add_argument(
        "--within",
        type=float,
        default=None,
        metavar="PTS",
        help="a multi-objective search: the cheapest Pareto-front trial whose metric is at most "
        "PTS percentage points below the best",
    )
    point.add_argument(
        "--pick",
        choices=["best", "fastest"],
        default=None,
        help="best metric (default) or the cheapest Pareto-front trial",
    )


def _add_recommend_parser(sub: argparse._SubParsersAction) -> None:
    """``recommend``: delta, r and what history transfers, by task difficulty."""
    recommend = sub.add_parser(
        "recommend", help="delta and r by task difficulty, and the configs a search runs first"
    )
    add_tracking_flag(recommend)
    recommend.add_argument(
        "--dataset", required=True, help="registry name (see `astune datasets`) or a folder"
    )
    recommend.add_argument(
        "--data-dir", default=None, help="folder of <name>/{train,validation,test}.jsonl"
    )
    add_validation_flag(recommend)
    recommend.add_argument(
        "--write-space", default=None, metavar="FILE",
        help="write the space a search would run (the portfolio first), for `search --space`",
    )  # fmt: skip
    recommend.add_argument(
        "--backbone", default=None, help="the search's backbone (default: the dataset's)"
    )
    recommend.add_argument("--num-layers", type=int, default=None, help="the search's layers")
    recommend.add_argument(
        "--max-length", type=int, default=None,
        help="the search's tokens per sample (default: the search's, 128)",
    )  # fmt: skip
    recommend.add_argument(
        "--max-train-samples",
        type=int,
        default=None,
        help="the search's training rows (default: the dataset's)",
    )
    recommend.add_argument(
        "--reference",
        default=None,
        metavar="FILE",
        help="reference trials beside the store's (default: the prior packaged with astune); "
        "'none': the store's alone",
    )
    recommend.add_argument(
        "--probe-backbone",
        default=None,
        help="the probe's backbone (default: MiniLM for text, the paper's ViT / wav2vec2 for "
        "the registry's image / audio datasets; needed for your own image or audio folder)",
    )


def _add_prepare_parser(sub: argparse._SubParsersAction) -> None:
    prepare = sub.add_parser("prepare", help="bring a dataset into astune's layout")
    kinds = prepare.add_subparsers(dest="kind", required=True)
    sighan = kinds.add_parser(
        "sighan",
        help="Chinese spelling check data (CSC JSON records, or SIGHAN's INPUT,TRUTH files) as "
        "a token task over candidate characters",
    )
    sighan.add_argument(
        "--train", nargs="+", required=True, metavar="FILE", help="the training files"
    )
    sighan.add_argument("--test", required=True, metavar="FILE", help="the test file")
    sighan.add_argument(
        "--validation", default=None, metavar="FILE",
        help="the validation file (default: carved from train, --validation-fraction)",
    )  # fmt: skip
    sighan.add_argument(
        "--out", required=True, metavar="DIR", help="where the dataset's folder is written"
    )
    sighan.add_argument(
        "--validation-fraction",
        type=float,
        default=0.1,
        help="share of train carved out as validation when --validation is not given",
    )
    sighan.add_argument(
        "--min-count", type=int, default=1, help="a candidate character's least train count"
    )
    sighan.add_argument(
        "--max-candidates", type=int, default=None, help="keep the N most frequent (paper: 5201)"
    )
    sighan.add_argument("--seed", type=int, default=42, help="the split's seed (default 42)")
    data = kinds.add_parser(
        "data",
        help="registry datasets from their hub sources, in the shared data folder's layout "
        "(<out>/<name>/{train,validation,test}.jsonl and dataset.json)",
    )
    data.add_argument(
        "--datasets",
        default=None,
        metavar="NAMES",
        help="comma-separated registry names with a hub source (default: the four the tests "
        "read: sst5,clinc_oos,conll2003,go_emotions)",
    )
    data.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="where to write (default: $XDG_CACHE_HOME/astune/data, else ~/.cache/astune/data, "
        "the folder the tests fall back to)",
    )
    data.add_argument(
        "--force", action="store_true", help="write again the datasets DIR holds complete already"
    )


def _at_least_one(text: str) -> int:
    """``--top K``: an integer >= 1, or one line naming the value and the accepted range."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer in [1, inf), but got {text!r}")
    return value


def _add_confirm_parser(sub: argparse._SubParsersAction) -> None:
    confirm = sub.add_parser(
        "confirm", help="re-run a search's best configs and a baseline over seeds"
    )
    add_tracking_flag(confirm)
    add_plugin_flag(confirm)
    confirm.add_argument("--experiment", required=True, help="the search's name (its --name)")
    confirm.add_argument(
        "--top",
        type=_at_least_one,
        default=None,
        metavar="K",
        help="at most the K best trials (default 2; with --front: all); fewer when fewer ran to "
        "the end (or are on the front)",
    )
    confirm.add_argument(
        "--front",
        action="store_true",
        default=None,
        help="a multi-objective search: the trials of its Pareto front, cheapest first",
    )
    confirm.add_argument(
        "--within",
        type=float,
        default=None,
        metavar="PTS",
        help="with --front: 'faster at equal accuracy' allows the metric PTS percentage points "
        "below the baseline (default 0.5)",
    )
    confirm.add_argument("--seeds", type=int, default=None, help="N >= 2 seeds (default 3)")
    confirm.add_argument("--baseline", default=None, help="the baseline loss (default softmax)")
    _add_resource_flags(confirm, inherited=True)
    confirm.add_argument(
        "--address", default=None, help="`auto` or ray://host:port (default: the search's)"
    )
    confirm.add_argument(
        "--storage-path", default=None, help="a folder or s3:// URI (default: the search's)"
    )
    add_storage_timeout_flag(confirm)
    add_verbose_flag(confirm)


def _add_resource_flags(parser: argparse.ArgumentParser, *, inherited: bool) -> None:
    """How many trials run at once and what each holds (``inherited``: confirm's, whose unset
    values are the search's)."""
    own = ("as many as the resources fit", "1", "0, the trials run on the CPU")
    concurrent, cpus, gpus = ("the search's",) * 3 if inherited else own
    parser.add_argument(
        "--max-concurrent", type=int, default=None, metavar="K",
        help=f"at most K trials at once (default: {concurrent})",
    )  # fmt: skip
    parser.add_argument(
        "--cpus-per-trial", type=float, default=None, metavar="C",
        help=f"CPUs a trial holds (default: {cpus})",
    )  # fmt: skip
    parser.add_argument(
        "--gpus-per-trial", type=float, default=None, metavar="G",
        help=f"GPUs a trial holds, a fraction to share a card (default: {gpus})",
    )  # fmt: skip


def _positive_seconds(text: str) -> float:
    """A number of seconds above 0 (argparse's one-line error otherwise)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"expected seconds above 0, got {text!r}")
    return value
