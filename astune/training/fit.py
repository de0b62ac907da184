"""The public entry point of a training run: :func:`fit` builds a :class:`Run`, restores it
when asked, and trains it to the end."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astune.config import TrainConfig
from astune.training.hooks import LoopHooks, ProgressBar
from astune.training.loop import Callback, Run
from astune.training.state import BestWeights

if TYPE_CHECKING:
    from astune.data.media_encoding import TrainData


def fit(
    config: TrainConfig,
    *,
    data: TrainData | None = None,
    callback: Callback | None = None,
    resume_from: str | Path | None = None,
    progress: bool = False,
    best_weights: BestWeights | None = None,
    hooks: Sequence[LoopHooks] = (),
) -> dict[str, Any]:
    """Train, evaluate after every epoch (or every ``eval_every`` optimizer steps), keep the best
    checkpoint on the validation metric and score it once on the test split.

    Args:
        config: the run; unset ``epochs``/``batch_size``/``lr`` take the paper's values (on the
            run's own copy: ``config`` is not changed).
        data: ``EncodedData`` or ``MediaData`` made once by the caller (a search driver); loaded,
            checked and tokenized here when None.
        callback: called after each evaluation with the record (the metric names of
            docs/contract.md) and the checkpoint folder just written (None: the policy wrote
            none).
        resume_from: a checkpoint folder to continue from exactly.
        progress: show a progress bar on stderr.
        best_weights: where best weights that are not the current ones go when a checkpoint
            is written (default: the run's checkpoint folder).
        hooks: called around each phase, in order (:class:`LoopHooks`).

    Returns:
        The final record (``final.json``): ``val_<metric>`` of the best evaluation,
        ``test_<metric>`` of that checkpoint, ``optimizer_steps`` and ``train_seconds`` (training
        time, evaluations and checkpoint writes excluded).
    """
    bar = ProgressBar() if progress else None
    hooks = (*hooks, bar) if bar is not None else tuple(hooks)
    run = Run(config, data=data, best_weights=best_weights, hooks=hooks)
    if resume_from is not None:
        run.restore(Path(resume_from))
    try:
        return run.train(callback)
    finally:
        if bar is not None:  # a run that raised leaves no half-drawn bar on the terminal
            bar.close()
