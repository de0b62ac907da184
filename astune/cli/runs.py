"""The commands that run trials with Ray or read past searches from MLflow: `search`,
`confirm`, `export`, `recommend` and `report`. Each checks its request before importing MLflow,
torch or Ray, so that bad input is refused in one line within a second."""

from __future__ import annotations

import argparse
import sys

from astune.cli.errors import CLIError, refused_as_bad_input
from astune.store.reader import existing_store


def search(args: argparse.Namespace) -> int:
    from astune.tuning.lifecycle.ending import TrackingBehind
    from astune.tuning.lifecycle.stop import SearchStopped
    from astune.tuning.runner import execute_search, prepare_search
    from astune.tuning.settings import SearchError, settings_from_args

    with refused_as_bad_input(flags=args):  # bad input found before Ray starts
        prepared = prepare_search(settings_from_args(args))
    for line in prepared.notes:
        print(line, flush=True)
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
    from astune.store.uri import mlflow_ui_command
    from astune.tuning.console import format_summary

    print()  # a blank line after the trials' table
    print(format_summary(summary, mlflow_ui_command(summary.tracking_uri)))
    return 0 if summary.best_objective is not None else 1


def confirm(args: argparse.Namespace) -> int:
    from astune.tuning.confirmation.confirm import ConfirmSettings

    names = ("experiment", "top", "seeds", "baseline", "front", "within", "tracking_uri")
    names += ("max_concurrent", "verbose", "plugins")
    names += ("cpus_per_trial", "gpus_per_trial", "address", "storage_path", "storage_timeout")
    given = {k: getattr(args, k) for k in names if getattr(args, k) is not None}
    settings = ConfirmSettings(**given)
    with refused_as_bad_input(flags=args):  # the flags and the store, before MLflow is imported
        settings.validate()  # loads the plugins: the losses the search's configs may name
        existing_store(settings.tracking_uri)
    from mlflow.exceptions import MlflowException

    from astune.tuning.confirmation.confirm import execute_confirm, prepare_confirm
    from astune.tuning.lifecycle.stop import SearchStopped

    with refused_as_bad_input(MlflowException, flags=args):  # bad input found before Ray starts
        prepared = prepare_confirm(settings)
    for line in prepared.plan.notes:  # e.g. fewer trials than --top: every one is confirmed
        print(line, flush=True)
    try:
        summary = execute_confirm(prepared)  # a failure from here on is a failed confirm (exit 1)
    except SearchStopped as stopped:  # SIGTERM or Ctrl-C: the runs ended, the rest run anew
        print(f"astune confirm: {stopped}", file=sys.stderr)
        return stopped.exit_code
    print(summary.format())
    return 0 if summary.rows else 1


def export(args: argparse.Namespace) -> int:
    from astune.api._export import export as export_trial

    with refused_as_bad_input(
        flags=args
    ):  # a bad store, experiment or format, no trial, an unwritable -o
        done = export_trial(
            args.experiment,
            format=args.format,
            within=args.within,
            pick=args.pick,
            output=args.output,
            tracking_uri=args.tracking_uri,
        )
    if done.path is None:
        print(done.text, end="")
    else:
        print(f"wrote {args.output} ({args.format}) from {done.trial.describe()}")
    return 0


def recommend(args: argparse.Namespace) -> int:
    from astune._checks import check_int
    from astune.data.resolve import resolve_dataset
    from astune.history.reference import reference_file

    with refused_as_bad_input(
        flags=args
    ):  # an unknown dataset, before torch and MLflow are imported
        resolve_dataset(args.dataset)
        for name in ("num_layers", "max_train_samples", "max_length"):
            if getattr(args, name) is not None:
                check_int(name, getattr(args, name), 1)
        reference = reference_file(args.reference)
    from mlflow.exceptions import MlflowException

    from astune.recommendation import format_recommendation, probe_options, recommend, write_space

    with refused_as_bad_input(MlflowException, flags=args):  # unknown dataset, bad data or store
        options = probe_options(
            validation_fraction=args.validation_fraction, backbone=args.probe_backbone
        )
        rec = recommend(
            args.dataset,
            tracking_uri=args.tracking_uri,
            data_dir=args.data_dir,
            probe_options=options,
            backbone=args.backbone,
            num_layers=args.num_layers,
            train_size=args.max_train_samples,
            max_length=args.max_length,
            reference=reference,
        )
        space = write_space(rec, args.dataset, args.write_space) if args.write_space else None
    print(format_recommendation(rec))
    if space is not None:
        print(
            f"search space: {space}; run it with: "
            f"python -m astune search --dataset {args.dataset} --space {space}"
        )
    return 0


def status(args: argparse.Namespace) -> int:
    """The search as its store holds it; ``--watch``: again every ``--every`` seconds until it
    is no longer RUNNING (or Ctrl-C)."""
    import time

    from astune.api._status import status as search_status

    if args.experiment is None:
        return _searches(args)
    while True:
        with refused_as_bad_input(flags=args):  # an unknown store or experiment
            found = search_status(args.experiment, tracking_uri=args.tracking_uri)
        if args.watch and sys.stdout.isatty():
            print("\033[H\033[J", end="")  # the screen cleared: the view redraws in place
        print(found, flush=True)
        if not args.watch or found.status != "RUNNING" or found.stale:
            return 0
        try:
            time.sleep(args.every)
        except KeyboardInterrupt:
            return 0


def _searches(args: argparse.Namespace) -> int:
    """`status` without --experiment: the store's searches, one a line."""
    if args.watch:
        raise CLIError("--watch follows one search: add --experiment NAME")
    with refused_as_bad_input(flags=args):  # an unknown store
        store = existing_store(args.tracking_uri)
    from astune.store.search_list import format_search_lines, search_lines

    print(format_search_lines(search_lines(store.uri), store.uri))
    return 0


def report(args: argparse.Namespace) -> int:
    with refused_as_bad_input(flags=args):  # before pandas and MLflow are imported
        existing_store(args.tracking_uri)
    from astune.analysis.entry import summary
    from astune.analysis.report import write_report

    with refused_as_bad_input(flags=args):  # an unknown store or experiment, an unwritable folder
        report = write_report(
            args.experiment, output_dir=args.output_dir, tracking_uri=args.tracking_uri
        )
    print(summary(report))
    return 0
