"""astune's pieces in a Ray Tune script of your own: the trainable, the search space as Optuna's
define-by-run function and as Ray Tune's ``OptunaSearch``, and the MLflow callback that writes
the runs ``astune search`` writes (a parent run and a child run per trial, with the same
params, tags and metrics).

    from ray import tune
    from astune.tuning import compose

    pieces = compose.prepare("sst5", backbone="minilm", num_layers=1, max_train_samples=64)
    tuner = tune.Tuner(
        pieces.trainable(),
        tune_config=tune.TuneConfig(search_alg=pieces.optuna_search(), num_samples=4),
        run_config=tune.RunConfig(name="mine", callbacks=[pieces.mlflow_callback()]),
    )
    results = tuner.fit()
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from astune.tuning.callbacks import MLflowTrialCallback
from astune.tuning.settings import PreparedSearch, SearchSettings

if TYPE_CHECKING:
    import optuna
    from ray.tune.experiment import Trial
    from ray.tune.search import Searcher

    from astune.space.space import SearchSpace


@dataclasses.dataclass(frozen=True)
class SearchPieces:
    """A search checked and its data tokenized once (:func:`prepare`), as parts of a Tuner."""

    prepared: PreparedSearch

    @property
    def space(self) -> SearchSpace:
        """The search space, for the task, with the settings' losses and fixed values."""
        return self.prepared.space

    @property
    def metric(self) -> str:
        """What the trials report and the search maximises or minimises (``objective``)."""
        return self.space.metric

    @property
    def mode(self) -> str:
        return self.space.mode

    def define_by_run(self) -> Callable[[optuna.Trial], dict[str, Any]]:
        """The space as Optuna's define-by-run function: ``trial -> config`` (its fixed keys
        returned, as Ray Tune's ``OptunaSearch(space=...)`` takes it)."""
        return self.space.define_by_run

    def trainable(self) -> Any:
        """The trainable of every trial: one run of astune's training loop on the data,
        handed to the trials by reference, with the settings' resources."""
        from astune.tuning.trainable import train_trial
        from astune.tuning.tuner import trainable

        prepared = self.prepared
        return trainable(
            train_trial, prepared.settings, base=prepared.train_base, data=prepared.data
        )

    def optuna_search(self, *, max_concurrent: int | None = None) -> Searcher:
        """Ray Tune's ``OptunaSearch`` on :meth:`define_by_run` (the settings' sampler and seed,
        the space's seed points first, trials stopped early told to Optuna as PRUNED), proposing
        for at most ``max_concurrent`` trials at a time (default: the settings', else 1)."""
        from astune.tuning.searchers.algorithms import searcher_for

        limit = max_concurrent or self.prepared.settings.max_concurrent or 1
        return searcher_for(self.space, self.prepared.settings, max_concurrent=limit)

    def mlflow_callback(self) -> SearchTracking:
        """The callback that writes the search's parent run and each trial's child run."""
        return SearchTracking(self.prepared)


class SearchTracking(MLflowTrialCallback):
    """:class:`MLflowTrialCallback` that also opens the parent run when the Tuner starts and
    ends it when the Tuner ends, with the best config logged as ``astune search`` logs it
    (``best_config.yaml``, ``trials.csv``, ``best_objective``)."""

    def __init__(self, prepared: PreparedSearch):
        from astune.tuning.execution import search_tracker

        super().__init__(search_tracker(prepared))
        self.base = dict(prepared.base)
        self.space = prepared.space

    def setup(self, **info: Any) -> None:
        if self.tracker.parent_run_id is None:
            self.tracker.start()
        super().setup(**info)

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        super().on_experiment_end(trials, **info)
        self.tracker.outbox.flush(force=True)
        self._log_best(trials)
        unfinished = any(trial.status not in ("TERMINATED", "ERROR") for trial in trials)
        self.tracker.finish("KILLED" if unfinished else "FINISHED")

    def _log_best(self, trials: list[Trial]) -> None:
        import pandas as pd

        from astune.store.artifacts import log_search_artifacts
        from astune.store.best import best_first

        metric, mode = self.space.metric, self.space.mode
        done = [t for t in trials if (t.last_result or {}).get("final") and metric in t.last_result]
        if not done:
            return
        best = min(done, key=lambda t: best_first(t.last_result[metric], t.trial_id, mode))
        rows = [{"trial_id": t.trial_id, metric: t.last_result[metric], **t.config} for t in done]
        log_search_artifacts(
            self.tracker,
            best_config={**self.base, **best.config},
            trials_df=pd.DataFrame(rows),
            best_objective=best.last_result[metric],
            mode=mode,
            base_config=self.base,
            metric=metric,
        )


def prepare(dataset: str, **settings: Any) -> SearchPieces:
    """The pieces of a search of ``dataset`` with ``settings`` (the arguments of
    :func:`astune.search`: ``backbone``, ``num_layers``, ``space``, ``losses``, ``name`` (the
    MLflow experiment), ``tracking_uri``, ...), checked (ValueError) and the data tokenized."""
    from astune.tuning.runner import prepare_search

    return SearchPieces(prepare_search(SearchSettings(dataset, console=False, **settings)))
