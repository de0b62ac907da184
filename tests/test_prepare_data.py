"""`astune prepare data` (astune/data/prepare.py) and the test session's own data (tests/
data_home.py), from a local mirror of the hub (tests/hub_mirror.py) written from the shared
copies: the prepared rows are checked against those copies, every column. Real commands, real
`datasets` loads; sst5 and clinc_oos whole, conll2003 and go_emotions in slices."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hub_mirror import SPLITS, shared_rows, write_mirror

from astune.data.prepare import DEFAULT_DATASETS, default_out, write_dataset

REPO_ROOT = Path(__file__).resolve().parents[1]
SLICE = 300  # rows of each split of conll2003 and go_emotions in the mirror
LIMITS = {"sst5": None, "clinc_oos": None, "conll2003": SLICE, "go_emotions": SLICE}
TINY_TEST = """
import os
from pathlib import Path

def test_reads_the_prepared_cache(data_dir):
    assert data_dir == Path(os.environ["ASTUNE_TEST_DATA"])
    assert os.environ["ASTUNE_DATA_DIR"] == str(data_dir)
    assert (data_dir / "sst5" / "train.jsonl").read_text().count("\\n") == 8544

def test_without_data():
    pass
"""


@pytest.fixture(scope="module")
def mirror(tmp_path_factory, data_dir) -> Path:
    return write_mirror(tmp_path_factory.mktemp("hub"), data_dir, LIMITS)


def command_env(tmp: Path, **extra: str | None) -> dict[str, str]:
    """This environment for a command: no local data, no pytest session of ours, caches under
    ``tmp``; ``extra`` added (None: removed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.pop("ASTUNE_DATA_DIR", None)
    env.update(
        PYTHONPATH=os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]),
        HF_DATASETS_CACHE=str(tmp / "datasets-cache"),
        XDG_CACHE_HOME=str(tmp / "xdg-cache"),
    )
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def prepared_rows(folder: Path, split: str) -> list[dict]:
    return [json.loads(line) for line in (folder / f"{split}.jsonl").read_text().splitlines()]


def test_prepare_data_writes_the_shared_layout_from_the_hub(mirror, data_dir, tmp_path):
    out = tmp_path / "data"
    (out / ".partial-sst5-99999").mkdir(parents=True)  # left by a killed run
    (out / ".partial-sst5-99999" / "train.jsonl").write_text('{"text": "half a file')
    env = command_env(tmp_path, ASTUNE_HUB_MIRROR=str(mirror))
    argv = [sys.executable, "-m", "astune", "prepare", "data", "--out", str(out)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for number, name in enumerate(DEFAULT_DATASETS, 1):
        assert f"[{number}/4] {name}: wrote " in done.stderr
    assert sorted(p.name for p in out.iterdir()) == [".prepare.lock", *sorted(DEFAULT_DATASETS)]

    for name, limit in LIMITS.items():
        shared = json.loads((data_dir / name / "dataset.json").read_text())
        meta = json.loads((out / name / "dataset.json").read_text())
        assert list(meta) == list(shared)  # the same keys in the same order
        for key in set(shared) - {"source", "hub_equivalent", "splits"}:
            assert meta[key] == shared[key], (name, key)
        for split in SPLITS:
            rows = prepared_rows(out / name, split)
            assert rows == shared_rows(data_dir, name, split, limit), (name, split)
            assert meta["splits"][split] == len(rows) == (limit or shared["splits"][split])
    for name in ("sst5", "clinc_oos"):  # whole: the very files of the shared copies
        for split in SPLITS:
            assert (out / name / f"{split}.jsonl").read_bytes() == (
                data_dir / name / f"{split}.jsonl"
            ).read_bytes()

    again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "kept sst5, clinc_oos, conll2003, go_emotions (complete already" in again.stdout


def _fake_repo(root: Path) -> Path:
    """The repository's tests/conftest.py and its helpers in ``root``, with no
    ``../shared/data`` beside it, and a tiny test file."""
    (root / "tests").mkdir(parents=True)
    for name in ("conftest.py", "data_home.py", "scheduling.py"):
        shutil.copy(REPO_ROOT / "tests" / name, root / "tests" / name)
    shutil.copy(REPO_ROOT / "pyproject.toml", root / "pyproject.toml")
    (root / "tests" / "test_tiny.py").write_text(TINY_TEST)
    return root


def _pytest(repo: Path, env: dict[str, str], *args: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_tiny.py"]
    return subprocess.Popen(
        [*argv, *args], cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip


def test_the_test_session_prepares_the_data_once_into_the_cache(mirror, data_dir, tmp_path):
    """Two sessions at once, one with two pytest-xdist workers: each dataset is written once,
    under the lock (a session that comes while the other writes waits, then keeps what it
    wrote), and both read it from the cache."""
    repo = _fake_repo(tmp_path / "clone")
    cache = tmp_path / "cache"
    env = command_env(tmp_path, ASTUNE_HUB_MIRROR=str(mirror), ASTUNE_TEST_DATA=str(cache))
    sessions = [_pytest(repo, env, "-n", "2"), _pytest(repo, env)]
    outputs = [session.communicate(timeout=300)[0] for session in sessions]
    for session, output in zip(sessions, outputs):
        assert session.returncode == 0, output
        assert "2 passed" in output
    for name in DEFAULT_DATASETS:
        assert sum(f"{name}: wrote " in line for o in outputs for line in o.splitlines()) == 1
    assert not (tmp_path / "shared").exists()
    for name, limit in LIMITS.items():
        for split in SPLITS:
            assert prepared_rows(cache / name, split) == shared_rows(data_dir, name, split, limit)


def test_offline_without_data_the_session_stops_in_one_line(tmp_path):
    repo = _fake_repo(tmp_path / "clone")
    cache = tmp_path / "cache"
    env = command_env(
        tmp_path,
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE=None,
        ASTUNE_TEST_DATA=str(cache),
        ASTUNE_HUB_MIRROR=None,
    )
    session = _pytest(repo, env)
    output = session.communicate(timeout=120)[0]
    assert session.returncode == pytest.ExitCode.USAGE_ERROR, output
    (line,) = [line for line in output.splitlines() if "no test data" in line]
    assert line.startswith("ERROR: no test data: neither ASTUNE_DATA_DIR (unset) nor ")
    assert f"the cache {cache} lacks sst5, clinc_oos, conll2003, go_emotions" in line
    assert "HF_HUB_OFFLINE is set" in line
    assert line.endswith(f"with: python -m astune prepare data --out {cache}")
    # a session whose tests read no data runs offline all the same
    alone = _pytest(repo, env, "-k", "without_data")
    assert alone.wait(timeout=120) == 0, alone.communicate()[0]
    assert not cache.exists()


BAD_INPUT = """
import contextlib, io, json, sys
from astune.cli import main
out = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    out.append([code, err.getvalue()])
heavy = [m for m in ("torch", "transformers", "datasets", "pandas") if m in sys.modules]
print(json.dumps({"results": out, "heavy": heavy}))
"""


def test_bad_input_is_refused_in_one_line_before_heavy_imports(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    cases = [
        (["--datasets", "sst5,nope"], "--datasets: cannot prepare 'nope'; accepted "
         "(comma-separated): sst5, clinc_oos, conll2003"),
        (["--datasets", "wikiart"], "--datasets: cannot prepare 'wikiart'; accepted"),
        (["--datasets", "sst5", "--out", str(a_file / "data")],
         f"--out '{a_file / 'data'}' is not a writable folder (Not a directory)"),
        (["--datasets", "sst5", "--out", str(tmp_path / "data")],
         "the hub (https://huggingface.co) is unreachable: HF_HUB_OFFLINE is set"),
    ]  # fmt: skip
    argvs = [["prepare", "data", *argv] for argv, _ in cases]
    env = command_env(
        tmp_path,
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE=None,
        ASTUNE_HUB_MIRROR=None,
        HF_ENDPOINT=None,
    )
    done = subprocess.run(
        [sys.executable, "-c", BAD_INPUT, json.dumps(argvs)],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    report = json.loads(done.stdout)
    assert report["heavy"] == []
    for (code, err), (_, fragment) in zip(report["results"], cases):
        assert code == 2 and err.count("\n") == 1, err
        assert err.startswith("astune prepare: error: ") and fragment in err, err


def test_a_write_that_fails_leaves_the_folder_as_it_was(tmp_path):
    """Written beside and renamed into place: a failure half way leaves no half dataset, and a
    dataset that was there stays whole."""
    target = tmp_path / "sst5"
    bad = {"train": [{"text": "a", "label": 0}, {"text": "b", "label": object()}]}
    with pytest.raises(TypeError):
        write_dataset(target, bad, {"task": "single_label"})
    assert list(tmp_path.iterdir()) == []
    good = {split: [{"text": split, "label": 1}] for split in SPLITS}
    write_dataset(target, good, {"task": "single_label"})
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    with pytest.raises(TypeError):
        write_dataset(target, bad, {"task": "single_label"})
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["sst5"]


def test_the_default_folder_follows_xdg_cache_home(monkeypatch, tmp_path, capsys):
    from astune.data.media import MEDIA_CACHE_ENV, media_cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(MEDIA_CACHE_ENV, raising=False)
    assert default_out() == tmp_path / "astune" / "data"
    assert media_cache() == tmp_path / "astune" / "media"  # decoded hub media: the same root
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_out() == Path.home() / ".cache" / "astune" / "data"
    assert media_cache() == Path.home() / ".cache" / "astune" / "media"
    monkeypatch.setenv(MEDIA_CACHE_ENV, str(tmp_path / "media"))
    assert media_cache() == tmp_path / "media"
    from astune.cli import main

    with pytest.raises(SystemExit):
        main(["prepare", "data", "--help"])
    assert "default: the four the tests read: " + ",".join(DEFAULT_DATASETS) in " ".join(
        capsys.readouterr().out.split()
    )
