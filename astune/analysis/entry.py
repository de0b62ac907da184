"""The command line of ``analysis/<study>.py``: one study (or the whole report) of one search."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from astune.analysis.report import Report

EXIT_USAGE = 2


def parse_args(prog: str, description: str, argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--experiment", required=True, help="search name = MLflow experiment")
    parser.add_argument(
        "--tracking-uri", default=None, help="MLflow tracking URI (default: the embedded store)"
    )
    parser.add_argument(
        "--output-dir", default=None, help="default: astune-runs/reports/<experiment>"
    )
    return parser.parse_args(argv)


def main(study: str | None, argv: Sequence[str] | None = None) -> int:
    """Run ``study`` (None: the whole report) and print where its output went; 2 on bad input."""
    from astune.analysis import report

    prog = f"analysis/{study or 'report'}.py"
    doc = f"the {study} study of one search" if study else "every study of one search, as report.md"
    args = parse_args(prog, doc, argv)
    try:
        if study is None:
            print(
                summary(
                    report.write_report(
                        args.experiment, output_dir=args.output_dir, tracking_uri=args.tracking_uri
                    )
                )
            )
            return 0
        from astune.store.experiment import load_runs

        runs = load_runs(args.experiment, args.tracking_uri)
        out = (
            Path(args.output_dir) if args.output_dir else report.default_output_dir(args.experiment)
        )
        result = report.run_study(study, runs, out)
    except (ValueError, OSError) as err:
        print(f"{prog}: error: {str(err).splitlines()[0]}", file=sys.stderr)
        return EXIT_USAGE
    print(result.title + ": " + (str(result.image) if result.image else "no figure"))
    if result.table:
        print(result.table)
    for note in result.notes:
        print(f"missing: {note}")
    return 0


def summary(written: "Report") -> str:
    """What `astune report` prints: the files, the notes, where the report was logged."""
    lines = [f"report: {written.path}"]
    for study in written.studies.values():
        lines.append(f"  {study.title}: {study.image if study.image else 'no figure'}")
        lines += [f"    missing: {note}" for note in study.notes]
    if written.logged:
        lines.append(f"logged on parent run {written.parent_run_id} as artifacts report/")
    else:
        lines.append(f"not logged on MLflow: {written.log_error}")
    return "\n".join(lines)
