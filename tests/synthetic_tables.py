"""A synthetic search-efficiency table for the benchmark's tests: every grid config's curve a
plain function of config and epoch, laid out as the recorder writes rows."""

from __future__ import annotations

import itertools
from typing import Any

from benchmarks.search_efficiency import settings

STARTUP, TAIL = 2.0, 1.0
"""Synthetic seconds: a trial's start-up before its first epoch, and its final test."""


def epoch_seconds(config: dict[str, Any]) -> float:
    return 3.0 if config["batch_size"] == 16 else 2.0


def quality(config: dict[str, Any], seed: int) -> float:
    """The synthetic final score: best at the middle lr, batch 16, an AS loss; seeds differ a
    little."""
    score = 0.3 + 0.1 * (config["lr"] == settings.LRS[1]) + 0.05 * (config["batch_size"] == 16)
    return score + 0.02 * (config["loss"] != "softmax") + 0.02 * config["epochs"] + 0.001 * seed


def synthetic_rows(configs: list[dict[str, Any]], seeds=settings.SEEDS) -> list[dict]:
    """One row per evaluation (epoch) of every config and seed, rising to :func:`quality`."""
    rows = []
    for config, seed in itertools.product(configs, seeds):
        config, last = settings.normalized(config), config["epochs"]
        for epoch in range(1, last + 1):
            elapsed = STARTUP + epoch * epoch_seconds(config)
            rows.append(
                {
                    "key": settings.config_key(config),
                    "seed": seed,
                    **config,
                    "metric": "accuracy",
                    "evaluation": epoch,
                    "epoch": float(epoch),
                    "last": epoch == last,
                    "val": quality(config, seed) * (1 - 0.5**epoch),
                    "test": 0.9 * quality(config, seed),
                    "elapsed_seconds": elapsed,
                    "trial_seconds": STARTUP + last * epoch_seconds(config) + TAIL,
                }
            )
    return rows
