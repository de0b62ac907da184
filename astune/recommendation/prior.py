"""The paper's rule for delta and r as functions of the probe's difficulty, and the difficulty
bands the schedule advice groups searches by.

The paper's rule (Settings): delta 0.3 for most tasks, about 0.35 for easy ones and about 0.2 for
hard ones; r > 0 (0.15-0.25) only for easy tasks with a high baseline (Clinc_oos, Conll2003). On
the probe's difficulty scale (:mod:`astune.history.difficulty`) the paper's easy tasks
measure about 0.3 (Clinc_oos) and 0.4 (Conll2003) and SST5, which it calls hard, about 0.9, so
the prior runs linearly through (0.45, 0.35), (0.75, 0.30) and (1.0, 0.20), flat outside; r is
0.2 up to difficulty 0.45 and falls linearly to 0 at 0.6.
"""

from __future__ import annotations

PRIOR_ANCHORS = ((0.45, 0.35), (0.75, 0.30), (1.0, 0.20))
PRIOR_HALF_WIDTH = 0.05
R_EASY, R_FULL_UNTIL, R_ZERO_FROM = 0.2, 0.45, 0.6
UNKNOWN_DIFFICULTY = 0.75  # a task nothing could be measured on counts as medium
BANDS = (("easy", R_ZERO_FROM), ("medium", 0.875), ("hard", float("inf")))
"""Difficulty bands by their upper edge (exclusive): easy where the paper warms up, hard from
half-way between the medium anchor (0.75) and the hardest (1.0)."""


def prior_delta(difficulty: float) -> float:
    """The paper's rule as a function of difficulty (module docstring)."""
    (x0, y0), *rest = PRIOR_ANCHORS
    if difficulty <= x0:
        return y0
    for x1, y1 in rest:
        if difficulty <= x1:
            return y0 + (y1 - y0) * (difficulty - x0) / (x1 - x0)
        x0, y0 = x1, y1
    return y0


def prior_warmup(difficulty: float) -> float:
    """The paper's warm-up r: 0.2 for easy tasks with a high baseline, 0 otherwise."""
    if difficulty <= R_FULL_UNTIL:
        return R_EASY
    return R_EASY * max(0.0, (R_ZERO_FROM - difficulty) / (R_ZERO_FROM - R_FULL_UNTIL))


def band_of(difficulty: float) -> str:
    """``easy``, ``medium`` or ``hard`` (:data:`BANDS`)."""
    return next(name for name, upper in BANDS if difficulty < upper)
