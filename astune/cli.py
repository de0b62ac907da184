"""Command-line interface: argument parsing only; each subcommand calls one function elsewhere.

Exit codes: 0 success, 1 a run that failed, 2 bad input (argparse's convention) or a
subcommand that is not built yet.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from astune.checkpoint_policy import SEARCH_DEFAULT, TRAIN_DEFAULT
from astune.config import SPEED_FIELDS
from astune.objectives import COSTS
from astune.search.settings import SAMPLERS

EXIT_FAILED = 1
EXIT_USAGE = 2


class CLIError(Exception):
    """Bad input found before any work starts; printed as one line, exit code 2."""


def _add_data_flags(parser: argparse.ArgumentParser) -> None:
    """Flags shared by ``train`` and ``search``: data, backbone and budget."""
    parser.add_argument("--dataset", help="registry name (see `astune datasets`) or a folder")
    parser.add_argument("--data-dir", help="folder of <name>/{train,validation,test}.jsonl")
    parser.add_argument("--backbone", default=None, help="alias, hub id or local path")
    parser.add_argument("--num-layers", type=int, default=None, help="keep the first N layers")
    parser.add_argument("--max-train-samples", type=int, default=None)
    parser.add_argument("--max-eval-samples", type=int, default=None)
    parser.add_argument("--epochs", type=float, default=None)
    parser.add_argument("--seed", type=int, default=None)
    _add_validation_flag(parser)


def _add_validation_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--validation-fraction",
        type=float,
        default=None,
        help="share of train carved as validation when a folder has none (default 0.1)",
    )


def _add_tracking_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tracking-uri",
        default=None,
        help="MLflow tracking URI (default: the embedded sqlite store)",
    )


def _add_checkpoint_flag(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--checkpoint-every",
        default=None,
        metavar="WHEN",
        help=f"resume checkpoints: 'eval' (every evaluation), 'end', or minutes such as '10m' "
        f"(default: {default})",
    )


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="astune", description="Hyperparameter search for AS-Softmax and AS-Speed."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    search = sub.add_parser("search", help="run a Ray Tune + Optuna search, tracked in MLflow")
    _add_data_flags(search)
    _add_tracking_flag(search)
    search.add_argument("--space", help="YAML search space (default: search_spaces/<dataset>.yaml)")
    search.add_argument("--num-samples", type=int, default=None)
    search.add_argument("--max-concurrent", type=int, default=None)
    search.add_argument("--cpus-per-trial", type=float, default=None)
    search.add_argument("--gpus-per-trial", type=float, default=None)
    search.add_argument(
        "--address", default=None, help="`auto` or ray://host:port to join a cluster"
    )
    search.add_argument("--storage-path", default=None)
    search.add_argument("--name", default=None, help="search name = MLflow experiment name")
    search.add_argument("--resume", action="store_true")
    search.add_argument("--losses", default=None, help="comma-separated losses to compare")
    search.add_argument(
        "--scheduler",
        choices=["asha", "none"],
        default=None,
        help="default: the space's (ASHA for one objective, none for several)",
    )
    search.add_argument(
        "--objectives",
        default=None,
        help="the metric and costs to minimise, e.g. objective,train_seconds (also "
        f"{', '.join(COSTS)}): a multi-objective search with a Pareto front",
    )
    search.add_argument(
        "--sampler", choices=list(SAMPLERS), default=None, help="Optuna's sampler (default: tpe)"
    )
    _add_checkpoint_flag(search, SEARCH_DEFAULT)

    train = sub.add_parser("train", help="one training run (the unit of a search trial)")
    _add_data_flags(train)
    train.add_argument("--config", help="YAML config written by `astune export`")
    train.add_argument("--loss", default=None)
    train.add_argument("--delta", type=float, default=None)
    train.add_argument("--warmup-ratio", type=float, default=None)
    train.add_argument("--lam", type=float, default=None)
    train.add_argument("--max-accum-steps", type=int, default=None)
    train.add_argument("--as-speed", action="store_true", default=None)
    # AS-Skip (issue 11)
    train.add_argument("--as-skip", action="store_true", default=None)
    train.add_argument("--skip-keep", type=float, default=None)
    train.add_argument("--skip-anneal", type=float, default=None)
    train.add_argument("--lr", type=float, default=None)
    train.add_argument("--batch-size", type=int, default=None)
    train.add_argument("--output-dir", default=None)
    train.add_argument(
        "--eval-every", type=int, default=None, help="evaluate every N optimizer steps"
    )
    train.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None)
    train.add_argument("--precision", choices=["auto", "fp32", "bf16"], default=None)
    _add_checkpoint_flag(train, TRAIN_DEFAULT)

    export = sub.add_parser("export", help="write the best config of a search as code or config")
    _add_tracking_flag(export)
    export.add_argument("--experiment", required=True)
    export.add_argument("--format", choices=["yaml", "json", "python", "hf"], default="yaml")
    export.add_argument("-o", "--output", default=None)
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

    recommend = sub.add_parser("recommend", help="recommend delta (and r) by task difficulty")
    _add_tracking_flag(recommend)
    recommend.add_argument("--dataset", required=True)
    recommend.add_argument("--data-dir", default=None)
    _add_validation_flag(recommend)
    recommend.add_argument("--write-space", default=None)
    recommend.add_argument(
        "--probe-backbone",
        default=None,
        help="the probe's backbone (default: MiniLM for text, the paper's ViT / wav2vec2 for "
        "the registry's image / audio datasets; needed for your own image or audio folder)",
    )

    report = sub.add_parser("report", help="the paper's analyses for one search, as PNG + markdown")
    _add_tracking_flag(report)
    report.add_argument("--experiment", required=True)
    report.add_argument("--output-dir", default=None)

    _add_confirm_parser(sub)
    sub.add_parser("datasets", help="list the dataset registry")
    sub.add_parser("backbones", help="list the backbone aliases")
    return parser


def _add_confirm_parser(sub: argparse._SubParsersAction) -> None:
    confirm = sub.add_parser(
        "confirm", help="re-run a search's best configs and a baseline over seeds"
    )
    _add_tracking_flag(confirm)
    confirm.add_argument("--experiment", required=True)
    confirm.add_argument(
        "--top", type=int, default=None, help="the K best trials (default 2; with --front: all)"
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
    confirm.add_argument("--max-concurrent", type=int, default=None)
    confirm.add_argument("--cpus-per-trial", type=float, default=None)
    confirm.add_argument("--gpus-per-trial", type=float, default=None)
    confirm.add_argument("--address", default=None)
    confirm.add_argument("--storage-path", default=None)


def _confirm(args: argparse.Namespace) -> int:
    from mlflow.exceptions import MlflowException

    from astune.search.confirm import ConfirmSettings, execute_confirm, prepare_confirm

    names = ("experiment", "top", "seeds", "baseline", "front", "within", "tracking_uri")
    names += ("max_concurrent",)
    names += ("cpus_per_trial", "gpus_per_trial", "address", "storage_path")
    try:
        given = {k: getattr(args, k) for k in names if getattr(args, k) is not None}
        prepared = prepare_confirm(ConfirmSettings(**given))
    except (ValueError, OSError, MlflowException) as err:  # bad input found before Ray starts
        raise CLIError(str(err).splitlines()[0]) from None
    summary = execute_confirm(prepared)  # a failure from here on is a failed confirm (exit 1)
    print(summary.format())
    return 0 if summary.rows else 1


def _datasets(args: argparse.Namespace) -> int:
    from astune.data import format_datasets_table

    print(format_datasets_table())
    return 0


def _backbones(args: argparse.Namespace) -> int:
    from astune.backbones import format_backbones_table

    print(format_backbones_table())
    return 0


TRAIN_FLAGS = (
    "dataset",
    "data_dir",
    "backbone",
    "num_layers",
    "max_train_samples",
    "max_eval_samples",
    "validation_fraction",
    "epochs",
    "seed",
    "loss",
    "delta",
    "warmup_ratio",
    *SPEED_FIELDS,
    "lr",
    "batch_size",
    "output_dir",
    "eval_every",
    "device",
    "precision",
    "checkpoint_every",
)


def _train_config(args: argparse.Namespace):
    """The run's config: ``--config FILE`` (as `export` writes it) overridden by explicit flags."""
    from astune.config import TrainConfig

    config = TrainConfig.from_yaml(args.config).to_dict() if args.config else {}
    config.update({k: getattr(args, k) for k in TRAIN_FLAGS if getattr(args, k) is not None})
    config.setdefault("output_dir", f"astune-runs/train/{config.get('dataset', 'run')}")
    if not args.config and args.backbone is None:
        config["backbone"] = "bert-base-cased"
    if not config.get("dataset"):
        raise CLIError("--dataset is required (or --config FILE)")
    return TrainConfig.from_dict(config).validate()


def _train(args: argparse.Namespace) -> int:
    from astune.training import Run
    from astune.training.hooks import ProgressBar

    try:  # building the run reads the data and the backbone: what fails here is bad input
        config = _train_config(args)
        run = Run(config, hooks=[ProgressBar()])
    except (ValueError, OSError) as err:
        raise CLIError(str(err).splitlines()[0]) from None
    final = run.train()  # a failure from here on is a failed run (exit 1)
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
    print(f"run folder: {config.output_dir} (metrics.jsonl, final.json, checkpoint/)")
    return 0


def _search(args: argparse.Namespace) -> int:
    from astune.search.runner import execute_search, prepare_search
    from astune.search.settings import settings_from_args

    try:
        prepared = prepare_search(settings_from_args(args))
    except (ValueError, OSError) as err:  # bad input found before Ray starts
        raise CLIError(str(err).splitlines()[0]) from None
    summary = execute_search(prepared)  # a failure from here on is a failed search (exit 1)
    from astune.search.console import format_summary
    from astune.store.uri import mlflow_ui_command

    print(format_summary(summary, mlflow_ui_command(summary.tracking_uri)))
    return 0 if summary.best_objective is not None else 1


def _report(args: argparse.Namespace) -> int:
    from astune.analysis.entry import summary
    from astune.analysis.report import write_report

    try:
        report = write_report(
            args.experiment, output_dir=args.output_dir, tracking_uri=args.tracking_uri
        )
    except (ValueError, OSError) as err:  # an unknown store or experiment, an unwritable folder
        raise CLIError(str(err).splitlines()[0]) from None
    print(summary(report))
    return 0


def _export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mlflow.exceptions import MlflowException

    from astune.export import find_best_trial, render
    from astune.export.pick import Pick

    try:
        pick = Pick(kind=args.pick or "best", within=args.within)
        best = find_best_trial(args.experiment, args.tracking_uri, pick=pick)
        text = render(best, args.format)
        if args.output is not None:
            Path(args.output).write_text(text)
    except (ValueError, OSError, MlflowException) as err:  # unknown experiment, no trial, bad store
        raise CLIError(str(err).splitlines()[0]) from None
    if args.output is None:
        print(text, end="")
    else:
        print(f"wrote {args.output} ({args.format}) from {best.describe()}")
    return 0


def _recommend(args: argparse.Namespace) -> int:
    from mlflow.exceptions import MlflowException

    from astune.recommend import format_recommendation, recommend, write_space

    try:
        carve = args.validation_fraction
        options = {} if carve is None else {"validation_fraction": carve}
        if args.probe_backbone is not None:
            options["backbone"] = args.probe_backbone
        rec = recommend(
            args.dataset,
            tracking_uri=args.tracking_uri,
            data_dir=args.data_dir,
            probe_options=options or None,
        )
        space = write_space(rec, args.dataset, args.write_space) if args.write_space else None
    except (ValueError, OSError, MlflowException) as err:  # unknown dataset, bad data or store
        raise CLIError(str(err).splitlines()[0]) from None
    print(format_recommendation(rec))
    if space is not None:
        print(
            f"search space: {space} (delta in [{rec.low:.2f}, {rec.high:.2f}]); run it with: "
            f"python -m astune search --dataset {args.dataset} --space {space}"
        )
    return 0


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "search": _search,
    "train": _train,
    "export": _export,
    "recommend": _recommend,
    "report": _report,
    "confirm": _confirm,
    "datasets": _datasets,
    "backbones": _backbones,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run one subcommand; returns the process exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return HANDLERS[args.command](args)
    except CLIError as err:
        print(f"astune {args.command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `astune datasets | head`
        sys.stderr.close()
        return 0
    except Exception as err:  # the run itself failed (a bug, out of memory, NaN): exit 1
        log = _write_traceback(args.command)
        lines = str(err).strip().splitlines()
        print(
            f"astune {args.command}: failed: {type(err).__name__}: {lines[0] if lines else ''} "
            f"(full traceback: {log})",
            file=sys.stderr,
        )
        return EXIT_FAILED


def _write_traceback(command: str) -> str:
    """The current exception's traceback in ``astune-runs/logs/`` (else the temp folder)."""
    import tempfile
    import time
    import traceback
    from pathlib import Path

    name = f"{command}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    for folder in (Path("astune-runs/logs"), Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder.resolve() / name
            path.write_text(traceback.format_exc())
            return str(path)
        except OSError:
            continue
    return "(not written: no writable folder)"
