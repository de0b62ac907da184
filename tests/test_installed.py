"""astune as users install and run it: the wheel holds what the package reads, and the README's
first hour runs as written, from a folder outside the repository, on the installed wheel
(tests/installed.py says where that wheel comes from)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from installed import REPO, Installed, installed, package_data
from mlflow import MlflowClient
from search_processes import runs

MARKER = "<!-- runs as written:"  # the line before a README block that a test runs
FENCE = re.compile(r"^```")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Installed:
    return installed(tmp_path_factory.mktemp("installed"))


def marked_blocks(page: Path) -> list[tuple[str, str]]:
    """``(language, text)`` of every fenced block that ``MARKER`` precedes in ``page``."""
    blocks = []
    lines = page.read_text().splitlines()
    for at, line in enumerate(lines):
        if not line.startswith(MARKER):
            continue
        assert FENCE.match(lines[at + 1]), f"{page.name}:{at + 2}: a fenced block must follow"
        end = next(i for i in range(at + 2, len(lines)) if FENCE.match(lines[i]))
        blocks.append((lines[at + 1][3:].strip(), "\n".join(lines[at + 2 : end]) + "\n"))
    return blocks


def marked_commands(page: Path) -> list[list[str]]:
    """The commands of ``page``'s marked shell blocks, each as argv (continued lines joined,
    ``&&`` lists split, comments dropped)."""
    commands: list[list[str]] = []
    for language, text in marked_blocks(page):
        if language == "bash":
            joined = text.replace("\\\n", " ")
            lines = [part for line in joined.splitlines() for part in line.split(" && ")]
            commands += [shlex.split(c, comments=True) for c in lines if c.strip()]
    return commands


def test_the_wheel_holds_every_file_the_package_reads(wheel: Installed) -> None:
    data = package_data()
    assert "astune/history/reference_trials.json" in data  # the walk sees the package's data
    assert sorted(data - wheel.wheel_files()) == []


def test_package_data_counts_what_is_not_python(tmp_path: Path) -> None:
    folder = tmp_path / "pkg"
    (folder / "sub" / "__pycache__").mkdir(parents=True)
    for name in ("a.py", "sub/table.json", "sub/__pycache__/a.cpython-311.pyc", "py.typed"):
        (folder / name).write_text("")
    assert package_data(folder) == {"pkg/sub/table.json", "pkg/py.typed"}


def test_the_installed_package_is_the_wheels_not_the_checkout(
    wheel: Installed, tmp_path: Path
) -> None:
    code = "import astune, astune.history.reference as r; "
    code += "print(astune.__file__, r.PRIOR_FILE)"
    done = wheel.run(["-c", code], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    module, prior = (Path(p) for p in done.stdout.split())
    assert REPO not in module.parents and module.parent.parent.name == "site-packages"
    assert prior.is_file() and prior.parent.parent == module.parent


@pytest.mark.ray
@pytest.mark.slow
def test_the_readme_first_hour_runs_as_written_outside_the_repository(
    wheel: Installed, tmp_path: Path
) -> None:
    commands = marked_commands(REPO / "README.md")
    assert [c[3] for c in commands[:3]] == ["search", "export", "train"]
    outputs = []
    for argv in commands:
        assert argv[:3] == ["python", "-m", "astune"], argv
        done = wheel.run(argv[1:], cwd=tmp_path, timeout=300)
        assert done.returncode == 0, f"{shlex.join(argv)}: {done.stderr[-2000:]}"
        outputs.append(done.stdout)
    assert "best objective:" in outputs[0]
    assert [c[3] for c in commands[-2:]] == ["datasets", "backbones"]
    assert "sst5" in outputs[-2] and "minilm" in outputs[-1]
    assert yaml.safe_load((tmp_path / "best.yaml").read_text())["dataset"] == "sst5"
    run_folder = tmp_path / "astune-runs" / "train" / "sst5"
    assert f"run folder: {run_folder.relative_to(tmp_path)}" in outputs[2]
    assert "val_accuracy" in json.loads((run_folder / "final.json").read_text())
    _exports_each_format(wheel, tmp_path)
    _closing_lines_paste(wheel, tmp_path, outputs[0])
    shown = shown_after_marked(REPO / "README.md")  # the page's "ends as below"
    assert config_keys(_best_config(outputs[0])) == config_keys(_best_config(shown))
    assert closing_names(outputs[0]) == closing_names(shown)


def shown_after_marked(page: Path) -> str:
    """The fenced block that follows ``page``'s first marked block: what the page says it
    prints."""
    lines = page.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(MARKER))
    fences = [i for i in range(at + 1, len(lines)) if FENCE.match(lines[i])]
    return "\n".join(lines[fences[2] + 1 : fences[3]])


def config_keys(best: str) -> list[str]:
    """The keys of a ``best config:`` block, in order (their values vary with the run)."""
    return re.findall(r"(\w+)=", best)


def closing_names(output: str) -> list[str]:
    """The names of the closing lines (``review``, ``export``, ...), in order."""
    return [m[1] for line in output.splitlines() if (m := re.match(r"(\w+):  ", line))]


def _closing_lines(output: str) -> dict[str, str]:
    """The closing block's ``name:  command`` lines (``export``, ``resume``, ...) by name."""
    found = {}
    for line in output.splitlines():
        name, _, rest = line.partition(":  ")
        if rest.startswith("python -m astune "):
            found[name] = rest
    return found


def _closing_lines_paste(wheel: Installed, folder: Path, output: str) -> None:
    """The search's closing commands, pasted: ``export`` writes the best config again, and
    ``resume`` of the finished search (its trials tie) ends on the same best config."""
    lines = _closing_lines(output)
    assert set(lines) == {"export", "resume"}, output[-2000:]
    for name in ("export", "resume"):
        done = wheel.run(shlex.split(lines[name])[1:], cwd=folder, timeout=300)
        assert done.returncode == 0, f"{lines[name]}: {done.stderr[-2000:]}"
    best = _best_config(output)
    assert best.startswith("best config: loss=") and _best_config(done.stdout) == best


def _best_config(output: str) -> str:
    """The closing block's best config (its line and the indented lines that continue it)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("best config:"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("  "))
    return "\n".join(lines[start:end])


def _exports_each_format(wheel: Installed, folder: Path) -> None:
    """``export`` of the README's search in the other formats (one process, through the API):
    each file reads as what it is."""
    code = "import astune\nfor f in ('json', 'python', 'hf'):\n"
    code += "    astune.export('astune-sst5', format=f, output=f'best.{f}')"
    done = wheel.run(["-c", code], cwd=folder)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((folder / "best.json").read_text())["config"]["dataset"] == "sst5"
    for fmt in ("python", "hf"):
        compile((folder / f"best.{fmt}").read_text(), f"best.{fmt}", "exec")  # a script to run


@pytest.mark.ray
@pytest.mark.slow
def test_the_python_pages_examples_run_as_user_scripts(wheel: Installed, tmp_path: Path) -> None:
    (language, code), (_, own_tuner) = marked_blocks(REPO / "docs" / "python.md")
    assert language == "python"
    (tmp_path / "session.py").write_text(code)
    done = wheel.run(["session.py"], cwd=tmp_path, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [
        "best",
        "test",
        "confirmed:",
        "delta",
        "refused:",
    ], lines
    assert "epochs" in lines[-1] and "-1" in lines[-1]  # the bad value, named
    assert yaml.safe_load((tmp_path / "api-best.yaml").read_text())["dataset"] == "sst5"
    assert (tmp_path / "astune-runs" / "train" / "sst5" / "final.json").is_file()
    assert yaml.safe_load((tmp_path / "api-warm.yaml").read_text())["params"]
    (tmp_path / "own_tuner.py").write_text(own_tuner)
    done = wheel.run(["own_tuner.py"], cwd=tmp_path, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1].startswith("best objective: ")  # after Ray Tune's own
    client = MlflowClient(f"sqlite:///{tmp_path / 'astune-runs' / 'mlflow.db'}")
    _writes_what_astune_search_writes(client, ours="own-tuner", theirs="api-sst5")
    assert (tmp_path / "astune-runs" / "ray" / "own-tuner").is_dir()


def _writes_what_astune_search_writes(client: MlflowClient, *, ours: str, theirs: str) -> None:
    """The Tuner of one's own (``ours``) wrote what ``astune.search`` (``theirs``, the same
    first config) wrote: a FINISHED parent with the same params, its best objective and
    ``best_config.yaml``; a trial under it with the same loss and the same params, metrics and
    tags."""
    (parent,), (their_parent,) = runs(client, ours, "search"), runs(client, theirs, "search")
    assert parent.info.status == "FINISHED"
    assert set(parent.data.params) == set(their_parent.data.params)
    assert "best_objective" in parent.data.metrics
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {"best_config.yaml"}
    (trial,), (their_trial,) = runs(client, ours, "trial"), runs(client, theirs, "trial")
    assert trial.data.params["loss"] == their_trial.data.params["loss"]  # the portfolio's first
    assert trial.info.status == "FINISHED"
    assert trial.data.tags["mlflow.parentRunId"] == parent.info.run_id
    # ``progress`` is logged on the wall clock (every PROGRESS_EVERY_S), so whether a run has it
    # depends on how long its trial ran on a busy machine, not on who tuned it
    not_compared = {"mlflow.runName", "progress"}
    for part in ("params", "metrics", "tags"):
        keys = set(getattr(trial.data, part)) - not_compared
        assert keys == set(getattr(their_trial.data, part)) - not_compared, part


@pytest.mark.ray
@pytest.mark.slow
def test_the_extending_pages_examples_run_as_user_scripts(wheel: Installed, tmp_path: Path) -> None:
    """docs/extending.md as a user runs it: their focal loss in their own file, searched in a
    tiny search, exported (the script trains the winner, importing the plugin) and confirmed;
    a search with CMA-ES by name under a Ray Tune scheduler object."""
    (_, plugin), (_, space), (language, session) = marked_blocks(REPO / "docs" / "extending.md")
    assert language == "python" and plugin.startswith("# my_losses.py")
    (tmp_path / "my_losses.py").write_text(plugin)
    (tmp_path / "focal.yaml").write_text(space)
    (tmp_path / "session.py").write_text(session)
    done = wheel.run(["session.py"], cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line.split(":")[0] for line in done.stdout.splitlines()]
    assert lines[-3:] == ["focal search", "confirmed", "cmaes search"], lines

    client = MlflowClient(f"sqlite:///{tmp_path / 'astune-runs' / 'mlflow.db'}")
    (focal,) = runs(client, "focal", "search")
    assert focal.data.params["plugins"] == str(tmp_path / "my_losses.py")
    trials = runs(client, "focal", "trial")
    gammas = [float(t.data.params["gamma"]) for t in trials if t.data.params["loss"] == "focal"]
    assert gammas == [2.0], trials  # the seed point, first of the two trials
    assert len(runs(client, "focal", "confirm")) >= 2  # the winner over two seeds (and baseline)
    (cmaes,) = runs(client, "cmaes-halving", "search")
    assert cmaes.data.params["sampler"] == "cmaes"
    assert cmaes.data.params["scheduler"] == "AsyncHyperBandScheduler"  # Ray's ASHAScheduler

    script = (tmp_path / "best_focal.py").read_text()
    assert str(tmp_path / "my_losses.py") in script
    done = wheel.run(["best_focal.py", "--output-dir", "best"], cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "val_accuracy" in json.loads((tmp_path / "best" / "final.json").read_text())
