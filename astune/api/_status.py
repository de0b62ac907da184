"""``astune.status``: a running or finished search from its MLflow store alone (``python -m
astune status``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from astune.store.status import SearchStatus


def status(experiment: str, *, tracking_uri: str | None = None) -> SearchStatus:
    """The newest search of ``experiment`` as the store at ``tracking_uri`` holds it (from any
    machine that reaches the store): its trials' state, progress, objective and source, the
    best, the elapsed time and about what is left, and whether a RUNNING search's driver is
    stale (``str()`` of it is what the command prints). Raises ValueError (one line) for a
    store or experiment that is not there."""
    from astune.store.reader import existing_store
    from astune.store.status import search_status

    existing_store(tracking_uri)
    return search_status(experiment, tracking_uri)
