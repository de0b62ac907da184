"""One training run, no Ray: the one training loop (:func:`fit`, :class:`Run`), its batch sources
(shuffled, or AS-Skip's plan), evaluation, checkpoint state and public hooks."""

from astune.training.fit import fit
from astune.training.hooks import LoopHooks
from astune.training.loop import Run

__all__ = ["LoopHooks", "Run", "fit"]
