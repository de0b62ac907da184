"""``--resume`` against the search it continues (astune/search/resume.py): every field of
``SearchSettings`` is recorded on the parent run and comes back when its flag is left out, or is
named as one a resume may change or as no setting of the search. No Ray: the params are the
strings MLflow stores."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from astune.search.resume import (
    NOT_SEARCH_SETTINGS,
    RESUME_MAY_CHANGE,
    as_before,
    check_unchanged,
    search_params,
)
from astune.search.runner import _apply_settings
from astune.search.settings import SearchSettings
from astune.space.space import SearchSpace, load_space
from astune.store.values import flat_params

SPACE = Path(__file__).with_name("spaces") / "tiny.yaml"
# One value off its default for each field search_params records: a field recorded without a
# value here fails test_every_search_setting_is_recorded_or_named_as_not_recorded.
OFF_DEFAULT: dict[str, Any] = {
    "dataset": "sst5",
    "space": str(SPACE),
    "warm_start": True,
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
    "max_audio_seconds": 5.0,
    "checkpoint_every": "eval",
    "keep_checkpoints": True,
    "reuse_actors": False,
}


def shaped_space(settings: SearchSettings) -> SearchSpace:
    """The space as ``prepare_search`` shapes it with ``settings`` (a text task)."""
    return _apply_settings(load_space(settings.space), settings, "single_label")


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
