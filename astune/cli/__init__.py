"""Command-line interface: argument parsing only (the parser is in :mod:`astune.cli.parser`);
each subcommand calls one function elsewhere.

Exit codes: 0 success, 1 a run that failed, 2 bad input (argparse's convention) or a
subcommand that is not built yet.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from astune.cli.parser import build_parser
from astune.config import INFOBATCH_FIELDS, SPEED_FIELDS
from astune.losses.catalogue import DELTA_CONTROL

if TYPE_CHECKING:
    from astune.config import TrainConfig

EXIT_FAILED = 1
EXIT_USAGE = 2


class CLIError(Exception):
    """Bad input found before any work starts; printed as one line, exit code 2."""


def _confirm(args: argparse.Namespace) -> int:
    from mlflow.exceptions import MlflowException

    from astune.search.confirm import ConfirmSettings, execute_confirm, prepare_confirm
    from astune.search.stop import SearchStopped

    names = ("experiment", "top", "seeds", "baseline", "front", "within", "tracking_uri")
    names += ("max_concurrent",)
    names += ("cpus_per_trial", "gpus_per_trial", "address", "storage_path", "storage_timeout")
    try:
        given = {k: getattr(args, k) for k in names if getattr(args, k) is not None}
        prepared = prepare_confirm(ConfirmSettings(**given))
    except (ValueError, OSError, MlflowException) as err:  # bad input found before Ray starts
        raise CLIError(str(err).splitlines()[0]) from None
    try:
        summary = execute_confirm(prepared)  # a failure from here on is a failed confirm (exit 1)
    except SearchStopped as stopped:  # SIGTERM or Ctrl-C: the runs ended, the rest run anew
        print(f"astune confirm: {stopped}", file=sys.stderr)
        return stopped.exit_code
    print(summary.format())
    return 0 if summary.rows else 1


def _datasets(args: argparse.Namespace) -> int:
    from astune.data import format_datasets_table

    if not args.check:
        print(format_datasets_table())
        return 0
    from huggingface_hub import constants

    from astune.data.hub_check import check_registry, format_check, hub_unreachable
    from astune.data.registry import REGISTRY

    reason = hub_unreachable(constants.ENDPOINT, offline=constants.HF_HUB_OFFLINE)
    if reason is not None:
        raise CLIError(
            f"the hub ({constants.ENDPOINT}) is unreachable: {reason}; `datasets --check` needs "
            "it (`datasets` alone lists the registry offline)"
        )
    rows = check_registry(list(REGISTRY.values()))
    print(format_check(rows))
    return 0 if all(row.status in ("OK", "local only") for row in rows) else 1


def _backbones(args: argparse.Namespace) -> int:
    from astune.backbones.registry import format_backbones_table

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
    "checkpoint_every",
)


# Where a resumed run reads its data, writes and trains may change (another mount, machine or
# GPU); the rest of its settings may not, or the resume would not be exact.
RESUME_MAY_CHANGE = ("output_dir", "data_dir", "device")


def _train_config(args: argparse.Namespace):
    """The run's config: ``--config FILE`` (as `export` writes it) overridden by explicit flags."""
    from astune.backbones.registry import DEFAULT_BACKBONE
    from astune.config import TrainConfig

    config = TrainConfig.from_yaml(args.config).to_dict() if args.config else {}
    config.update({k: getattr(args, k) for k in TRAIN_FLAGS if getattr(args, k) is not None})
    config.setdefault("output_dir", f"astune-runs/train/{config.get('dataset', 'run')}")
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


def _train(args: argparse.Namespace) -> int:
    from astune.cli.train_stop import TrainingStopped, stop_after_step
    from astune.training import Run
    from astune.training.hooks import ProgressBar

    bar = ProgressBar()
    with stop_after_step() as stop:  # SIGTERM, Ctrl-C: the step under way ends, then the run
        try:  # building the run reads the data and the backbone: what fails here is bad input
            config, state = _train_config(args), None
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
    print(f"run folder: {config.output_dir} (metrics.jsonl, final.json, checkpoint/)")
    return 0


def _search(args: argparse.Namespace) -> int:
    from astune.search.ending import TrackingBehind
    from astune.search.runner import execute_search, prepare_search
    from astune.search.settings import SearchError, settings_from_args
    from astune.search.stop import SearchStopped

    try:
        prepared = prepare_search(settings_from_args(args))
    except (ValueError, OSError) as err:  # bad input found before Ray starts
        raise CLIError(str(err).splitlines()[0]) from None
    try:
        summary = execute_search(prepared)  # a failure from here on is a failed search (exit 1)
    except SearchStopped as stopped:  # SIGTERM or Ctrl-C: the trials ended, resumable
        print(f"astune search: {stopped}", file=sys.stderr)
        return stopped.exit_code
    except TrackingBehind as behind:  # the trials ended; --resume writes what MLflow lacks
        print(f"astune search: {behind}", file=sys.stderr)
        return behind.exit_code
    except SearchError as err:  # refused once Ray runs: resources, another driver
        raise CLIError(str(err).splitlines()[0]) from None
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


def _prepare(args: argparse.Namespace) -> int:
    if args.kind == "data":
        return _prepare_data(args)
    from astune.data.errors import DataError
    from astune.data.sighan import prepare_sighan

    try:
        prepared = prepare_sighan(
            args.train,
            test=args.test,
            out=args.out,
            validation=args.validation,
            validation_fraction=args.validation_fraction,
            min_count=args.min_count,
            max_candidates=args.max_candidates,
            seed=args.seed,
        )
    except (DataError, ValueError) as err:
        raise CLIError(str(err)) from None
    print(prepared.summary())
    print(f"train on it: python -m astune train --dataset {args.out} --loss as_softmax")
    return 0


def _prepare_data(args: argparse.Namespace) -> int:
    from astune.data.errors import DataError
    from astune.data.prepare import (
        DEFAULT_DATASETS,
        check_request,
        default_out,
        hub_unreachable_reason,
        prepare_data,
    )

    try:  # the names and the folder, before the hub or datasets is imported
        names, out = check_request(args.datasets or DEFAULT_DATASETS, args.out or default_out())
    except DataError as err:
        raise CLIError(str(err)) from None
    reason = hub_unreachable_reason()
    if reason is not None:
        raise CLIError(
            f"{reason}; `prepare data` reads each dataset from it (or from a local "
            "mirror named by ASTUNE_HUB_MIRROR)"
        )
    try:
        prepared = prepare_data(names, out, force=args.force)
    except DataError as err:  # the hub unreachable, a repository changed: one line, exit 1
        print(f"astune prepare: failed: {err}", file=sys.stderr)
        return EXIT_FAILED
    print(prepared.summary())
    print(f"use it: ASTUNE_DATA_DIR={out} (or --data-dir {out})")
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
    "prepare": _prepare,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run one subcommand; returns the process exit code."""
    parser = build_parser()
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
