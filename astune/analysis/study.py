"""What every study hands back: the data behind its figure, the figure and its caption."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

SEARCH_HINT = "run with --losses softmax,as_softmax"


@dataclass
class StudyResult:
    """One study of the report.

    ``data`` holds what was drawn (series name -> points, baselines, tables) so that a test can
    check the figure without reading pixels; ``image`` is None when there was nothing to draw;
    ``notes`` say, one line each, what the search lacked for this study.
    """

    name: str
    title: str
    caption: str
    data: dict[str, Any] = field(default_factory=dict)
    image: Path | None = None
    table: str | None = None
    notes: list[str] = field(default_factory=list)


def absent(trials: "pd.DataFrame", losses: tuple[str, ...], family: str) -> str:
    """Why a study has no finished ``family`` trial: none in the search, or none finished."""
    ran = int(trials["loss"].isin(losses).sum())
    if ran == 0:
        return f"no {family} trial in this search: {SEARCH_HINT}"
    return f"none of the {ran} {family} trials of this search finished"
