"""About what remains of a search, from how long its trials took and how far the running ones
are: the live table's and ``astune status``'s estimate (the same arithmetic for both)."""

from __future__ import annotations


def search_seconds_left(
    *,
    running: list[tuple[float, float | None]],
    finished_seconds: list[float],
    pending: int,
    concurrency: int,
) -> float | None:
    """What remains of a search, in seconds, if no trial is stopped early: the running trials'
    time to their end, each at its pace so far, and each trial not started yet taking the mean
    full length seen (finished trials', and running ones' elapsed over their share done), run
    ``concurrency`` at a time. ``running``: (elapsed seconds, share done or None) a trial.
    None: nothing measured yet."""
    lengths = list(finished_seconds)
    left = 0.0
    for elapsed, fraction in running:
        if not fraction or fraction <= 0:
            continue
        lengths.append(elapsed / fraction)
        left += max(0.0, elapsed / fraction - elapsed)
    if not lengths:
        return None
    mean = sum(lengths) / len(lengths)
    return (left + pending * mean) / max(1, concurrency)


def duration_text(seconds: float | None) -> str:
    """``seconds`` as ``"45 s"``, ``"12 min"`` or ``"3.2 h"``; ``"?"`` when unknown."""
    if seconds is None:
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"
