"""benchmarks/ as a shelf of studies: every saved result says where it came from (the script and
its arguments, the commit, the machine, the date, the digests of its inputs and of itself), every
study has its README, and RESULTS.md is one short page whose links all resolve."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks.common import provenance

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
STUDIES = sorted(p.parent for p in BENCHMARKS.glob("*/__init__.py") if p.parent.name != "common")
RESULTS_FOLDERS = sorted(BENCHMARKS.glob("*/results"))
MAX_RESULTS_LINES = 300


def test_the_studies_and_their_results_are_found() -> None:
    assert len(STUDIES) >= 8 and len(RESULTS_FOLDERS) >= 7
    assert {f.parent for f in RESULTS_FOLDERS} <= set(STUDIES)


@pytest.mark.parametrize("results", RESULTS_FOLDERS, ids=lambda p: p.parent.name)
def test_every_saved_result_says_where_it_came_from(results: Path) -> None:
    assert provenance.problems(results) == []


def test_no_result_lies_outside_a_study() -> None:
    """Saved results live in ``<study>/results/``; the tables in their data set's folder."""
    loose = sorted(
        str(p.relative_to(BENCHMARKS))
        for p in BENCHMARKS.rglob("*")
        if p.is_file()
        and p.suffix in {".json", ".png", ".gz", ".csv", ".parquet"}
        and "results" not in p.relative_to(BENCHMARKS).parts
        and "tables" not in p.relative_to(BENCHMARKS).parts
    )
    assert loose == []


@pytest.mark.parametrize("study", STUDIES, ids=lambda p: p.name)
def test_every_study_has_a_readme_that_names_its_command(study: Path) -> None:
    readme = (study / "README.md").read_text()
    assert f"python -m benchmarks.{study.name}" in readme or f"benchmarks/{study.name}/" in readme
    if (study / "results").exists():
        assert "results/" in readme  # the link to what it saved


def test_results_md_is_one_short_page_linking_every_study() -> None:
    page = BENCHMARKS / "RESULTS.md"
    text = page.read_text()
    assert len(text.splitlines()) <= MAX_RESULTS_LINES
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert [link for link in links if not (page.parent / link).exists()] == []
    assert {study.name for study in STUDIES} <= {Path(link).parent.name for link in links}


def test_a_recorded_file_passes_and_a_changed_or_unlisted_one_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "study" / "results"
    (results / "sub").mkdir(parents=True)
    saved = results / "sub" / "speed.json"
    saved.write_text(json.dumps({"ratio": 0.9}))
    monkeypatch.chdir(tmp_path)  # a path as a script's flag gives it, relative
    entry = provenance.record(
        Path("study/results/sub/speed.json"),
        inputs=provenance.generated_inputs({"sizes": "16x5"}),
        machine="test machine",
        args=["--sizes", "16x5"],
    )
    assert set(provenance.FIELDS) <= set(entry) and entry["script"].startswith("python")
    assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", entry["commit"])
    assert provenance.problems(results) == []

    (results / "stray.png").write_bytes(b"\x89PNG")
    saved.write_text(json.dumps({"ratio": 0.8}))
    found = provenance.problems(results)
    assert any("stray.png: not in MANIFEST.json" in line for line in found)
    assert any("speed.json: changed since it was entered" in line for line in found)

    saved.unlink()
    assert any("sub/speed.json: entered but missing" in p for p in provenance.problems(results))


def test_a_result_without_inputs_or_with_a_bad_digest_is_refused(tmp_path: Path) -> None:
    saved = tmp_path / "results" / "a.json"
    saved.parent.mkdir()
    saved.write_text("{}")
    with pytest.raises(ValueError, match="name the inputs"):
        provenance.record(saved, inputs={}, machine="m")
    with pytest.raises(ValueError, match="'data/sst5'.*64 hexadecimal"):
        provenance.record(saved, inputs={"data/sst5": "abc"}, machine="m")
    assert not (saved.parent / provenance.MANIFEST).exists()


def test_the_tables_readme_loads_a_table_with_pandas_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The data set's README shows the lines that load one table; they run as written."""
    readme = (BENCHMARKS / "search_efficiency" / "tables" / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.S)
    assert code is not None
    monkeypatch.chdir(BENCHMARKS.parent)
    scope: dict[str, object] = {}
    exec(code.group(1), scope)  # noqa: S102 - the README's own three lines
    final = scope["final"]
    assert len(final) == 288 and 0.3 < final.iloc[-1] <= 1.0  # SST-5's complete grid configs


def test_a_studys_own_outputs_leave_the_checkout_clean(tmp_path: Path) -> None:
    """``harness.commit`` calls a checkout dirty for changes outside the studies' results and
    the tables only (a file a run writes there is its output, not a change of the code)."""
    import subprocess

    from benchmarks.common.harness import OUTPUTS

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True)
        return done.stdout

    git("init", "-q")
    written = [
        "benchmarks/trial_speed/results/new.json",
        "benchmarks/search_efficiency/results/real/new.json",
        "benchmarks/search_efficiency/tables/sst5/part-new.parquet",
    ]
    for name in written:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    assert git("status", "--porcelain", "--", ".", *OUTPUTS) == ""
    (tmp_path / "benchmarks" / "trial_speed" / "as_speed.py").write_text("")
    assert git("status", "--porcelain", "--", ".", *OUTPUTS) != ""  # a code change is seen
