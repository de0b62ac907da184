"""Shared fixtures; a skipped test fails the run, since CI must run every test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("ASTUNE_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The folder of real benchmark data laid out as ``<name>/{train,validation,test}.jsonl``."""
    if not (DATA_DIR / "sst5" / "train.jsonl").is_file():
        raise FileNotFoundError(f"real data not found under {DATA_DIR}; set ASTUNE_DATA_DIR")
    return DATA_DIR


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if skipped and exitstatus == 0:
        reporter.write_line(f"FAILED: {skipped} test(s) skipped; every test must run", red=True)
        session.exitstatus = 1
