"""The Ray Tune trainable: one trial is one :func:`astune.training.fit` run.

Runs in a Ray worker. The tokenized data arrives by reference (``tune.with_parameters``); the
trial's config (flat keys proposed by Optuna) is laid over the search's base config.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any


def train_trial(config: dict[str, Any], *, data: Any, base: dict[str, Any]) -> None:
    """Train with ``base | config``, reporting each evaluation with its checkpoint; a resumed
    (or retried) trial continues from the checkpoint Tune hands back."""
    from ray import tune

    from astune.config import TrainConfig
    from astune.search.scratch import clean_stale_scratch, make_scratch
    from astune.training import fit

    values = {**base, **{k: v for k, v in config.items() if v is not None}}
    # The run folder is scratch: Ray persists each reported checkpoint and MLflow every record.
    # Inside the trial folder Ray would copy it again at every experiment snapshot, and a reused
    # actor would leave it behind in its working directory.
    clean_stale_scratch()  # left by trials killed with SIGKILL on this node
    scratch = make_scratch(tune.get_context().get_trial_id())
    values["output_dir"] = scratch
    train_config = TrainConfig.from_dict(values)

    def report(record: dict[str, Any], folder: Path) -> None:
        tune.report(record, checkpoint=tune.Checkpoint.from_directory(str(folder)))

    try:
        checkpoint = tune.get_checkpoint()
        if checkpoint is None:
            final = fit(train_config, data=data, callback=report)
        else:
            with checkpoint.as_directory() as folder:
                final = fit(train_config, data=data, callback=report, resume_from=folder)
        tune.report(final_record(final))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def final_record(final: dict[str, Any]) -> dict[str, Any]:
    """The last report of a trial: the best evaluation's metrics (so that the searcher learns
    the value of the checkpoint the trial keeps) and its test metrics, flagged ``final``."""
    record = dict(final)
    record["objective"] = record.pop("best_objective")
    record["final"] = 1
    return record
