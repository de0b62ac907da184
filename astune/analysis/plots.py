"""Matplotlib without pyplot: a Figure on an Agg canvas, no global backend or figure state."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 110


def new_figure(width: float = 6.4, height: float = 4.4, *, columns: int = 1) -> tuple[Figure, list]:
    """A figure with ``columns`` axes side by side."""
    figure = Figure(figsize=(width * columns, height), dpi=DPI)
    FigureCanvasAgg(figure)
    axes = [figure.add_subplot(1, columns, i + 1) for i in range(columns)]
    for ax in axes:
        ax.grid(alpha=0.3)
    return figure, axes


def save(figure: Figure, path: Path) -> Path:
    """Write the figure as a PNG and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def loss_colors(losses: Iterable[str]) -> dict[str, str]:
    """A stable color per loss: the AS losses red, the softmax baselines blue, others C2...."""
    fixed = {
        "as_softmax": "C3",
        "multilabel_as_softmax": "C3",
        "softmax": "C0",
        "multilabel_softmax": "C0",
    }
    others = iter(f"C{i}" for i in (2, 1, 4, 5, 6, 7, 8, 9) * 4)
    return {loss: fixed.get(loss) or next(others) for loss in dict.fromkeys(losses)}
