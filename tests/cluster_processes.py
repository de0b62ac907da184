"""The real services of the cluster test, each started as its own process group and ended by
PID: Ray nodes (`ray start`), an MLflow tracking server and a local S3-compatible server.

Every process this module starts is recorded; :meth:`Processes.end_all` ends each by its process
group and then by PID any leftover whose command line names one of this test's folders (Ray's
daemons carry its ``--temp-dir``). Never ``ray stop`` or a kill by name: other work shares the
machine.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from ports import free_port
from stores import new_store

BIN = Path(sys.executable).parent


@dataclass
class Processes:
    """The process groups a test started, its private folder (``root``: logs, stores) and Ray's
    temporary folder, short (``/tmp/astune-ray-*``) since Ray's unix sockets live under it and
    their paths may not exceed 107 bytes."""

    root: Path
    env: dict[str, str]
    groups: list[int] = field(default_factory=list)
    named: dict[str, int] = field(default_factory=dict)  # name -> the group last started so
    ray_dir: Path = field(
        default_factory=lambda: Path(tempfile.mkdtemp(prefix="astune-ray-", dir="/tmp"))
    )

    def start(
        self, name: str, argv: list[str], wait: bool = False, env: dict[str, str] | None = None
    ) -> subprocess.Popen:
        """Start ``argv`` in a new process group, its output in ``root/<name>.log``;
        ``wait``: for a command that exits once its daemons run (``ray start``). It runs in
        ``root``: what a command writes beside its working directory stays there."""
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 -- closed with the process
        process = subprocess.Popen(
            argv,
            env={**self.env, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=self.root,
        )
        self.groups.append(process.pid)
        self.named[name] = process.pid
        if wait and process.wait(timeout=120) != 0:
            raise RuntimeError(f"{name} failed: {self.tail(name)}")
        return process

    def tail(self, name: str, lines: int = 20) -> str:
        path = self.root / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def members(self, group: int) -> list[psutil.Process]:
        """The live processes of a process group (a daemon keeps its starter's group)."""
        found = []
        for proc in psutil.process_iter(["pid"]):
            try:
                if os.getpgid(proc.pid) == group:
                    found.append(proc)
            except (ProcessLookupError, psutil.Error):
                continue
        return found

    def end_group(self, group: int) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(group, sig)
            except ProcessLookupError:
                return
            if sig == signal.SIGTERM:
                time.sleep(1.0)

    def end_all(self) -> None:
        for group in reversed(self.groups):
            self.end_group(group)
        marks = (str(self.root), str(self.ray_dir))
        for proc in psutil.process_iter(["pid", "cmdline"]):
            cmdline = " ".join(proc.info.get("cmdline") or ())
            if any(mark in cmdline for mark in marks) and proc.pid != os.getpid():
                try:
                    proc.kill()
                except psutil.Error:
                    pass
        shutil.rmtree(self.ray_dir, ignore_errors=True)


def wait_for(check, what: str, timeout: float = 120.0, every: float = 0.5):
    """Poll ``check()`` until it returns a truthy value; AssertionError naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def start_head(procs: Processes, port: int, dashboard_port: int) -> None:
    procs.start(
        "ray-head",
        [
            str(BIN / "ray"),
            "start",
            "--head",
            f"--port={port}",
            "--num-cpus=1",
            "--node-ip-address=127.0.0.1",
            f"--temp-dir={procs.ray_dir}",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard_port}",
            f"--dashboard-agent-listen-port={free_port()}",
            "--object-store-memory=300000000",
            "--disable-usage-stats",
        ],
        wait=True,
    )


def start_worker(procs: Processes, port: int, name: str) -> int:
    """Join a worker node to the head at ``port``; returns its process group."""
    process = procs.start(
        name,
        [
            str(BIN / "ray"),
            "start",
            f"--address=127.0.0.1:{port}",
            "--num-cpus=1",
            "--node-ip-address=127.0.0.1",
            f"--dashboard-agent-listen-port={free_port()}",
            "--object-store-memory=300000000",
            "--disable-usage-stats",
        ],
        wait=True,
    )
    return process.pid


def raylet_of(procs: Processes, group: int) -> psutil.Process:
    (raylet,) = [p for p in procs.members(group) if p.name() == "raylet"]
    return raylet


MLFLOW_SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
"""MLflow 3.17's server also runs a job runner (8 processes) that astune never uses: measured
here, 20 CPU-s to start and 35 CPU-s every 30 s idle with it, 13 and 0.3 without."""


def start_mlflow(procs: Processes, port: int) -> str:
    """Launch an MLflow tracking server; returns its URI (ready after :func:`await_mlflow`)."""
    procs.start(
        "mlflow",
        [
            str(BIN / "mlflow"),
            "server",
            "--backend-store-uri",
            new_store(procs.root),
            "--artifacts-destination",
            str(procs.root / "mlflow-artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        env=MLFLOW_SERVER_ENV,
    )
    return f"http://127.0.0.1:{port}"


def await_mlflow(uri: str) -> None:
    wait_for(lambda: http_ok(f"{uri}/health"), "the MLflow server", timeout=90)


S3_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    # The AWS SDKs (pyarrow's C++ one, boto3) add a CRC checksum to each upload by default, which
    # moto checks in Python: that doubled its CPU per checkpoint (2.0 -> 1.05 CPU-s for 70 MB,
    # measured). Real S3 checks them on its side; the uploads still carry their MD5.
    "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
    "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
}
"""The local S3 server's credentials (moto takes any) and client settings, for pyarrow and boto3
through the environment."""


def start_s3(procs: Processes, port: int) -> str:
    """Launch a local S3-compatible server; returns its endpoint (ready after :func:`await_s3`)."""
    procs.start("moto", [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)])
    return f"http://127.0.0.1:{port}"


def await_s3(endpoint: str, bucket: str) -> None:
    """Wait for the S3 server and create ``bucket`` on it."""
    wait_for(lambda: http_ok(f"{endpoint}/moto-api/"), "the S3 server", timeout=60)
    s3_client(endpoint).create_bucket(Bucket=bucket)


@functools.cache
def s3_client(endpoint: str) -> Any:
    """One boto3 client per server: making one costs ~25 ms of CPU, and tests poll."""
    import boto3

    return boto3.client("s3", endpoint_url=endpoint)


def s3_keys(endpoint: str, bucket: str, prefix: str) -> list[str]:
    """The keys under ``prefix`` in ``bucket``, read from the server at ``endpoint``."""
    pages = s3_client(endpoint).get_paginator("list_objects_v2")
    listed = pages.paginate(Bucket=bucket, Prefix=prefix)
    return [item["Key"] for page in listed for item in page.get("Contents", [])]
