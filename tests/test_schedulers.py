"""Schedulers by name or object (issue 71 item 3): ``hyperband`` is Ray Tune's asynchronous
Hyperband with every bracket its rungs allow; a Ray Tune scheduler object from the Python API
is used as given and recorded by its class; what cannot serve the search (population-based
training among it) is refused in one line.
(A real search under each: test_search's and the replay's; these need no Ray cluster.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ray.tune.schedulers import (
    ASHAScheduler,
    AsyncHyperBandScheduler,
    FIFOScheduler,
    HyperBandForBOHB,
    PopulationBasedTraining,
)
from tiny import tiny_settings

from astune.space.files import SCHEDULER_TYPES
from astune.space.space import load_space
from astune.tuning.lifecycle.resume import search_params
from astune.tuning.searchers.algorithms import scheduler_for
from astune.tuning.searchers.scheduler_checks import check_scheduler

SPACE = load_space(Path(__file__).with_name("spaces") / "tiny.yaml")  # scheduler: none


@pytest.mark.parametrize(
    ("name", "kind"),
    [("asha", ASHAScheduler), ("hyperband", AsyncHyperBandScheduler), ("none", FIFOScheduler)],
)
def test_each_scheduler_name_builds_its_scheduler(name, kind):
    space = SPACE.with_settings(scheduler=name)
    scheduler = scheduler_for(space, 9)
    assert type(scheduler) is kind
    if name == "hyperband":  # grace 1, reduction 3, 9 reports: rungs at 1, 3, 9: 3 brackets
        assert len(scheduler._brackets) == 3


def test_a_scheduler_object_is_used_as_given_and_recorded_by_its_class():
    given = HyperBandForBOHB(time_attr="training_iteration", metric="val_loss", mode="min")
    assert scheduler_for(SPACE, 4, given) is given
    assert (given.metric, given._mode) == ("val_loss", "min")  # its own stay
    bare = ASHAScheduler(grace_period=1)  # as Ray's examples make one: no metric, no mode
    assert scheduler_for(SPACE, 4, bare) is bare
    assert (bare.metric, bare._mode) == (SPACE.metric, SPACE.mode)
    settings = tiny_settings(scheduler=given, space=str(SPACE.source))
    assert search_params(settings, SPACE)["scheduler"] == "HyperBandForBOHB"


@pytest.mark.parametrize(
    ("scheduler", "message"),
    [
        ("hyperband", "scheduler 'hyperband' stops trials on one metric, but the search has 2 "
         "objectives; use asha (successive halving by non-dominated sorting) or none"),
        (FIFOScheduler(), "a scheduler object (FIFOScheduler) stops trials on one metric, but "
         "the search has 2 objectives; use --scheduler asha or none"),
        (object(), "scheduler must be a name or a ray.tune.schedulers.TrialScheduler, but got "
         "object"),
        ("bogus", "scheduler must be one of 'auto', 'asha', 'hyperband', 'none', but got "
         "'bogus'."),  # the Python API's name: the file it would be applied to is not to blame
    ],
)  # fmt: skip
def test_a_scheduler_that_cannot_serve_the_search_is_refused_in_one_line(scheduler, message):
    with pytest.raises(ValueError) as err:
        check_scheduler(scheduler, objectives=2)
    assert str(err.value) == message
    check_scheduler("asha", objectives=2)  # successive halving by non-dominated sorting


@pytest.mark.parametrize(
    ("scheduler", "named"),
    [
        ("pbt", "scheduler 'pbt'"),
        ("pb2", "scheduler 'pb2'"),
        (
            PopulationBasedTraining(hyperparam_mutations={"lr": [1e-4, 1e-3]}),
            "a scheduler object (PopulationBasedTraining)",
        ),
    ],
)
def test_population_based_training_is_refused_in_one_line(scheduler, named, tmp_path):
    message = (
        f"{named} (population-based training) cannot serve an astune search: Ray Tune runs it "
        "only without a search algorithm, and Optuna proposes every astune trial; use asha, "
        "hyperband or none"
    )
    with pytest.raises(ValueError) as err:
        tiny_settings(scheduler=scheduler).validate()  # before any space or Ray is read
    assert str(err.value) == message
    if isinstance(scheduler, str):  # and in a space file, where the file is named
        space = tmp_path / "pbt.yaml"
        space.write_text(f"extends: default\nscheduler: {{type: {scheduler}}}\n")
        with pytest.raises(ValueError, match=re.escape(f"pbt.yaml: scheduler.type: {message}")):
            load_space(space)


def test_a_scheduler_object_on_another_metric_is_refused_in_one_line():
    own = HyperBandForBOHB(time_attr="training_iteration", metric="val_loss", mode="min")
    with pytest.raises(ValueError) as err:
        check_scheduler(own, objectives=1, metric="objective")
    assert str(err.value) == (
        "a scheduler object (HyperBandForBOHB) stops trials on 'val_loss', but the search's "
        "trials report 'objective'; make it with metric='objective', or with none (the "
        "search's is set)"
    )
    check_scheduler(ASHAScheduler(), objectives=1, metric="objective")  # none: the search's
    check_scheduler(ASHAScheduler(metric="objective"), objectives=1, metric="objective")


def test_the_cli_offers_every_scheduler():
    from astune.cli.parser import build_parser

    args = build_parser().parse_args(["search", "--dataset", "sst5", "--scheduler", "hyperband"])
    assert args.scheduler == "hyperband" and "hyperband" in SCHEDULER_TYPES
