"""The one Tuner builder of a search and of a confirm: resources, callbacks, storage, retries.

A search gives its Optuna searcher and scheduler; a confirm gives a list of points and no
scheduler. Both get the same trainable (one :func:`astune.training.fit` per trial), the same
callbacks (checkpoint recovery, MLflow through :mod:`astune.store.writer`, the console) and
the same storage, failure and checkpoint settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from astune.tuning.settings import SearchSettings

if TYPE_CHECKING:
    import pyarrow.fs
    from ray import tune

    from astune.config import TrainConfig
    from astune.data.media_encoding import TrainData
    from astune.store.writer import SearchTracker


def trainable(
    function: Callable[..., None], settings: SearchSettings, *, base: TrainConfig, data: TrainData
) -> Any:
    """``function(config, data=, base=)`` with the data handed over by reference (put in Ray's
    object store once, not pickled per trial) and the trial's resources."""
    from ray import tune

    resources = {"cpu": settings.cpus_per_trial, "gpu": settings.gpus_per_trial or 0}
    return tune.with_resources(tune.with_parameters(function, data=data, base=base), resources)


def callbacks(
    settings: SearchSettings,
    tracker: SearchTracker,
    *,
    metric: str,
    total: int,
    command: str = "search",
) -> list:
    """Checkpoint recovery first (the tracking callback tags what it did), then the deletion of
    finished trials' checkpoints (unless kept), then MLflow, then the console table when the
    search shows one."""
    from astune.tuning.callbacks import (
        CheckpointRecovery,
        DropFinishedCheckpoints,
        MLflowTrialCallback,
    )
    from astune.tuning.console import ConsoleCallback
    from astune.tuning.settings import PROGRESS_EVERY_S

    recovery = CheckpointRecovery()
    found: list = [recovery]
    if not settings.keep_checkpoints:  # gone before the run says FINISHED
        found.append(DropFinishedCheckpoints())
    every = getattr(settings, "progress_every", PROGRESS_EVERY_S)
    found.append(MLflowTrialCallback(tracker, recovery, progress_every=min(60.0, every)))
    if settings.console:
        found.append(ConsoleCallback(metric, total, command=command, progress_every=every))
    return found


def build_tuner(
    settings: SearchSettings,
    trainable: Any,
    *,
    name: str,
    tracker: SearchTracker,
    search_alg: Any,
    scheduler: Any,
    num_samples: int,
    metric: str,
    param_space: Mapping[str, Any] | None = None,
    command: str = "search",
) -> tune.Tuner:
    """A ``tune.Tuner`` writing to ``settings``' storage path under ``name``; ``command`` names
    the live table (``search`` or ``confirm``)."""
    from ray import tune

    from astune.training.state import KEPT_CHECKPOINTS

    filesystem, storage_path = settings.storage()
    run_config = tune.RunConfig(
        name=name,
        storage_path=storage_path,
        storage_filesystem=filesystem,
        callbacks=callbacks(settings, tracker, metric=metric, total=num_samples, command=command),
        failure_config=tune.FailureConfig(max_failures=settings.max_failures),
        checkpoint_config=tune.CheckpointConfig(num_to_keep=KEPT_CHECKPOINTS),
        verbose=tune_verbosity(settings),
    )
    tune_config = tune.TuneConfig(
        search_alg=search_alg,
        scheduler=scheduler,
        num_samples=num_samples,
        reuse_actors=settings.reuse_actors,
        trial_dirname_creator=trial_dirname,
    )
    return tune.Tuner(
        trainable,
        param_space=dict(param_space or {}),
        tune_config=tune_config,
        run_config=run_config,
    )


def tune_verbosity(settings: SearchSettings) -> int:
    """Ray Tune's ``RunConfig.verbose``: 0 (the console table and the closing lines are
    astune's), or with ``--verbose`` Tune's default, 1 (its progress report)."""
    return 1 if settings.verbose else 0


def restore_tuner(
    trainable: Any, *, filesystem: pyarrow.fs.FileSystem | None, path: str
) -> tune.Tuner:
    """The Tuner of an interrupted search saved at ``path`` (on ``filesystem``, as
    :meth:`SearchSettings.experiment_storage` gives them), unfinished and errored trials
    resumed."""
    from ray import tune

    return tune.Tuner.restore(
        path,
        trainable=trainable,
        resume_unfinished=True,
        resume_errored=True,
        storage_filesystem=filesystem,
    )


def trial_dirname(trial: Any) -> str:
    """Short trial folders (Ray's default spells out the whole config)."""
    return f"trial_{trial.trial_id}"
