"""``astune.export``: a search's best config, or a point of its Pareto front, as a ``train``
config or as code (``python -m astune export``)."""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from astune.store.best import BestTrial


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export` rendered: the ``text``, the file it wrote (``path``, None when not
    asked to) and the ``trial`` it came from (its run ids, objective and config)."""

    text: str
    path: Path | None
    trial: BestTrial

    @property
    def config(self) -> dict[str, Any]:
        """The ``train`` config of the trial (what ``astune.train(config=...)`` takes)."""
        return dict(self.trial.config)


def export(
    experiment: str,
    *,
    format: str = "yaml",
    within: float | None = None,
    pick: str | None = None,
    output: str | PathLike[str] | None = None,
    tracking_uri: str | None = None,
) -> ExportResult:
    """Render the best trial of search ``experiment`` in ``format`` (``yaml``, ``json``,
    ``python`` or ``hf``), as ``python -m astune export`` does: the confirmed winner when
    ``confirm`` ran; of a multi-objective search the cheapest front trial at most ``within``
    percentage points below the best, or ``pick="fastest"``. Writes ``output`` when given.

    Raises ValueError (one line) for an unknown format, store or experiment, or a search
    without a finished trial.
    """
    from astune.exporting import FORMATS
    from astune.store.reader import existing_store

    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, but got {format!r}.")
    existing_store(tracking_uri)  # before MLflow is imported, as in the command
    from mlflow.exceptions import MlflowException

    from astune.exporting import find_best_trial, render
    from astune.exporting.pick import Pick

    try:
        trial = find_best_trial(
            experiment, tracking_uri, pick=Pick(kind=pick or "best", within=within)
        )
    except MlflowException as err:  # an unreadable store or run: bad input, as in the command
        raise ValueError(str(err).splitlines()[0]) from None
    text = render(trial, format)
    path = None if output is None else Path(output)
    if path is not None:
        path.write_text(text)
    return ExportResult(text=text, path=path, trial=trial)
