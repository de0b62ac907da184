"""The Ray Tune trainable: one trial is one :func:`astune.training.fit` run.

Runs in a Ray worker. The tokenized data arrives by reference (``tune.with_parameters``); the
trial's config (flat keys proposed by Optuna) is laid over the search's base config.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from astune.config import TrainConfig
    from astune.data.media_encoding import TrainData


def train_trial(config: dict[str, Any], *, data: TrainData, base: TrainConfig) -> None:
    """Train with ``base | config``, reporting each evaluation (with a checkpoint when the
    policy writes one); a resumed (or retried) trial continues from the checkpoint Tune hands
    back. Best weights that are not the current ones go to ``best/`` in the trial's storage
    folder, once each: Ray uploads the checkpoint folder whole at every report."""
    from ray import tune

    from astune._private import trial_storage
    from astune.store.conventions import STORAGE_WAIT_KEY
    from astune.store.storage_handler import checkpoint_filesystem
    from astune.store.storage_retry import waited_seconds
    from astune.training import fit
    from astune.training.state import BestWeights
    from astune.tuning.lifecycle.scratch import clean_stale_scratch, make_scratch
    from astune.tuning.progress import PublishProgress

    # The run folder is scratch: Ray persists each reported checkpoint and MLflow every record.
    # Inside the trial folder Ray would copy it again at every experiment snapshot, and a reused
    # actor would leave it behind in its working directory.
    clean_stale_scratch()  # left by trials killed with SIGKILL on this node
    scratch = make_scratch(tune.get_context().get_trial_id())
    train_config = trial_config(base, config, output_dir=scratch)

    noted: dict[str, float] = {}  # said once, with the next report: RESTARTED_KEY
    waited_before = waited_seconds()  # a reused actor's earlier trials waited too

    def storage_wait() -> dict[str, float]:
        """The seconds this trial waited for object storage so far (none: nothing to say)."""
        waited = waited_seconds() - waited_before
        return {STORAGE_WAIT_KEY: round(waited, 3)} if waited else {}

    filesystem, trial_path = trial_storage()
    local = checkpoint_filesystem(filesystem)  # the storage's own when it retries: its errors

    def report(record: dict[str, Any], folder: Path | None) -> None:
        saved = None if folder is None else tune.Checkpoint(str(folder), filesystem=local)
        # the uploads of earlier reports are what waited
        tune.report({**record, **noted, **storage_wait()}, checkpoint=saved)
        noted.clear()

    best = BestWeights(filesystem, f"{trial_path}/best")
    progress = PublishProgress(tune.get_context().get_trial_id())  # between the evaluations
    run = functools.partial(
        fit, train_config, data=data, callback=report, best_weights=best, hooks=[progress]
    )
    try:
        checkpoint = tune.get_checkpoint()
        if checkpoint is None:
            final = run()
        else:
            final = _resumed(run, checkpoint, noted)
        tune.report(final_record({**final, **storage_wait()}))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _resumed(
    run: Callable[..., dict[str, Any]], checkpoint: Any, noted: dict[str, float]
) -> dict[str, Any]:
    """``run`` from ``checkpoint``; from the start, with one warning line (and
    ``RESTARTED_KEY`` in the next report, which the driver tags on the trial's run), when the
    checkpoint cannot be read (cut short by a copy or upload that died): the trial is not lost
    for it. MLflow keeps one point per evaluation (those already logged are not logged again)."""
    from astune.store.conventions import RESTARTED_KEY
    from astune.training.state import CheckpointUnreadable

    with checkpoint.as_directory() as folder:
        try:
            return run(resume_from=folder)
        except CheckpointUnreadable as err:
            warnings.warn(f"{err}; the trial restarts from its start", stacklevel=1)
            noted[RESTARTED_KEY] = 1.0
    return run()


def trial_config(base: TrainConfig, proposed: Mapping[str, Any], **fixed: Any) -> TrainConfig:
    """The trial's config: the search's validated base with the proposed keys laid over it
    (flat baseline-loss parameters go to ``loss_params``; ``None`` means "does not apply")."""
    from astune.losses.catalogue import LOSS_PARAM_NAMES
    from astune.plugins import load_plugins

    load_plugins(base.plugins)  # this worker's own import: their parameters' names below
    values = {k: v for k, v in proposed.items() if v is not None}
    loss_params = {k: values.pop(k) for k in LOSS_PARAM_NAMES if k in values}
    return dataclasses.replace(
        base, **values, **fixed, loss_params={**base.loss_params, **loss_params}
    )


def final_record(final: dict[str, Any]) -> dict[str, Any]:
    """The last report of a trial: the best evaluation's metrics (so that the searcher learns
    the value of the checkpoint the trial keeps) and its test metrics, flagged ``final``."""
    record = dict(final)
    record["objective"] = record.pop("best_objective")
    record["final"] = 1
    return record
