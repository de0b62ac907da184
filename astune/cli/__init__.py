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

from astune.cli import data, runs, train
from astune.cli.errors import EXIT_FAILED, EXIT_USAGE, CLIError
from astune.cli.parser import build_parser

HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "search": runs.search,
    "train": train.train,
    "export": runs.export,
    "recommend": runs.recommend,
    "report": runs.report,
    "confirm": runs.confirm,
    "status": runs.status,
    "datasets": data.datasets,
    "backbones": data.backbones,
    "losses": data.losses,
    "prepare": data.prepare,
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
