"""Trials that tie on the objective: every place that picks "the best trial" breaks the tie
by one rule (astune/store/best.py's ``best_first``: the lowest Ray trial id), whatever order
Ray or MLflow hand the trials back in, and again after a resume. Real MLflow (SQLite) and, for
the search's own choice, a real Ray Tune experiment restored as ``--resume`` restores it."""

from __future__ import annotations

import itertools
import sys

import pytest
from stores import new_store

from astune.confirmation.plan import ranked_trials
from astune.exporting import find_best_trial
from astune.store.reader import Store, best_trial, trial_id
from astune.store.writer import SearchTracker

# trial id -> (loss, objective): two tie for the best, one is worse (or best with mode min)
TIED = {"t_b": ("softmax", 0.5), "t_a": ("as_softmax", 0.5), "t_c": ("am_softmax", 0.25)}


def write_search(uri: str, name: str, trials: dict[str, tuple[str, float]], mode: str) -> None:
    """A finished search whose trial runs are written in the order of ``trials``."""
    params = {"dataset": "sst5", "backbone": "minilm", "num_layers": 1, "seed": 7, "mode": mode}
    tracker = SearchTracker(uri, name, dataset="sst5", task="single_label", search_params=params)
    tracker.start()
    for trial, (loss, value) in trials.items():
        run_id = tracker.open_trial_run(trial, {"loss": loss, "lr": 2e-05})
        tracker.log_result(run_id, {"objective": value, "evaluation": 0})
        tracker.log_final(run_id, {"objective": value})
        tracker.close_trial_run(run_id, "FINISHED")
    tracker.finish()


@pytest.mark.parametrize("mode, winner", [("max", "t_a"), ("min", "t_c")])
def test_tied_trials_in_any_order_give_one_best_to_export_and_confirm(tmp_path, mode, winner):
    uri = new_store(tmp_path)
    store = Store(uri)
    for i, order in enumerate(itertools.permutations(TIED)):
        name = f"tied-{mode}-{i}"
        write_search(uri, name, {t: TIED[t] for t in order}, mode)
        parent = store.require_search(name)
        trials = store.trials(parent.info.run_id)
        assert trial_id(best_trial(trials, mode)) == winner, order
        assert trial_id(best_trial(reversed(trials), mode)) == winner, order
        exported = find_best_trial(name, uri)
        assert trial_id(store.client.get_run(exported.run_id)) == winner, order
        assert exported.config["loss"] == TIED[winner][0]
        assert trial_id(ranked_trials(store, parent)[0]) == winner, order  # confirm's first
    with pytest.raises(ValueError, match="mode must be one of 'min', 'max', but got 'best'"):
        best_trial(trials, "best")


def tied(config: dict) -> None:
    """A trial whose objective ties with every other of its loss."""
    from ray import tune

    tune.report({"objective": 0.25 if config["loss"] == "am_softmax" else 0.5})


@pytest.mark.ray
def test_the_search_and_export_pick_the_same_tied_trial_before_and_after_a_resume(
    tmp_path, shared_ray
):
    import ray
    from ray import tune

    from astune.tuning.outcome import best_finished, result_trial_id

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import it
    losses = ["softmax", "as_softmax", "am_softmax"]
    tuner = tune.Tuner(
        tied,
        param_space={"loss": tune.grid_search(losses)},
        run_config=tune.RunConfig(name="tied", storage_path=str(tmp_path / "ray"), verbose=0),
    )
    fitted = tuner.fit()
    restored = tune.Tuner.restore(str(tmp_path / "ray" / "tied"), trainable=tied).get_results()
    losses_by_id = {result_trial_id(r): r.config["loss"] for r in restored}
    winner = min(t for t, loss in losses_by_id.items() if loss != "am_softmax")
    for results in (fitted, restored):
        best, value = best_finished(results, "objective", "max")
        assert (result_trial_id(best), value) == (winner, 0.5)

    # MLflow holds the same trials, the later of the tied ones written last (newest first)
    uri = new_store(tmp_path / "mlflow")
    scores = {t: (loss, 0.25 if loss == "am_softmax" else 0.5) for t, loss in losses_by_id.items()}
    write_search(uri, "tied", dict(sorted(scores.items())), "max")
    exported = find_best_trial("tied", uri)
    assert trial_id(Store(uri).client.get_run(exported.run_id)) == winner
