"""How AS-Softmax's delta moves over training: the paper's warm-up then a fixed value
(:class:`DeltaSchedule`), or one of two controllers that adapt it after the warm-up.

- :class:`TargetMaskDelta` (``target-mask``): a proportional controller. The target masked
  ratio rises linearly from 0 at the end of the warm-up to ``mask_target`` at the end of
  training; after each optimizer step delta moves against the error (more masked than the target:
  delta rises, masking less), by ``gain * error`` at most ``max_step``, within ``[delta_min, 1]``.
- :class:`EmaDelta` (``ema``): delta follows an exponential moving average of the batches' mean
  target margin ``p_t - max_{i != t} p_i``, in the spirit of CurricularFace's adaptive term (a
  sample is masked when it is further ahead than the running average), within
  ``[delta_min, 1]``.

Both hold ``delta = 1`` for the first ``warmup_ratio`` of training and start from ``delta`` after
it; they are deterministic functions of what they observe, and their state goes in checkpoints.
Torch-free: the loop hands them plain floats. ``step`` is any monotone unit of training
(samples seen in astune's loop).
"""

from __future__ import annotations

from typing import Any

from astune._checks import check_choice, check_int, check_range
from astune.losses.catalogue import DELTA, DELTA_CONTROL, DELTA_SCHEDULES, ParamSpec

_SPECS: dict[str, ParamSpec] = {p.name: p for p in DELTA_CONTROL}
SCHEDULE_KEYS: dict[str, tuple[str, ...]] = {
    "fixed": (),
    "target-mask": ("mask_target", "delta_gain", "delta_max_step", "delta_min"),
    "ema": ("delta_momentum", "delta_min"),
}
"""The config keys (:data:`~astune.losses.catalogue.DELTA_CONTROL`) each schedule reads."""


class DeltaSchedule:
    """The warm-up of the paper's Settings: ``delta = 1`` (plain softmax) for the first
    ``warmup_ratio`` of training, then ``delta``.

    Args:
        delta: the margin after warm-up, in ``(0, 1]``.
        warmup_ratio: the fraction ``r`` of training kept at ``delta = 1``, in ``[0, 1]``.
        total_steps: the length of training in any monotone unit (optimizer steps, or samples
            seen when the number of steps is not known in advance, as with AS-Speed).
    """

    name = "fixed"

    def __init__(self, delta: float, warmup_ratio: float, total_steps: int):
        self.delta = DELTA.check(delta)
        self.warmup_ratio = check_range("warmup_ratio", warmup_ratio, 0.0, 1.0)
        self.total_steps = check_int("total_steps", total_steps, 1)
        self.warmup_steps = self.warmup_ratio * self.total_steps
        self.current = self.delta
        """The delta after the warm-up as it stands now (an adaptive schedule moves it)."""

    def delta_at(self, step: int) -> float:
        """The delta to use at ``step`` (0-based): 1.0 while
        ``step < warmup_ratio * total_steps``, then :attr:`current`."""
        return 1.0 if step < self.warmup_steps else self.current

    def observe(self, step: int, *, masked_ratio: float, margin: float | None = None) -> None:
        """What one optimizer step saw at ``step``: the share of its active rows fully masked,
        in [0, 1], and their mean margin ``p_t - max p_i``, None when no row was computed. A
        fixed delta learns nothing from it."""

    def state_dict(self) -> dict[str, Any]:
        return {"name": self.name, "current": self.current}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("name", self.name) != self.name:
            raise ValueError(
                f"the checkpoint's delta schedule is {state['name']!r}, but this run asks for "
                f"{self.name!r}; resume with the checkpoint's delta_schedule."
            )
        self.current = check_range("delta", state["current"], 0.0, 1.0, low_open=True)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(delta={self.delta}, warmup_ratio={self.warmup_ratio}, "
            f"total_steps={self.total_steps})"
        )


class TargetMaskDelta(DeltaSchedule):
    """delta moved so that the masked ratio follows a curve rising linearly from 0 after the
    warm-up to ``mask_target`` at the end of training (module docstring).

    Args:
        delta, warmup_ratio, total_steps: as :class:`DeltaSchedule` (``delta`` is the start).
        mask_target: the masked ratio aimed at by the end of training, in ``(0, 1]``.
        gain: delta moved per unit of masked-ratio error, > 0.
        max_step: the most delta moves in one update, in ``(0, 1]``.
        delta_min: the lowest delta, in ``(0, delta]``.
    """

    name = "target-mask"

    def __init__(
        self,
        delta: float,
        warmup_ratio: float,
        total_steps: int,
        *,
        mask_target: float,
        gain: float,
        max_step: float,
        delta_min: float,
    ):
        super().__init__(delta, warmup_ratio, total_steps)
        self.mask_target = _SPECS["mask_target"].check(mask_target)
        self.gain = _SPECS["delta_gain"].check(gain)
        self.max_step = _SPECS["delta_max_step"].check(max_step)
        self.delta_min = _check_min(delta_min, self.delta)

    def target(self, step: int) -> float:
        """The masked ratio aimed at, at ``step``: 0 until the warm-up ends, then rising
        linearly to ``mask_target`` at ``total_steps``."""
        span = max(1.0, self.total_steps - self.warmup_steps)
        progress = min(1.0, max(0.0, (step - self.warmup_steps) / span))
        return self.mask_target * progress

    def observe(self, step: int, *, masked_ratio: float, margin: float | None = None) -> None:
        if step < self.warmup_steps:
            return
        error = masked_ratio - self.target(step)  # > 0: masking too much, so delta rises
        move = min(self.max_step, max(-self.max_step, self.gain * error))
        self.current = min(1.0, max(self.delta_min, self.current + move))


class EmaDelta(DeltaSchedule):
    """delta following an exponential moving average of the batches' mean margin (module
    docstring): ``ema <- momentum * ema + (1 - momentum) * margin`` after the warm-up, starting
    from ``delta``; delta is ``ema`` kept within ``[delta_min, 1]``.

    Args:
        delta, warmup_ratio, total_steps: as :class:`DeltaSchedule` (``delta`` is the start).
        momentum: the weight of the past, in ``[0, 1)``.
        delta_min: the lowest delta, in ``(0, delta]``.
    """

    name = "ema"

    def __init__(
        self,
        delta: float,
        warmup_ratio: float,
        total_steps: int,
        *,
        momentum: float,
        delta_min: float,
    ):
        super().__init__(delta, warmup_ratio, total_steps)
        self.momentum = _SPECS["delta_momentum"].check(momentum)
        self.delta_min = _check_min(delta_min, self.delta)
        self.ema = self.delta

    def observe(self, step: int, *, masked_ratio: float, margin: float | None = None) -> None:
        if step < self.warmup_steps or margin is None:
            return
        self.ema = self.momentum * self.ema + (1.0 - self.momentum) * margin
        self.current = min(1.0, max(self.delta_min, self.ema))

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "ema": self.ema}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.ema = float(state["ema"])


def _check_min(delta_min: float, delta: float) -> float:
    delta_min = _SPECS["delta_min"].check(delta_min)
    if delta_min > delta:
        raise ValueError(f"delta_min must be at most delta ({delta}), but got {delta_min}.")
    return delta_min


def build_delta_schedule(
    name: str,
    *,
    delta: float,
    warmup_ratio: float,
    total_steps: int,
    mask_target: float = _SPECS["mask_target"].default,
    delta_gain: float = _SPECS["delta_gain"].default,
    delta_max_step: float = _SPECS["delta_max_step"].default,
    delta_min: float = _SPECS["delta_min"].default,
    delta_momentum: float = _SPECS["delta_momentum"].default,
) -> DeltaSchedule:
    """The schedule ``name`` (one of :data:`~astune.losses.catalogue.DELTA_SCHEDULES`) with the
    config's keys of the same names; ValueError naming a bad name or value."""
    check_choice("delta_schedule", name, DELTA_SCHEDULES)
    if name == "target-mask":
        return TargetMaskDelta(
            delta,
            warmup_ratio,
            total_steps,
            mask_target=mask_target,
            gain=delta_gain,
            max_step=delta_max_step,
            delta_min=delta_min,
        )
    if name == "ema":
        return EmaDelta(
            delta, warmup_ratio, total_steps, momentum=delta_momentum, delta_min=delta_min
        )
    return DeltaSchedule(delta, warmup_ratio, total_steps)


__all__ = [
    "DELTA_SCHEDULES",
    "SCHEDULE_KEYS",
    "DeltaSchedule",
    "EmaDelta",
    "TargetMaskDelta",
    "build_delta_schedule",
]
