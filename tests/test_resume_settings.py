"""``--resume`` against the search it continues (astune/tuning/lifecycle/resume.py): every field of
``SearchSettings`` is recorded on the parent run and comes back when its flag is left out, or is
named as one a resume may change or as no setting of the search. No Ray: the params are the
strings MLflow stores."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path
from typing import Any

import pytest

from astune.cli.parser import build_parser
from astune.space.space import SearchSpace, load_space
from astune.store.uri import resolve_tracking_uri
from astune.store.values import flat_params
from astune.tuning.console import format_summary
from astune.tuning.lifecycle.ending import SearchEnd
from astune.tuning.lifecycle.resume import (
    NOT_SEARCH_SETTINGS,
    RESUME_MAY_CHANGE,
    as_before,
    check_unchanged,
    resume_command,
    search_params,
)
from astune.tuning.lifecycle.stop import stopped_line
from astune.tuning.runner import _apply_settings
from astune.tuning.settings import SearchResult, SearchSettings, settings_from_args

SPACE = Path(__file__).with_name("spaces") / "tiny.yaml"
# One value off its default for each field search_params records: a field recorded without a
# value here fails test_every_search_setting_is_recorded_or_named_as_not_recorded.
OFF_DEFAULT: dict[str, Any] = {
    "dataset": "sst5",
    "space": str(SPACE),
    "warm_start": True,
    "portfolio": False,
    "num_samples": 3,
    "max_concurrent": 2,
    "cpus_per_trial": 2.0,
    "gpus_per_trial": 1.0,
    "backbone": "bert-base",
    "num_layers": 2,
    "max_train_samples": 64,
    "max_eval_samples": 32,
    "epochs": 3.0,
    "data_dir": "/data/astune",
    "validation_fraction": 0.2,
    "losses": "softmax,as_softmax",
    "scheduler": "asha",
    "objectives": "objective,train_seconds",
    "sampler": "random",
    "seed": 7,
    "max_failures": 3,
    "max_length": 64,
    "loss_kernel": "torch",
    "plugins": "my_losses",
    "max_audio_seconds": 5.0,
    "checkpoint_every": "eval",
    "keep_checkpoints": True,
    "reuse_actors": False,
}


def shaped_space(settings: SearchSettings) -> SearchSpace:
    """The space as ``prepare_search`` shapes it with ``settings`` (a text task)."""
    return _apply_settings(load_space(settings.space), settings, "single_label")[0]


def logged(settings: SearchSettings) -> dict[str, str]:
    """The parent run's params of a search with ``settings``, as MLflow stores them."""
    return flat_params(search_params(settings, shaped_space(settings)))


def fields() -> set[str]:
    return {f.name for f in dataclasses.fields(SearchSettings)}


def test_every_search_setting_is_recorded_or_named_as_not_recorded():
    recorded = fields() & set(logged(SearchSettings(dataset="sst5", space=str(SPACE))))
    not_recorded = set(RESUME_MAY_CHANGE) | set(NOT_SEARCH_SETTINGS)
    assert recorded.isdisjoint(not_recorded)
    assert fields() - recorded - not_recorded == set(), "a SearchSettings field undecided"
    assert set(OFF_DEFAULT) == recorded
    assert {"checkpoint_every", "keep_checkpoints", "loss_kernel"} <= recorded  # issue 60


def test_a_resume_with_every_flag_left_out_gets_every_recorded_setting_back():
    started = SearchSettings(**OFF_DEFAULT)
    defaults = SearchSettings(dataset="sst5")
    for name, value in OFF_DEFAULT.items():  # each value really is off its default
        assert getattr(defaults, name) != value or name == "dataset", name
    resumed = as_before(SearchSettings(dataset="sst5", name="s", resume=True), logged(started))
    for name, value in OFF_DEFAULT.items():
        assert getattr(resumed, name) == value, name
        assert type(getattr(resumed, name)) is type(value), name
    check_unchanged(resumed, shaped_space(resumed), logged(started))  # nothing changed


def test_a_resume_refuses_a_changed_checkpoint_setting():
    started = SearchSettings(dataset="sst5", space=str(SPACE), checkpoint_every="eval")
    old = logged(started)
    changed = dataclasses.replace(started, checkpoint_every="end")
    with pytest.raises(ValueError, match="cannot change --checkpoint-every: .* with eval, now end"):
        check_unchanged(changed, shaped_space(changed), old)


@pytest.mark.parametrize(
    ("key", "recorded"), [("sampler", "CmaEsSampler"), ("scheduler", "HyperBandForBOHB")]
)
def test_a_search_run_with_an_object_is_not_resumed_without_it(key, recorded):
    old = {**logged(SearchSettings(dataset="sst5", space=str(SPACE))), key: recorded}
    with pytest.raises(ValueError) as err:
        as_before(SearchSettings(dataset="sst5", name="own", resume=True), old)
    assert str(err.value) == (
        f"--resume: the search 'own' ran with a {key} object ({recorded}) from the Python API; "
        f"resume it there with the same object: astune.search(..., name='own', resume=True, "
        f"{key}=...)"
    )
    as_before(
        SearchSettings(
            dataset="sst5",
            name="own",
            resume=True,
            **{key: "random" if key == "sampler" else "none"},
        ),
        old,
    )  # given: no refusal


def test_a_search_started_before_a_setting_was_recorded_resumes_with_its_default():
    new_keys = ("max_failures", "reuse_actors", "loss_kernel", "checkpoint_every")
    new_keys += ("keep_checkpoints",)
    started = SearchSettings(**OFF_DEFAULT)
    old = {k: v for k, v in logged(started).items() if k not in new_keys}
    resumed = as_before(SearchSettings(dataset="sst5", resume=True), old)
    defaults = SearchSettings(dataset="sst5")
    for name in new_keys:
        assert getattr(resumed, name) == getattr(defaults, name), name
    assert resumed.seed == 7 and resumed.backbone == "bert-base"  # the recorded ones come back
    given = dataclasses.replace(resumed, checkpoint_every="eval")  # a missing key: no refusal
    check_unchanged(given, shaped_space(given), old)


PLACES = [
    {},  # the defaults, under ./astune-runs: found again from the same folder
    {"storage_path": "my runs/ray", "tracking_uri": "sqlite:///my runs/mlflow.db"},  # relative
    {
        "storage_path": "s3://bucket/searches?endpoint_override=127.0.0.1:9000&scheme=http",
        "tracking_uri": "http://mlflow.example:5000",
        "address": "auto",
    },
]


@pytest.mark.parametrize("places", PLACES)
def test_the_resume_command_pasted_in_the_same_folder_finds_the_same_search(
    tmp_path, monkeypatch, places
):
    monkeypatch.chdir(tmp_path)
    settings = SearchSettings(dataset="my data/x's", name="s 1", **places)  # a folder of the user's
    argv = shlex.split(resume_command(settings))
    assert argv[:4] == ["python", "-m", "astune", "search"] and argv[-1] == "--resume"
    pasted = settings_from_args(build_parser().parse_args(argv[3:]))
    assert (pasted.dataset, pasted.experiment_name, pasted.resume) == ("my data/x's", "s 1", True)
    assert pasted.experiment_path() == settings.experiment_path()
    assert resolve_tracking_uri(pasted.tracking_uri) == resolve_tracking_uri(settings.tracking_uri)
    assert pasted.address == settings.address
    assert pasted.given == {"dataset", "name", "resume", *places}  # the rest: the search's own


def test_every_resume_line_astune_prints_is_the_one_command(tmp_path):
    from stores import new_store

    from astune.store.writer import SearchTracker

    settings = SearchSettings(dataset="sst5", name="s", storage_path=str(tmp_path / "ray"))
    command = resume_command(settings)
    assert (
        command
        == f"python -m astune search --dataset sst5 --name s --storage-path {tmp_path}/ray --resume"
    )
    assert stopped_line("s", command, "SIGTERM", "0 trials finished").endswith(command)
    summary = SearchResult(
        experiment="s",
        tracking_uri="sqlite:////x/mlflow.db",
        experiment_path=settings.experiment_path(),
        best_config={},
        best_objective=None,
        metric="objective",
        num_trials=0,
        trial_states={},
        parent_run_id="p",
        resume_command=command,
    )
    assert f"\nresume:  {command}\n" in format_summary(summary, "mlflow ui")
    tracker = SearchTracker(new_store(tmp_path), "s", dataset="sst5", task="t", search_params={})
    behind = SearchEnd(tracker, None, space=None, settings=settings).behind("refused")
    assert f"run {command} to write them" in str(behind)
