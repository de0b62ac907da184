"""`astune datasets --check`: does each registry entry's hub source still resolve? One listing
of the repository's files at the entry's revision per entry (``HfApi.dataset_info``), judged
without downloading any data: a loading script, a missing config or folder, no data files."""

from __future__ import annotations

import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlparse

from astune.data.hub import PARQUET_EXPORT_REVISION
from astune.data.spec import DatasetSpec

REACH_TIMEOUT_S = 3.0  # the whole reachability probe, name lookup included
LISTING_TIMEOUT_S = 20.0  # one repository listing
DATA_SUFFIXES = (".parquet", ".jsonl", ".json", ".csv", ".tsv", ".arrow", ".txt", ".zip", ".gz")


@dataclass(frozen=True)
class CheckRow:
    """One entry's verdict: ``status`` is ``OK``, ``local only`` or the one-line reason."""

    name: str
    source: str
    revision: str
    status: str


def hub_unreachable(
    endpoint: str, *, offline: bool, timeout: float = REACH_TIMEOUT_S
) -> str | None:
    """Why the hub at ``endpoint`` cannot be asked (``HF_HUB_OFFLINE``, or no TCP connection to
    it within ``timeout`` seconds, name lookup included), or None when it answers."""
    if offline:
        return "HF_HUB_OFFLINE is set, so the hub is not asked"
    url = urlparse(endpoint)
    host, port = url.hostname or "", url.port or (443 if url.scheme == "https" else 80)
    failure: list[str] = ["no answer"]

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            failure.clear()
        except OSError as err:
            failure[0] = f"{type(err).__name__}: {err}"

    # A thread, so that a name lookup that hangs cannot outlast the timeout.
    probe = threading.Thread(target=connect, daemon=True)
    probe.start()
    probe.join(timeout)
    if not failure:
        return None
    return f"no connection to {host}:{port} within {timeout:g} s ({failure[0]})"


def judge_listing(spec: DatasetSpec, files: Sequence[str]) -> str:
    """``OK``, or why ``spec``'s hub source cannot load, from the repository's file paths at
    its revision."""
    scripts = [f for f in files if f.endswith(".py") and "/" not in f]
    if scripts and spec.hub_revision != PARQUET_EXPORT_REVISION:
        return f"a loading script ({scripts[0]}), which datasets >= 4 refuses"
    data = [f for f in files if f.lower().endswith(DATA_SUFFIXES) and f != "dataset_infos.json"]
    if spec.hub_data_dir:
        data = [f for f in data if f.startswith(f"{spec.hub_data_dir}/")]
        if not data:
            return f"no data files under {spec.hub_data_dir}/ at this revision"
    if spec.hub_config and not any(_of_config(f, spec.hub_config) for f in data):
        return f"no data files of config {spec.hub_config!r}"
    return "OK" if data else "no data files"


def _of_config(path: str, config: str) -> bool:
    """Whether the file at ``path`` belongs to ``config``: in a folder of that name, or named
    after it."""
    *folders, name = path.split("/")
    return config in folders or name.startswith(config)


def check_registry(
    specs: Sequence[DatasetSpec], *, timeout: float = LISTING_TIMEOUT_S
) -> list[CheckRow]:
    """A row per entry: each hub source listed once (the caller checked the hub answers)."""
    from huggingface_hub import HfApi

    api = HfApi()
    rows = []
    for spec in specs:
        revision = spec.hub_revision or "main"
        if spec.local_only or spec.hub_id is None:
            rows.append(CheckRow(spec.name, spec.hub_id or "-", revision, "local only"))
            continue
        try:
            info = api.dataset_info(spec.hub_id, revision=spec.hub_revision, timeout=timeout)
            status = judge_listing(spec, [s.rfilename for s in info.siblings or []])
        except Exception as err:  # not found, gated, revision missing, timeout
            status = " ".join(f"{type(err).__name__}: {err}".split())[:160]
        rows.append(CheckRow(spec.name, spec.hub_source or "-", revision, status))
    return rows


def format_check(rows: Sequence[CheckRow]) -> str:
    """The rows as a plain-text table."""
    table = [("name", "source", "revision", "status")] + [
        (r.name, r.source, r.revision, r.status) for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row[:3], widths)) + "  " + row[3] for row in table
    ]
    lines.insert(1, "  ".join("-" * w for w in widths) + "  ------")
    return "\n".join(lines)
