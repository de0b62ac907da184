"""``astune.export``: a search's best config, or a point of its Pareto front, as a ``train``
config or as code (``python -m astune export``)."""

from __future__ import annotations

from os import PathLike

from astune.exporting import ExportResult, check_format


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
    from astune.store.reader import existing_store

    check_format(format)  # the flags and the store before MLflow is imported, as in the command
    existing_store(tracking_uri)
    from mlflow.exceptions import MlflowException

    from astune.exporting import export_best
    from astune.exporting.pick import Pick

    try:
        return export_best(
            experiment,
            format,
            output=output,
            tracking_uri=tracking_uri,
            pick=Pick(kind=pick or "best", within=within),
        )
    except MlflowException as err:  # an unreadable store or run: bad input, as in the command
        raise ValueError(str(err).splitlines()[0]) from None
