"""The checkpoints of a run: when to write one (the policy), the best evaluation so far, and
where its weights are kept (:class:`~astune.training.state.BestWeights`), each best written once."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from astune.checkpoint_policy import CheckpointPolicy
from astune.training.state import (
    BEST_IS_CURRENT,
    KEPT_CHECKPOINTS,
    STATE_FILE,
    BestWeights,
    best_weights_of,
    cpu_state,
    write_checkpoint,
)


@dataclass(kw_only=True)
class Best:
    """The best evaluation so far: its objective, p_margin histogram, evaluation number and a
    CPU copy of its weights (for the test split at the end)."""

    objective: float | None = None
    margins: dict[str, list] | None = None
    evaluation: int | None = None
    weights: dict[str, Tensor] | None = None

    def state_dict(self) -> dict[str, Any]:
        """The checkpoint keys of the best so far (its weights are named by the checkpointer)."""
        return {
            "best": self.objective,
            "best_evaluation": self.evaluation,
            "best_margins": self.margins,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Best":
        """The best so far of a checkpoint ``state``, without its weights (see
        :meth:`Checkpointer.restore`)."""
        return cls(
            objective=state["best"],
            margins=state["best_margins"],
            evaluation=state["best_evaluation"],
        )

    def update(self, objective: float, *, margins: dict, evaluation: int, model: nn.Module) -> None:
        """Take this evaluation when it beats the best (the first of equal ones stays)."""
        if self.objective is None or objective > self.objective:
            self.objective, self.margins, self.evaluation = objective, margins, evaluation
            self.weights = cpu_state(model)


class Checkpointer:
    """Writes a run's resume checkpoints into ``folder`` when ``policy`` says so.

    Best weights that are not the current ones go to ``store`` once per best evaluation, however
    many checkpoints follow and name them; ``stats`` counts what was written for resuming over
    all of the run's attempts.
    """

    def __init__(self, folder: Path, policy: CheckpointPolicy, store: BestWeights):
        self.folder, self.policy, self.store = folder, policy, store
        self.stats = {"checkpoints": 0, "checkpoint_bytes": 0}
        self._stored: tuple[int, str] | None = None  # (evaluation, name) in store
        # what the last checkpoints name as their best weights (those files must stay)
        self._named: deque[str] = deque(maxlen=KEPT_CHECKPOINTS)
        self._last = time.monotonic()

    def due(self, *, last: bool) -> bool:
        """Whether the policy writes a checkpoint at this evaluation (``last``: the run's)."""
        return self.policy.due(seconds_since_last=time.monotonic() - self._last, last=last)

    def write_if_due(
        self,
        state: Callable[[], dict[str, Any]],
        best: Best,
        record: dict[str, Any],
        *,
        last: bool,
    ) -> Path | None:
        """At the evaluation ``record`` (``last``: the run's last), write a checkpoint of
        ``state()`` when the policy says so; the folder, or None."""
        if not self.due(last=last):
            return None
        return self.write(state(), best, record["evaluation"])

    def write(self, state: dict[str, Any], best: Best, evaluation: int) -> Path:
        """Write ``state`` naming where ``best``'s weights are; ``evaluation``: the one just
        made (when it is the best, the state's model is the best)."""
        if best.evaluation == evaluation:
            state["best_weights"], self._stored = BEST_IS_CURRENT, None
        else:
            if self._stored is None or self._stored[0] != best.evaluation:
                name = self.store.put(best.weights, best.evaluation)
                self._stored = (best.evaluation, name)
                self.stats["checkpoint_bytes"] += self.store.last_bytes
            state["best_weights"] = self._stored[1]
        self._named.append(state["best_weights"])
        self.stats["checkpoints"] += 1
        state["checkpoint_stats"] = dict(self.stats)  # counted with this checkpoint
        folder = write_checkpoint(self.folder, state)
        self.stats["checkpoint_bytes"] += (folder / STATE_FILE).stat().st_size
        self._last = time.monotonic()
        return folder

    def reported(self) -> None:
        """The last checkpoint is persisted (a search has reported it): older bests can go."""
        self.store.keep_only(set(self._named) - {BEST_IS_CURRENT})

    def restore(self, state: dict[str, Any], folder: Path, best: Best) -> None:
        """Continue from ``state`` (read from ``folder``): ``best``'s weights, the bests still
        named and the counts."""
        best.weights = best_weights_of(state, self.store, folder)
        ref = state["best_weights"]
        self._named.append(ref)
        if ref not in (None, BEST_IS_CURRENT):
            if not self.store.has(ref):  # resumed from another folder
                self.store.put(best.weights, best.evaluation)
            self._stored = (best.evaluation, ref)
        self.stats = dict(state["checkpoint_stats"])
        self.stats["checkpoint_bytes"] += (Path(folder) / STATE_FILE).stat().st_size
        self._last = time.monotonic()
