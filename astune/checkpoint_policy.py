"""When a training run writes its resume checkpoint: at every evaluation, every N minutes, or
once at the end. Torch-free, so that configs and the CLI can check a policy cheaply.

A checkpoint is what an exact resume needs (model, optimizer moments, schedules, RNG states,
position). It is the largest thing a search writes: ~240 MB for a 2-layer MiniLM, ~1.7 GB for
BERT-base, copied to the search's storage (a shared folder or s3) each time. Evaluations that do
not write one still report their metrics (ASHA and MLflow need only those); a trial that dies
resumes from its last checkpoint (or starts again), and MLflow keeps one point per evaluation.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from astune._checks import InvalidArgument

EVERY_EVALUATION = "eval"
AT_END = "end"
TRAIN_DEFAULT = EVERY_EVALUATION  # `train`: a local folder, cheap to write, resumable anywhere
SEARCH_DEFAULT = "10m"  # searches: see benchmarks/RESULTS.md, "Checkpoint traffic"
ACCEPTED = (
    f"{EVERY_EVALUATION!r} (every evaluation), {AT_END!r} (once, at the last evaluation) or "
    "minutes such as '10m'"
)
_MINUTES = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)\s*m(?:in)?$")


@dataclass(frozen=True)
class CheckpointPolicy:
    """``every`` is ``"eval"``, ``"end"`` or ``"<minutes>m"`` (e.g. ``"10m"``, ``"0.5m"``)."""

    every: str

    def __post_init__(self) -> None:
        self.minutes  # noqa: B018 -- parses, raising ValueError on a bad value

    @property
    def minutes(self) -> float | None:
        """The interval in minutes, None for ``eval`` and ``end``."""
        if self.every in (EVERY_EVALUATION, AT_END):
            return None
        match = _MINUTES.match(self.every.strip()) if isinstance(self.every, str) else None
        value = float(match.group(1)) if match else math.nan
        if not value > 0:
            raise InvalidArgument("checkpoint_every", f"must be {ACCEPTED}", self.every)
        return value

    def due(self, *, seconds_since_last: float, last: bool) -> bool:
        """Whether the evaluation just made writes a checkpoint. ``seconds_since_last``: wall
        time since the run's last checkpoint (or its start); ``last``: the run's final
        evaluation (a finished run needs no checkpoint to resume, so only ``end`` writes it)."""
        if self.every == EVERY_EVALUATION:
            return True
        if self.every == AT_END:
            return last
        return not last and seconds_since_last >= self.minutes * 60.0
