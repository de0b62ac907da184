"""AS-Speed: adaptive gradient accumulation driven by the share of masked samples (paper
Sec. III-C).

``steps = lam * N_all / (N_all - N_masked)``, with the paper's three restrictions: the value never
decreases, rises by at most 1 per update, and is capped at ``max_steps``.
"""

from __future__ import annotations

import math
from typing import Any

from astune._checks import check_int, check_range


class ASSpeed:
    """Accumulation-step controller for AS-Softmax training.

    Call :meth:`update` once per optimizer step with the row counts of the window that step
    accumulated (``MaskStats.n_active`` / ``n_masked`` summed over its micro-batches); it returns
    the
    number of micro-batches to accumulate for the next optimizer step.

    Args:
        lam: the acceleration magnitude ``lambda`` (> 0).
        max_steps: the cap ``s`` on accumulation steps (>= 1).

    Example:
        >>> speed = ASSpeed(lam=1.5, max_steps=4)
        >>> [speed.update(100, m) for m in (0, 0, 60, 90, 100)]
        [2, 2, 3, 4, 4]
    """

    def __init__(self, lam: float, max_steps: int):
        self.lam = check_range("lam", lam, 0.0, None, low_open=True)
        self.max_steps = check_int("max_steps", max_steps, 1)
        self.steps = 1

    def target(self, n_active: int, n_masked: int) -> int:
        """The unconstrained request ``round(lam * N_all / (N_all - N_masked))``, at least 1.

        An all-masked window (``n_masked == n_active > 0``) asks for ``max_steps``; a window with
        no active rows carries no evidence and asks for the current value.
        """
        n_active = check_int("n_active", int(n_active), 0)
        n_masked = check_int("n_masked", int(n_masked), 0, n_active)
        if n_active == 0:
            return self.steps
        if n_masked == n_active:
            return self.max_steps
        wanted = self.lam * n_active / (n_active - n_masked)
        return max(1, math.floor(wanted + 0.5))  # round half up, not Python's half-to-even

    def update(self, n_active: int, n_masked: int) -> int:
        """Fold one window's counts in; returns the accumulation steps for the next step."""
        wanted = self.target(n_active, n_masked)
        self.steps = max(self.steps, min(wanted, self.steps + 1, self.max_steps))
        return self.steps

    def state_dict(self) -> dict[str, Any]:
        return {"lam": self.lam, "max_steps": self.max_steps, "steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lam = check_range("lam", state["lam"], 0.0, None, low_open=True)
        self.max_steps = check_int("max_steps", state["max_steps"], 1)
        self.steps = check_int("steps", state["steps"], 1, self.max_steps)

    def __repr__(self) -> str:
        return f"ASSpeed(lam={self.lam}, max_steps={self.max_steps}, steps={self.steps})"
