"""The commands about data and backbones: `datasets`, `backbones`, `prepare sighan` and
`prepare data`."""

from __future__ import annotations

import argparse
import sys

from astune.cli.errors import EXIT_FAILED, CLIError, refusal


def datasets(args: argparse.Namespace) -> int:
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


def backbones(args: argparse.Namespace) -> int:
    from astune.backbones.registry import format_backbones_table

    print(format_backbones_table())
    return 0


def losses(args: argparse.Namespace) -> int:
    from astune.losses.catalogue import format_losses_table
    from astune.plugins import PluginError, load_plugins

    try:
        load_plugins(args.plugins or ())
    except PluginError as err:
        raise CLIError(str(err)) from None
    print(format_losses_table())
    return 0


def prepare(args: argparse.Namespace) -> int:
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
        raise CLIError(refusal(err, args)) from None
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
