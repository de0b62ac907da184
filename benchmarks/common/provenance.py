"""Where every saved result came from: one entry per file in the ``MANIFEST.json`` of its folder.

An entry names the script and its arguments, the commit, the machine, the date (UTC), the
SHA-256 digests of the inputs the script read and of the file itself; ``tests/
test_benchmark_provenance.py`` checks that every file under a study's ``results/`` has one and
that the file is still the one recorded. A script calls :func:`record` after it writes a file;
a result made elsewhere (a lent GPU machine) is entered with ``python -m
benchmarks.common.provenance add FILE ...`` from the numbers the run printed.

    {"as_speed_cpu.json": {"script": "python -m benchmarks.trial_speed.as_speed",
                           "args": ["--seeds", "3"], "commit": "b3c2511...", "machine": "...",
                           "date": "2026-11-28T20:15:00Z",
                           "inputs": {"data/sst5": "9f2c..."}, "sha256": "41d0..."}}
"""

from __future__ import annotations

import argparse
import datetime as dt
import fcntl
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

MANIFEST = "MANIFEST.json"
OWN_FILES = (MANIFEST, MANIFEST + ".lock")
"""The manifest and its lock: the files of a results folder that are no result."""
FIELDS = ("script", "args", "commit", "machine", "date", "inputs", "sha256")
"""What every entry holds, in this order."""
GENERATED = "generated from the arguments"
"""The input name of a benchmark that reads no file: its inputs are made from its arguments
(sizes, seeds), so their digest is the arguments' own."""


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file, or of a folder's files (names and bytes, in sorted order)."""
    digest = hashlib.sha256()
    if path.is_dir():
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(file.relative_to(path).as_posix().encode() + b"\0")
            digest.update(bytes.fromhex(sha256_of(file)))
        return digest.hexdigest()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_inputs(data_dir: str | Path | None, datasets: Iterable[str]) -> dict[str, str]:
    """The digests of the dataset folders a benchmark trained or scored on, named
    ``data/<dataset>`` (``data_dir`` default: ``$ASTUNE_DATA_DIR``)."""
    root = Path(data_dir or os.environ.get("ASTUNE_DATA_DIR", "../shared/data"))
    return {f"data/{name}": sha256_of(root / name) for name in datasets}


def generated_inputs(args: Mapping[str, Any] | argparse.Namespace) -> dict[str, str]:
    """The digest of a benchmark's arguments, for one whose inputs are made from them."""
    values = vars(args) if isinstance(args, argparse.Namespace) else dict(args)
    text = json.dumps(values, sort_keys=True, default=str)
    return {GENERATED: hashlib.sha256(text.encode()).hexdigest()}


def running_script() -> str:
    """The command that runs this process's script: ``python -m <module>`` under ``-m``."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name:
        return f"python -m {spec.name.removesuffix('.__main__')}"
    return f"python {sys.argv[0]}"


def record(
    path: str | Path,
    *,
    inputs: Mapping[str, str],
    machine: str,
    args: list[str] | None = None,
    script: str | None = None,
    commit: str | None = None,
    date: str | None = None,
) -> dict[str, Any]:
    """Enter ``path`` (a file just written) in the manifest of its folder and return its entry.

    ``inputs``: name -> SHA-256 (:func:`data_inputs`, :func:`generated_inputs`, a table's digest);
    ``args`` default to this process's arguments, ``script`` to :func:`running_script`, ``commit``
    to the checkout's now (``+dirty`` with changes: a script that runs for minutes passes the one
    it read at its start, before the tree could change), ``date`` to now (UTC, ISO 8601).
    """
    from benchmarks.common.harness import commit as checkout_commit

    path = Path(path).resolve()
    check_inputs(path, inputs)
    entry = {
        "script": script or running_script(),
        "args": list(sys.argv[1:] if args is None else args),
        "commit": commit or checkout_commit(),
        "machine": machine,
        "date": date or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "inputs": dict(inputs),
        "sha256": sha256_of(path),
    }
    manifest = manifest_of(path)
    # Runs side by side (trial_speed.sst5_side_by_side) enter their files in one manifest: the
    # lock makes each read-modify-write whole, the rename leaves no half-written file.
    with open(manifest.with_name(MANIFEST + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = read_manifest(manifest)
        entries[path.relative_to(manifest.parent).as_posix()] = entry
        partial = manifest.with_name(MANIFEST + ".part")
        partial.write_text(json.dumps(dict(sorted(entries.items())), indent=1) + "\n")
        partial.replace(manifest)
    return entry


def record_each(
    paths: Iterable[str | Path | None],
    *,
    inputs: Mapping[str, str],
    machine: str,
    commit: str | None = None,
) -> None:
    """:func:`record` every one of ``paths`` a script wrote (empty, ``-`` or missing: skipped,
    for an output its flags turned off); ``commit`` as :func:`record` takes it."""
    for path in paths:
        if path and str(path) != "-" and Path(path).is_file():
            record(path, inputs=inputs, machine=machine, commit=commit)


def check_inputs(path: Path, inputs: Mapping[str, str]) -> None:
    """One clear error for a result entered without inputs or with a digest that is none."""
    if not inputs:
        raise ValueError(f"{path}: name the inputs it was made from (or use generated_inputs)")
    for name, digest in inputs.items():
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise ValueError(
                f"{path}: the digest of input {name!r} is {digest!r}; "
                "expected a SHA-256 of 64 hexadecimal digits (sha256_of)"
            )


def manifest_of(path: Path) -> Path:
    """The manifest a file is listed in: that of the nearest ``results`` folder above it, else
    the one beside it."""
    for folder in path.resolve().parents:
        if folder.name == "results":
            return folder / MANIFEST
    return path.resolve().parent / MANIFEST


def read_manifest(manifest: Path) -> dict[str, dict[str, Any]]:
    """The entries of ``manifest`` (empty when there is none yet)."""
    return json.loads(manifest.read_text()) if manifest.exists() else {}


def problems(results: Path) -> list[str]:
    """What is wrong with the provenance of a ``results`` folder: a file with no entry, an
    entry with a field missing or empty, a file changed since it was entered, an entry for no
    file. Empty when every file says where it came from."""
    entries = read_manifest(results / MANIFEST)
    found = []
    files = sorted(p for p in results.rglob("*") if p.is_file() and p.name not in OWN_FILES)
    for file in files:
        name = file.relative_to(results).as_posix()
        entry = entries.get(name)
        if entry is None:
            found.append(f"{file}: not in {MANIFEST}")
            continue
        lacking = [f for f in FIELDS if f not in entry or entry[f] in (None, "", {})]
        if lacking:
            found.append(f"{file}: its entry lacks {', '.join(lacking)}")
        elif entry["sha256"] != sha256_of(file):
            found.append(f"{file}: changed since it was entered (sha256 differs)")
    listed = {f.relative_to(results).as_posix() for f in files}
    found += [f"{results / name}: entered but missing" for name in sorted(set(entries) - listed)]
    return found


def main(argv: list[str] | None = None) -> None:
    """``add FILE``: enter a file made elsewhere (a lent GPU machine's output copied here)."""
    p = argparse.ArgumentParser(description=main.__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add", help="enter FILE in its folder's manifest")
    add.add_argument("file", type=Path)
    add.add_argument("--script", required=True, help="the command that made it")
    add.add_argument("--args", default="", help="its arguments, one string (split on spaces)")
    add.add_argument("--commit", required=True)
    add.add_argument("--machine", required=True, help="the card or CPU and the versions")
    add.add_argument("--date", required=True, help="when it ran, UTC ISO 8601")
    add.add_argument("--input", action="append", default=[], metavar="NAME=SHA256")
    args = p.parse_args(argv)
    inputs = dict(item.split("=", 1) for item in args.input)
    entry = record(
        args.file,
        inputs=inputs,
        machine=args.machine,
        args=args.args.split(),
        script=args.script,
        commit=args.commit,
        date=args.date,
    )
    print(json.dumps(entry, indent=1))


if __name__ == "__main__":
    main()
