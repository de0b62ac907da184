"""The tiny search the Ray tests share, written once: MiniLM cut to one layer on a slice of the
data (``../shared/data``), no console table, and the space as given (no portfolio in front:
tests/test_portfolio_search.py tests that). Tests lay their own changes over it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from stores import new_store

from astune.tuning.settings import SearchSettings

TINY: dict[str, Any] = {
    "backbone": "minilm",
    "num_layers": 1,
    "max_train_samples": 64,
    "max_eval_samples": 32,
}
"""The settings of a tiny search, as ``SearchSettings`` fields (and ``--flag`` spellings)."""


def tiny_settings(
    dataset: str = "sst5", *, root: Path | None = None, data_dir: Path | None = None, **changes: Any
) -> SearchSettings:
    """A tiny search of ``dataset``; with ``root`` its MLflow store (``root/mlflow.db``) and Ray
    storage (``root/ray``) are there, with ``data_dir`` its data is read from that folder."""
    values: dict[str, Any] = {**TINY, "dataset": dataset, "console": False, "portfolio": False}
    if root is not None:
        values.update(tracking_uri=new_store(root), storage_path=str(root / "ray"))
    if data_dir is not None:
        values["data_dir"] = str(data_dir)
    return SearchSettings(**{**values, **changes})


def fifo_space(*, trials: int, epochs: int) -> dict[str, Any]:
    """A space of ``trials`` AS-Softmax trials run in order (no scheduler, no seed points), a
    fixed learning rate and batch, ``epochs`` epochs: one evaluation each. The fault tests
    count on that shape."""
    return {
        "extends": "default",
        "num_samples": trials,
        "losses": ["as_softmax"],
        "scheduler": {"type": "none"},
        "seed_points": [],
        "params": {
            "lr": {"type": "fixed", "value": 1.0e-3},
            "batch_size": 16,
            "epochs": {"type": "fixed", "value": epochs},
        },
    }


def tiny_flags(*, portfolio: bool = False, **changes: Any) -> list[str]:
    """The tiny search as ``astune search`` flags (``changes`` as fields: ``max_train_samples``),
    without the portfolio unless asked for."""
    values = {**TINY, **changes}
    flags = [
        item for key, value in values.items() for item in (f"--{key.replace('_', '-')}", str(value))
    ]
    return flags if portfolio else [*flags, "--no-portfolio"]


@contextmanager
def one_ray() -> Iterator[None]:
    """One local Ray for the searches (and confirms) run inside: each joins it instead of
    starting its own; shut down on the way out if this started it."""
    import ray

    from astune.tuning.execution import init_ray

    started = init_ray(SearchSettings(dataset="sst5"))
    try:
        yield
    finally:
        if started:
            ray.shutdown()
