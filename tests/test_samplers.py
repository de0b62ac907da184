"""Samplers by name or object (issue 71 item 3): every sampler of the registry proposes valid
configs of a real space through a real Optuna study (one objective, and several where it can);
a sampler of one objective asked for several, an unknown name and an object that is no sampler
are refused in one line; an object is recorded by its class; every sampler pickles, as Ray's
Tuner and a resumed search need it."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from ray import cloudpickle
from tiny import tiny_settings

from astune.space.space import load_space
from astune.tuning.lifecycle.resume import search_params
from astune.tuning.searchers.samplers import SAMPLER_KINDS, SAMPLERS, build_sampler, check_sampler

SPACE = load_space("default").with_losses(["as_softmax", "softmax"])  # lr, delta, ... searched


def propose(sampler: optuna.samplers.BaseSampler, objectives: int, trials: int = 6) -> list:
    """``trials`` configs the sampler proposes for SPACE, each told a made-up score."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=["maximize"] * objectives, sampler=sampler)
    configs = []
    for i in range(trials):
        trial = study.ask()
        fixed = SPACE.define_by_run(trial)  # suggests into trial.params
        config = {**trial.params, **fixed}
        configs.append(config)
        study.tell(trial, [float(config.get("delta", 0.1)) * (i + 1)] * objectives)
    return configs


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_every_sampler_proposes_configs_of_the_space(name):
    kind = SAMPLERS[name]
    for objectives in (1, 2) if kind.several_objectives else (1,):
        configs = propose(build_sampler(name, seed=0), objectives)
        assert {c["loss"] for c in configs} <= {"as_softmax", "softmax"}
        for config in configs:
            assert SPACE.param("lr").contains(config["lr"]), config
            if config["loss"] == "as_softmax":
                assert SPACE.param("delta").contains(config["delta"]), config


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_every_sampler_pickles_as_ray_saves_it_and_proposes_after(name):
    """Ray's Tuner pickles the sampler into its ``tuner.pkl``, ``OptunaSearch.save`` into the
    searcher's checkpoint, and a resumed search proposes with the copy. Optuna 5.1's NSGA-II and
    NSGA-III hold a ``threading.Lock`` that did not pickle (every search with them crashed)."""
    objectives = 2 if SAMPLERS[name].several_objectives else 1
    sampler = build_sampler(name, seed=0)
    propose(sampler, objectives, trials=3)
    resumed = cloudpickle.loads(cloudpickle.dumps(sampler))
    configs = propose(resumed, objectives, trials=3)
    assert len(configs) == 3
    assert all(SPACE.param("lr").contains(c["lr"]) for c in configs), configs


def test_a_genetic_sampler_object_given_in_python_pickles_too():
    sampler = optuna.samplers.NSGAIISampler(seed=3)
    assert build_sampler(sampler, seed=0) is sampler
    configs = propose(cloudpickle.loads(cloudpickle.dumps(sampler)), 2, trials=2)
    assert all(SPACE.param("lr").contains(c["lr"]) for c in configs), configs


def test_a_sampler_object_is_searched_with_and_recorded_by_its_class(tmp_path):
    sampler = optuna.samplers.RandomSampler(seed=3)
    assert build_sampler(sampler, seed=0) is sampler
    settings = tiny_settings(
        sampler=sampler, space=str(Path(__file__).with_name("spaces") / "tiny.yaml")
    )
    assert settings.validate().sampler is sampler
    assert search_params(settings, SPACE)["sampler"] == "RandomSampler"


@pytest.mark.parametrize(
    ("sampler", "objectives", "message"),
    [
        ("cmaes", 2, "sampler 'cmaes' searches one objective, but the search has 2; use one of "
         "tpe, random, qmc, gp, nsgaii, nsgaiii"),
        ("bayes", 1, "sampler must be one of tpe, neighbours, random, qmc, cmaes, gp, nsgaii, "
         "nsgaiii (or, in Python, an Optuna sampler object), but got 'bayes'"),
        (object(), 1, "sampler must be a name or an optuna.samplers.BaseSampler, but got object"),
    ],
)  # fmt: skip
def test_a_sampler_that_cannot_work_is_refused_in_one_line(sampler, objectives, message):
    with pytest.raises(ValueError) as err:
        check_sampler(sampler, objectives=objectives)
    assert str(err.value) == message


def test_the_cli_offers_every_sampler_of_the_registry():
    from astune.cli.parser import build_parser

    search = next(
        a for a in build_parser()._subparsers._group_actions[0].choices["search"]._actions
        if "--sampler" in a.option_strings
    )  # fmt: skip
    assert list(search.choices) == [k.name for k in SAMPLER_KINDS]
