"""The Python API (astune/api/): the commands' names, defaults and checks as keyword arguments,
results instead of exit codes, exceptions instead of ``sys.exit``, nothing heavy loaded before
the input is known good."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mlflow import MlflowClient
from search_processes import running_trials, runs, stop_command, write_space
from tiny import TINY

import astune
from astune.cli.parser import build_parser
from astune.tuning.confirmation.confirm import ConfirmSettings
from astune.tuning.settings import SearchSettings

HEAVY = ("torch", "ray", "mlflow", "transformers")
NOT_ARGUMENTS = {"command"}  # what the command's parser holds that no function takes


def _flags(command: str) -> dict[str, argparse.Action]:
    """The ``dest`` of every flag of ``python -m astune COMMAND`` and its action."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a for a in sub.choices[command]._actions if a.dest != "help"}


def _keywords(function) -> dict[str, inspect.Parameter]:
    parameters = inspect.signature(function).parameters
    return {name: p for name, p in parameters.items() if name != "progress"}


@pytest.mark.parametrize("command", ["search", "confirm", "export", "recommend"])
def test_each_function_takes_its_commands_flags_by_name(command: str) -> None:
    function = getattr(astune, command)
    flags = set(_flags(command)) - NOT_ARGUMENTS
    assert set(_keywords(function)) == flags
    first, *rest = _keywords(function).values()
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in rest)  # after the first


@pytest.mark.parametrize(
    ("function", "settings"), [(astune.search, SearchSettings), (astune.confirm, ConfirmSettings)]
)
def test_the_defaults_are_the_settings_defaults(function, settings) -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(settings)}
    for name, parameter in _keywords(function).items():
        if parameter.default is not inspect.Parameter.empty:
            assert parameter.default == defaults[name], name


def test_the_results_and_exceptions_are_public_names() -> None:
    for name in astune.__all__:
        assert getattr(astune, name) is getattr(astune.api, name), name
    assert issubclass(astune.SearchStopped, Exception) and astune.SearchResult.__module__
    assert sorted(n for n in astune.__all__ if n.islower()) == [
        "confirm",
        "export",
        "format_recommendation",
        "recommend",
        "search",
        "status",
        "train",
    ]


BAD_CALLS = [
    ('astune.search("sst5", epochs=-1)', "epochs"),
    ('astune.search("nope")', "nope"),
    ('astune.search("sst5", sampler="grid")', "grid"),
    ('astune.train(dataset="sst5", delta=1.5)', "1.5"),
    ('astune.train(dataset="sst5", learning_rate=0.1)', "learning_rate"),
    ("astune.train()", "dataset is required"),
    ('astune.recommend("nope")', "nope"),
    ('astune.recommend("sst5", num_layers=0)', "num_layers"),
    ('astune.export("astune-sst5", format="xml")', "xml"),
    ('astune.export("astune-sst5", tracking_uri="sqlite:///nowhere/mlflow.db")', "no MLflow"),
    ('astune.confirm("astune-sst5", seeds=1)', "seeds"),
]


@pytest.mark.parametrize(("call", "named"), BAD_CALLS)
def test_bad_input_is_one_value_error_before_the_heavy_imports(
    call: str, named: str, tmp_path: Path
) -> None:
    script = f"""
        import json, sys
        import astune
        try:
            {call}
        except ValueError as err:
            heavy = [m for m in {HEAVY!r} if m in sys.modules]
            print(json.dumps({{"error": str(err), "heavy": heavy}}))
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert named in found["error"] and "\n" not in found["error"]
    assert found["heavy"] == []


def test_importing_astune_and_reading_the_api_loads_nothing_heavy(tmp_path: Path) -> None:
    code = "import sys, astune; astune.search, astune.train, astune.export, astune.confirm\n"
    code += f"print([m for m in {HEAVY!r} if m in sys.modules])"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "[]", done.stderr[-2000:]


def test_train_returns_its_metrics_and_folder_and_resumes_from_it(tmp_path, data_dir) -> None:
    fields = dict(TINY, dataset="sst5", data_dir=str(data_dir), max_train_samples=32, epochs=1)
    out = tmp_path / "run"
    result = astune.train(fields, output_dir=out, batch_size=16, lr=1e-3, progress=False)
    assert result.output_dir == out and result.config.lr == 1e-3
    assert result.metrics == json.loads((out / "final.json").read_text())
    with pytest.raises(ValueError, match=r"^resume: cannot change lr \(the run was started with "):
        astune.train(output_dir=out, resume=True, lr=0.5, progress=False)
    again = astune.train(output_dir=out, resume=True, progress=False)  # from its last checkpoint
    assert again.metrics["optimizer_steps"] == result.metrics["optimizer_steps"]
    assert again.config.dataset == "sst5"  # the run's own settings, none given
    with pytest.raises(ValueError, match=r"^output_dir .* holds a run already .* overwrite"):
        astune.train(fields, output_dir=out, batch_size=16, lr=1e-3, progress=False)
    with pytest.raises(ValueError, match="^resume continues the run in output_dir, overwrite"):
        astune.train(output_dir=out, resume=True, overwrite=True, progress=False)


@pytest.mark.ray
@pytest.mark.slow
def test_a_search_stopped_by_sigterm_raises_search_stopped_to_the_caller(workdir) -> None:
    space = write_space(workdir, seed_points=[], losses=["as_softmax"])
    script = workdir / "search.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys
        import astune

        try:
            astune.search("sst5", space={str(space)!r}, name="killed", num_samples=1,
                          checkpoint_every="eval", progress=False, **{TINY!r})
        except astune.SearchStopped as stopped:
            print(f"caught {{stopped.exit_code}}: {{stopped}}", file=sys.stderr)
            sys.exit(3)
        """)
    )
    db = workdir / "astune-runs" / "mlflow.db"
    code, err, _ = stop_command(
        [sys.executable, str(script)], [signal.SIGTERM], lambda: running_trials(db) >= 1
    )
    caught = err.strip().splitlines()[-1]
    assert code == 3 and caught.startswith("caught 143: search 'killed' stopped by SIGTERM ("), err
    assert caught.endswith("python -m astune search --dataset sst5 --name killed --resume")
    client = MlflowClient(f"sqlite:///{db}")
    (parent,) = runs(client, "killed", "search")
    assert parent.info.status == "KILLED" and parent.data.tags["astune.stopped_by"] == "SIGTERM"


def test_lists_and_paths_are_taken_as_their_flags_spell_them() -> None:
    settings = SearchSettings(
        Path("data/mine"),
        space=Path("s.yaml"),
        losses=["as_softmax", "softmax"],
        objectives=("objective", "train_seconds"),
    )
    assert (settings.dataset, settings.space) == ("data/mine", "s.yaml")
    assert (settings.losses, settings.objectives) == (
        "as_softmax,softmax",
        "objective,train_seconds",
    )
    assert dataclasses.replace(settings, seed=1).losses == "as_softmax,softmax"  # once only
