"""NeighbourSampler: after the enqueued seed points, its first trials are one step from the best
finished trial, then the wrapped sampler proposes alone."""

from __future__ import annotations

import math

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from astune.tuning.searchers.neighbours import STEP_FRACTION, NeighbourSampler, neighbour_values

optuna.logging.set_verbosity(optuna.logging.WARNING)

LR = FloatDistribution(1e-5, 1e-1, log=True)
EPOCHS = IntDistribution(1, 9)
BATCH = CategoricalDistribution([16, 32, 64])
LOSS = CategoricalDistribution(["softmax", "as_softmax"])


def objective(trial: optuna.Trial) -> float:
    """A branch-conditional space; the score peaks at lr 1e-3, 5 epochs, AS-Softmax."""
    lr = trial.suggest_float("lr", 1e-5, 1e-1, log=True)
    epochs = trial.suggest_int("epochs", 1, 9)
    trial.suggest_categorical("batch_size", [16, 32, 64])
    loss = trial.suggest_categorical("loss", ["softmax", "as_softmax"])
    if loss == "as_softmax":
        trial.suggest_float("delta", 0.1, 0.5, step=0.1)
    return -abs(math.log10(lr) + 3) - abs(epochs - 5) / 4 + (loss == "as_softmax")


def differing(a: dict, b: dict) -> set[str]:
    return {k for k in a.keys() & b.keys() if a[k] != b[k]}


def one_step(dist, old, new) -> bool:
    """The reference: ``new`` is one step from ``old`` as the module's docstring defines it."""
    if isinstance(dist, CategoricalDistribution):
        ordered = sorted(dist.choices)
        return abs(ordered.index(new) - ordered.index(old)) == 1
    scale = math.log if dist.log else float
    step = STEP_FRACTION * (scale(dist.high) - scale(dist.low))
    moved = abs(scale(new) - scale(old))
    at_bound = new in (dist.low, dist.high)
    return math.isclose(moved, step, rel_tol=1e-9) or (at_bound and moved < step)


def study_with(sampler: optuna.samplers.BaseSampler, seed_points: list[dict], n: int):
    study = optuna.create_study(direction="maximize", sampler=sampler)
    for point in seed_points:
        study.enqueue_trial(point)
    study.optimize(objective, n_trials=n)
    return study


SEED_POINTS = [
    {"lr": 1e-4, "epochs": 3, "batch_size": 32, "loss": "as_softmax", "delta": 0.3},
    {"lr": 1e-2, "epochs": 8, "batch_size": 16, "loss": "softmax"},
]


def test_each_local_trial_moves_one_parameter_of_the_incumbent_one_step():
    sampler = NeighbourSampler(trials=4, seed=0)
    study = study_with(sampler, SEED_POINTS, n=8)
    plans = sampler.planned()
    assert sorted(plans) == [2, 3, 4, 5]  # after the two seed points, four local trials
    for number in plans:
        done = [t for t in study.trials[:number] if t.state.name == "COMPLETE"]
        best = max(done, key=lambda t: t.value)
        trial = study.trials[number]
        moved = differing(best.params, trial.params)
        assert len(moved) == 1, (best.params, trial.params)
        (name,) = moved
        if name != "loss":
            assert one_step(trial.distributions[name], best.params[name], trial.params[name])
    ran = [tuple(sorted(t.params.items())) for t in study.trials]
    assert len(set(ran)) == len(ran)  # no neighbour repeats a trial


def test_after_its_trials_the_wrapped_sampler_proposes_alone():
    tpe = optuna.samplers.TPESampler(seed=3)
    plain = study_with(optuna.samplers.TPESampler(seed=3), [], n=5)
    wrapped_sampler = NeighbourSampler(tpe, trials=0, seed=3)
    wrapped = study_with(wrapped_sampler, [], n=5)
    assert [t.params for t in wrapped.trials] == [t.params for t in plain.trials]
    assert wrapped_sampler.planned() == {}


def test_a_move_of_the_loss_leaves_the_new_branch_to_the_wrapped_sampler():
    sampler = NeighbourSampler(trials=40, seed=1)
    study = study_with(sampler, SEED_POINTS[:1], n=30)
    switched = [
        study.trials[n] for n, plan in sampler.planned().items() if plan["loss"] == "softmax"
    ]
    assert switched, "a move of the loss is one of the neighbours"
    assert all("delta" not in t.params for t in switched)


def test_no_local_trial_before_one_has_finished_or_with_several_objectives():
    sampler = NeighbourSampler(trials=3, seed=0)
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    study.optimize(lambda t: (t.suggest_float("x", 0, 1), 1.0), n_trials=4)
    assert sampler.planned() == {}
    first = NeighbourSampler(trials=3, seed=0)
    study = optuna.create_study(sampler=first)
    trial = study.ask()  # nothing finished yet: the wrapped sampler's
    assert trial.number not in first.planned()


@pytest.mark.parametrize("trials", [-1, 1.5, True, "4"])
def test_trials_must_be_a_count(trials):
    with pytest.raises(ValueError) as err:
        NeighbourSampler(trials=trials)
    assert str(err.value) == f"trials must be an integer in [0, inf), but got {trials!r}."


def test_neighbour_values():
    assert neighbour_values(BATCH, 32) == [16, 64]
    assert neighbour_values(BATCH, 16) == [32]
    assert neighbour_values(LOSS, "softmax") == ["as_softmax"]
    up, down = 1e-3 * 10 ** (STEP_FRACTION * 4), 1e-3 / 10 ** (STEP_FRACTION * 4)
    assert neighbour_values(LR, 1e-3) == pytest.approx([down, up])
    assert neighbour_values(LR, 1e-1) == pytest.approx([1e-1 / 10 ** (STEP_FRACTION * 4)])
    assert neighbour_values(EPOCHS, 5) == [3, 7]
    assert neighbour_values(IntDistribution(1, 3), 2) == [1, 3]  # at least one step
    delta = FloatDistribution(0.1, 0.5, step=0.1)
    assert neighbour_values(delta, 0.3) == pytest.approx([0.2, 0.4])


def test_behind_ray_tunes_searcher_the_seed_points_run_first_then_neighbours():
    """Through the seam a search uses: Ray Tune's OptunaSearch enqueues the seed points."""
    from astune.tuning.searchers.searcher import PruneAwareOptunaSearch

    def space(trial: optuna.Trial) -> None:
        trial.suggest_float("lr", 1e-5, 1e-1, log=True)
        trial.suggest_categorical("batch_size", [16, 32, 64])

    points = [{"lr": 1e-4, "batch_size": 32}, {"lr": 1e-2, "batch_size": 16}]
    sampler = NeighbourSampler(trials=2, seed=0)
    search = PruneAwareOptunaSearch(
        space=space, metric="score", mode="max", points_to_evaluate=points, sampler=sampler
    )
    assert [search.suggest(f"t{i}") for i in range(2)] == points
    for i, score in enumerate((0.7, 0.2)):
        search.on_trial_complete(f"t{i}", {"score": score, "final": True})
    local = [search.suggest(f"t{i}") for i in (2, 3)]
    for config in local:
        assert len(differing(points[0], config)) == 1, config
    assert local[0] != local[1]
    assert sorted(sampler.planned()) == [2, 3]
