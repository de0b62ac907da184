"""Every sampler and scheduler the CLI lists runs a tiny search (issue 71): a real search of a
real space through Ray Tune and Optuna, two trials of two evaluations one at a time, recorded
in MLflow under the names it was asked by; each search pairs a sampler with a scheduler.
(tests/test_samplers.py and test_schedulers.py check each piece without Ray: the configs a
sampler proposes, the scheduler a name builds, and the one-line refusals.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient
from tiny import tiny_settings

from astune.space.files import SCHEDULER_TYPES
from astune.tuning.runner import execute_search, prepare_search
from astune.tuning.searchers.samplers import SAMPLER_KINDS

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TRIALS = 2
SEVERAL = {"nsgaii", "nsgaiii"}  # searched with two objectives, as they are meant to be
CASES = [
    ("tpe", "asha"),
    ("neighbours", "none"),  # the second trial is one step from the first
    ("random", "hyperband"),
    ("qmc", "none"),
    ("cmaes", "asha"),
    ("gp", "hyperband"),
    ("nsgaii", "asha"),  # two objectives: successive halving by non-dominated sorting
    ("nsgaiii", "none"),
]
"""Each sampler with a scheduler (one search serves both), hyperband with one objective."""


def test_the_cases_cover_every_sampler_and_scheduler_listed():
    from astune.cli.parser import build_parser

    search = build_parser()._subparsers._group_actions[0].choices["search"]
    listed = {
        option: set(action.choices)
        for action in search._actions
        for option in ("--sampler", "--scheduler")
        if option in action.option_strings
    }
    assert listed["--sampler"] == {kind.name for kind in SAMPLER_KINDS} == {s for s, _ in CASES}
    assert listed["--scheduler"] == set(SCHEDULER_TYPES) - {"auto"} == {s for _, s in CASES}


def tiny_space(folder: Path, **changes) -> Path:
    """tests/spaces/tiny.yaml with no seed points: every trial is the sampler's."""
    space = yaml.safe_load((Path(__file__).with_name("spaces") / "tiny.yaml").read_text())
    space.update(num_samples=TRIALS, seed_points=[], **changes)
    path = folder / "space.yaml"
    path.write_text(yaml.safe_dump(space))
    return path


@pytest.mark.parametrize(("sampler", "scheduler"), CASES, ids=[f"{a}-{b}" for a, b in CASES])
def test_each_listed_sampler_and_scheduler_runs_a_tiny_search(
    sampler, scheduler, shared_ray, tmp_path, data_dir
):
    space = {}
    if sampler == "neighbours":  # delta alone searched: the second trial moves it one step
        space = {"losses": ["as_softmax"], "speed_params": {"as_speed": False}}
    changes = {"space": str(tiny_space(tmp_path, **space)), "max_concurrent": 1}
    if sampler in SEVERAL:
        changes["objectives"] = "objective,train_seconds"
    settings = tiny_settings(
        root=tmp_path, data_dir=data_dir, name=f"{sampler}-{scheduler}", max_train_samples=32,
        sampler=sampler, scheduler=scheduler, **changes,
    )  # fmt: skip
    result = execute_search(prepare_search(settings))

    client = MlflowClient(settings.tracking_uri)
    parent = client.get_run(result.parent_run_id)
    assert parent.info.status == "FINISHED"
    assert (parent.data.params["sampler"], parent.data.params["scheduler"]) == (sampler, scheduler)
    trials = client.search_runs(
        [result.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{result.parent_run_id}'"
    )
    assert len(trials) == TRIALS and {t.info.status for t in trials} == {"FINISHED"}
    for trial in trials:  # each a config of the space, evaluated at least once
        assert trial.data.params["loss"] in ("as_softmax", "softmax")
        if trial.data.params["loss"] == "as_softmax":
            assert 0.1 <= float(trial.data.params["delta"]) <= 0.5
        assert "objective" in trial.data.metrics
    if sampler in SEVERAL:
        assert len(result.objectives) == 2 and result.front
    if sampler == "neighbours":  # a step: a quarter of delta's range [0.1, 0.5]
        first, second = sorted(trials, key=lambda t: t.info.start_time)
        deltas = [float(t.data.params["delta"]) for t in (first, second)]
        assert abs(deltas[1] - deltas[0]) == pytest.approx(0.1), deltas
