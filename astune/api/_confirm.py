"""``astune.confirm``: a search's best configs (or its Pareto front) and a baseline re-run over
fresh seeds (``python -m astune confirm``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from os import PathLike
from typing import TYPE_CHECKING

from astune.api._options import call_arguments

if TYPE_CHECKING:
    from astune.tuning.confirmation.confirm_summary import ConfirmResult


def confirm(
    experiment: str,
    *,
    top: int | None = None,
    seeds: int = 3,
    baseline: str = "softmax",
    front: bool = False,
    within: float | None = None,
    tracking_uri: str | None = None,
    max_concurrent: int | None = None,
    cpus_per_trial: float | None = None,
    gpus_per_trial: float | None = None,
    address: str | None = None,
    storage_path: str | None = None,
    storage_timeout: float | None = None,
    verbose: bool = False,
    progress: bool = True,
    plugins: Sequence[str | PathLike[str]] = (),
) -> ConfirmResult:
    """Re-run the ``top`` best configs of search ``experiment`` (default 2; with ``front`` the
    Pareto front's) and ``baseline`` with ``seeds`` seeds each, as ``python -m astune confirm``
    does; resources left None take the search's. ``progress``: the live table of the runs;
    ``verbose``: Ray's and MLflow's own output too; ``plugins``: the modules that register the
    losses the search's configs name (docs/extending.md). Each run is logged (tag
    ``astune.role=confirm``) with ``confirm.csv`` and ``confirm.md`` on the search's parent run.

    Returns the table: mean +- 95% interval per config and the paired difference to the
    baseline (``str()`` of it is what the command prints). Raises ValueError for bad input or an
    unknown experiment (before Ray starts) and :class:`astune.SearchStopped` on SIGTERM or
    Ctrl-C (the finished runs are kept; the same call runs the rest).
    """
    from astune.store.reader import existing_store
    from astune.tuning.confirmation.confirm import ConfirmSettings

    options = call_arguments(confirm, locals(), skip=("progress", "plugins"))
    options["plugins"] = tuple(os.fspath(p) for p in plugins)
    settings = ConfirmSettings(console=progress, **options).validate()
    existing_store(settings.tracking_uri)  # both before MLflow is imported, as in the command
    from mlflow.exceptions import MlflowException

    from astune.tuning.confirmation.confirm import execute_confirm, prepare_confirm

    try:
        prepared = prepare_confirm(settings)
    except MlflowException as err:  # an unreadable store or run: bad input, as in the command
        raise ValueError(str(err).splitlines()[0]) from None
    return execute_confirm(prepared)
