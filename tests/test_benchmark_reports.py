"""Every saved AS-Speed/AS-Skip benchmark file prints its report again, as RESULTS.md says
(`as_speed.py --from-json FILE`), whatever columns the benchmark has gained since it ran; so
does the paper's claims file, without writing over it."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from benchmarks.paper_claims import RESULTS as CLAIMS_RESULTS
from benchmarks.trial_speed import RESULTS as SPEED_RESULTS

SAVED = sorted(p for p in SPEED_RESULTS.glob("as_*.json") if "summary" in json.loads(p.read_text()))


@pytest.fixture
def as_speed():
    return importlib.import_module("benchmarks.trial_speed.as_speed")


@pytest.fixture
def paper_claims():
    return importlib.import_module("benchmarks.paper_claims.paper_claims")


def test_there_are_saved_reports_to_read():
    assert len(SAVED) >= 4, [p.name for p in SAVED]


@pytest.mark.parametrize("saved", SAVED, ids=lambda p: p.stem)
def test_a_saved_report_prints_again(saved: Path, as_speed, capsys):
    report = as_speed.main(["--from-json", str(saved), "--plot", ""])
    lines = capsys.readouterr().out.splitlines()
    tables = 4 if "seeds" in report else 3  # timing, samples, per-unit costs; over seeds
    for variant in report["summary"]:
        assert sum(line.startswith(f"| {variant} |") for line in lines) == tables
    if "seeds" in report:
        seeds = len(next(iter(report["runs"].values())))
        assert any(line.startswith(f"Over {seeds} seed(s)") for line in lines)


def test_the_claims_print_again_and_nothing_is_written(paper_claims, tmp_path, monkeypatch, capsys):
    saved = CLAIMS_RESULTS / "paper_claims_cpu.json"
    before = saved.read_bytes()
    monkeypatch.chdir(tmp_path)  # where an empty plot path once wrote ".png"
    assert paper_claims.main(["--from-json", str(saved)]) == 0
    out = capsys.readouterr().out
    for result in json.loads(before)["results"]:
        assert f"#### {result['dataset']} (3 seeds;" in out
    assert "wrote" not in out and saved.read_bytes() == before and not list(tmp_path.iterdir())
