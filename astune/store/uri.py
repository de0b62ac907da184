"""Tracking URIs: the embedded default, absolute forms trials can share, fast reachability checks.

Torch-free and Ray-free; MLflow itself is not imported either (an HTTP check is one GET).
"""

from __future__ import annotations

import base64
import os
import shlex
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote, urlsplit

from astune.store.conventions import TrackingError

T = TypeVar("T")


def open_sqlite_locked(url: str, what: str, open_store: Callable[[], T]) -> T:
    """``open_store()`` for the ``sqlite:///`` store at ``url`` under a file lock beside its
    database (two processes creating one fresh store at once would both create its tables).
    Raises a one-line TrackingError naming ``what``, the URL and the error."""
    import fcntl

    database = Path(url[len("sqlite:///") :].partition("?")[0])
    try:
        database.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{database}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                return open_store()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    except Exception as err:
        lines = str(err).strip().splitlines()
        raise TrackingError(
            f"{what} {url} cannot be opened: {type(err).__name__}: {lines[0] if lines else ''}"
        ) from None


_DATABRICKS = ("databricks", "databricks-uc")


def default_tracking_uri() -> str:
    """``sqlite:///<cwd>/astune-runs/mlflow.db``; creates the folder."""
    folder = Path.cwd() / "astune-runs"
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder.resolve() / 'mlflow.db'}"


def resolve_tracking_uri(uri: str | None) -> str:
    """Make a tracking URI independent of the working directory (trials change it).

    ``None`` gives :func:`default_tracking_uri`; ``sqlite:///rel.db``, ``file:`` URIs and plain
    paths become absolute (a plain path ending in ``.db``/``.sqlite``/``.sqlite3`` is a SQLite
    store, any other a file store); ``http(s)://`` and other schemes are kept.
    """
    if uri is None or not uri.strip():
        return default_tracking_uri()
    uri = uri.strip()
    if uri.startswith("sqlite:"):
        return _sqlite_uri(_sqlite_path(uri), uri.partition("?")[2])
    if uri.startswith("file:"):
        return _absolute(_file_path(uri)).as_uri()
    if uri.startswith(("http://", "https://")):
        return uri.rstrip("/")
    if uri in _DATABRICKS or "://" in uri:
        return uri
    path = _absolute(uri)
    if path.suffix in (".db", ".sqlite", ".sqlite3"):
        return _sqlite_uri(path)
    return path.as_uri()


def _absolute(path: str | Path) -> Path:
    return Path(path).expanduser().resolve()


def _sqlite_uri(path: Path, query: str = "") -> str:
    return f"sqlite:///{path}" + (f"?{query}" if query else "")


def _sqlite_path(uri: str) -> Path:
    """The absolute database path of a ``sqlite:///`` URI."""
    rest = uri[len("sqlite:") :].partition("?")[0]
    if not rest.startswith("///") or rest[3:] in ("", ":memory:"):
        raise TrackingError(
            f"tracking URI {uri!r} is not a SQLite file: write sqlite:///relative/path.db or "
            "sqlite:////absolute/path.db (an in-memory store cannot be shared with trials)."
        )
    return _absolute(unquote(rest[3:]))


def _file_path(uri: str) -> str:
    parts = urlsplit(uri)
    if parts.netloc not in ("", "localhost"):
        raise TrackingError(f"tracking URI {uri!r} names a remote host; use a local path.")
    return unquote(parts.path) or "."


TRACKING_SCHEMES = (
    "sqlite",
    "file",
    "http",
    "https",
    "postgresql",
    "mysql",
    "mssql",
    "databricks",
    "databricks-uc",
    "uc",
)
"""The schemes of the tracking stores MLflow writes runs to (``postgresql+psycopg2`` counts as
``postgresql``)."""


def check_tracking_uri(uri: str | None, *, timeout: float = 5.0) -> None:
    """Fail fast, before any trial starts, when the tracking store cannot be used.

    http(s): one GET of the experiments-search endpoint with ``timeout`` seconds and no retries
    (MLflow's own client retries for minutes). SQLite and file stores: the folder is created if
    needed and must be writable. The other schemes of :data:`TRACKING_SCHEMES` (databases,
    Databricks) are not checked further; a scheme outside them is refused.

    Raises:
        TrackingError: one line naming the URI and the problem.
    """
    uri = resolve_tracking_uri(uri)
    scheme = uri.split("://", 1)[0].split("+", 1)[0] if "://" in uri else uri.split(":", 1)[0]
    if scheme not in TRACKING_SCHEMES:
        raise TrackingError(
            f"tracking URI {uri!r} has the scheme {scheme!r}, which MLflow does not store runs "
            f"in; accepted: {', '.join(TRACKING_SCHEMES)} (or a folder path)"
        )
    if uri.startswith(("http://", "https://")):
        _check_http(uri, timeout)
    elif uri.startswith("sqlite:"):
        _check_writable(_sqlite_path(uri), uri)
    elif uri.startswith("file:"):
        folder = _absolute(_file_path(uri))
        _check_writable(folder / "meta.yaml", uri)


def _check_writable(file: Path, uri: str) -> None:
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise TrackingError(f"tracking store {uri}: cannot create {file.parent}: {err}") from None
    target = file if file.exists() else file.parent
    if not os.access(target, os.W_OK):
        raise TrackingError(f"tracking store {uri}: {target} is not writable.")


def _check_http(uri: str, timeout: float) -> None:
    url = f"{uri}/api/2.0/mlflow/experiments/search?max_results=1"
    request = urllib.request.Request(url, headers=_auth_headers())
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return
    except urllib.error.HTTPError as err:
        if err.code in (401, 403):
            problem = (
                f"refused the credentials (HTTP {err.code}); set MLFLOW_TRACKING_TOKEN or "
                "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"
            )
        elif err.code == 404:
            problem = "answers, but is not an MLflow tracking server (HTTP 404)"
        else:
            problem = f"answered HTTP {err.code} {err.reason}"
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        problem = f"is unreachable ({reason or type(err).__name__}; timeout {timeout:g} s)"
    raise TrackingError(f"MLflow tracking server {uri} {problem}.")


def _auth_headers() -> dict[str, str]:
    if token := os.environ.get("MLFLOW_TRACKING_TOKEN"):
        return {"Authorization": f"Bearer {token}"}
    user = os.environ.get("MLFLOW_TRACKING_USERNAME")
    password = os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if user and password:
        basic = base64.b64encode(f"{user}:{password}".encode()).decode()
        return {"Authorization": f"Basic {basic}"}
    return {}


def mlflow_ui_command(tracking_uri: str | None) -> str:
    """The command that shows the runs: ``mlflow ui --backend-store-uri URI`` for a local
    store; for a tracking server (which already serves its UI) a command opening it."""
    uri = resolve_tracking_uri(tracking_uri)
    if uri.startswith(("http://", "https://")):
        return f"python -m webbrowser {shlex.quote(uri)}"
    return f"mlflow ui --backend-store-uri {shlex.quote(uri)}"


def artifact_location(tracking_uri: str, experiment_name: str) -> str | None:
    """Where a new experiment keeps its artifacts: next to a SQLite database (MLflow's default,
    ``./mlruns``, depends on the working directory); the store's own choice otherwise."""
    if not tracking_uri.startswith("sqlite:"):
        return None
    folder = _sqlite_path(tracking_uri).parent / "artifacts" / _safe_name(experiment_name)
    return folder.as_uri()


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "experiment"
