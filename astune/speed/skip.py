"""AS-Skip: leave out of the forward/backward pass the samples that have no gradient.

A sample whose AS-Softmax loss was exactly zero when last computed (every active row fully
masked) contributed an exactly zero gradient. AS-Skip plans each epoch over the epoch's sample
order: such samples are skipped, except those due for a re-check (the model moves, so a masked
sample can become active again): each with a seeded random chance each epoch, and all of them in
the last ``anneal`` fraction of training. The chance is ``keep / w``: the back-off ``w`` doubles
each time the sample is found zero again and grows with its headroom (how far past the masking
threshold it was), capped at ``backoff`` (1: every zero sample has the chance ``keep``). A
re-check is a forward pass without gradient (``plan_for(..., recheck=...)``): only the samples it
finds active are trained on; without one, the due samples are trained on directly (AS-Skip v1).
The micro-batches are filled from the kept samples, so they stay full; the skipped ones still
count as visited, so the learning-rate schedule, the delta warm-up and the epochs advance over
them.

The per-sample state lives on the run's device as tensors and the indices go there through
pinned memory, so recording a micro-batch never synchronises a GPU; only planning an epoch reads
the state on the host (an ``epoch`` sync place). It is saved in checkpoints (``state_dict``),
which makes a resume exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from astune._checks import check_int, check_range
from astune._device import sync_place, to_device

PLAN_SEED_STRIDE = 7_919
"""Mixes the epoch into the seed of the re-check draws (a prime, so epochs do not collide)."""


@dataclass
class Visit:
    """One micro-batch of a skipping epoch.

    ``index``: the dataset indices computed, ``(B,)``; ``visited``: order positions the batch
    covers (computed plus skipped, the schedule's progress in samples); ``skipped``: the dataset
    indices skipped in that span, ``(S,)``; ``weight``: each computed sample's loss weight
    ``(B,)`` on the run's device (None: all 1; soft pruning's rescaling, astune/prune.py).
    """

    index: Tensor
    visited: int
    skipped: Tensor
    weight: Tensor | None = None


class ASSkip:
    """Per-sample skip state and the seeded policy of which samples an epoch computes.

    Args:
        n_samples: training examples (dataset indices ``0 .. n_samples - 1``).
        keep: the chance of a zero-loss sample found zero once to be re-checked in an epoch, in
            [0, 1].
        anneal: the last fraction of training (in samples seen) that uses every sample, in [0, 1].
        total_samples: the samples the whole run visits (epochs x n_samples).
        seed: the seed of the re-check draws.
        backoff: the cap of the back-off ``w = 2^(k - 1) (1 + h)`` that divides ``keep`` for a
            sample found zero ``k`` times in a row, ``h`` its headroom (in deltas) when last
            found zero; >= 1, and 1 turns the back-off off.
        device: where the state lives (the model's device).
    """

    DEVICE_STATE = ("zero", "last_computed", "rows", "streak", "headroom")
    """The per-sample tensors kept on the run's device (the plan stays on the host)."""

    def __init__(
        self,
        n_samples: int,
        *,
        keep: float,
        anneal: float,
        total_samples: int,
        seed: int,
        backoff: float = 1.0,
        device: torch.device | str = "cpu",
    ):
        self.n = check_int("n_samples", n_samples, 1)
        self.keep = check_range("skip_keep", keep, 0.0, 1.0)
        self.anneal = check_range("skip_anneal", anneal, 0.0, 1.0)
        self.total = check_int("total_samples", total_samples, 1)
        self.seed = check_int("seed", seed, 0)
        self.backoff = check_range("skip_backoff", backoff, 1.0)
        self.device = torch.device(device)
        self.zero = torch.zeros(self.n, dtype=torch.bool, device=self.device)
        """Whether the sample's loss was exactly zero when last computed."""
        self.last_computed = torch.full((self.n,), -1, dtype=torch.long, device=self.device)
        """Samples seen when the sample's loss was last computed (trained or re-checked); -1:
        never."""
        self.rows = torch.zeros(self.n, dtype=torch.long, device=self.device)
        """Active rows (tokens at token level) of the sample when last computed."""
        self.streak = torch.zeros(self.n, dtype=torch.long, device=self.device)
        """Times in a row the sample was found zero when computed (0: active when last computed)."""
        self.headroom = torch.zeros(self.n, dtype=torch.float32, device=self.device)
        """How far past the masking threshold the sample was when last found zero, in deltas
        (its least masked active row); 0 when unknown or active."""
        self.plan: Tensor | None = None  # bool (n,), in the epoch's order: computed or skipped
        self.plan_epoch = -1
        self.rechecks_active = 0
        """Of the samples the last plan re-checked, the ones found active (then trained on)."""

    # -- the policy ---------------------------------------------------------------------------
    def anneal_start(self) -> int:
        """Samples seen from which every sample is used."""
        return math.floor((1.0 - self.anneal) * self.total)

    def recheck_chance(self) -> Tensor:
        """Each sample's chance of a re-check in an epoch, ``keep / w`` ``(n,)`` (meaningful for
        zero samples): ``w = min(backoff, 2^(streak - 1) (1 + headroom))``, at least 1."""
        doubling = torch.pow(2.0, (self.streak - 1).clamp(min=0).float())
        backoff = (doubling * (1.0 + self.headroom)).clamp(1.0, self.backoff)
        return self.keep / backoff

    def plan_for(
        self,
        epoch: int,
        order: Tensor,
        start: int,
        *,
        recheck: Callable[[Tensor], None] | None = None,
    ) -> Tensor:
        """Which positions of ``order`` (a permutation, ``(n,)``) the epoch computes, bool.

        ``start``: samples seen when the epoch began. Due for a re-check: the samples known to
        have zero loss drawn with their :meth:`recheck_chance` (a generator seeded by seed and
        epoch), and all of them at or past :meth:`anneal_start`. ``recheck(index)`` gets the due
        samples' dataset indices ``(D,)``, in order, and records their losses (:meth:`record`):
        the plan keeps the samples not known to be zero after it. Without ``recheck``, every due
        sample is kept. Planned once per epoch and stored, so a run resumed mid-epoch continues
        the same plan.
        """
        if self.plan_epoch == epoch and self.plan is not None:
            return self.plan
        gen = torch.Generator().manual_seed(self.seed * PLAN_SEED_STRIDE + epoch)
        with sync_place("epoch"):  # two reads per epoch (a third after a re-check)
            chance, zero = self.recheck_chance().cpu()[order], self.zero.cpu()[order]
        drawn = torch.rand(self.n, generator=gen) < chance
        late = torch.arange(start, start + self.n) >= self.anneal_start()
        due = zero & (drawn | late)
        self.rechecks_active = 0
        if recheck is None:
            plan = ~zero | due
        else:
            recheck(order[due])
            with sync_place("epoch"):
                plan = ~self.zero.cpu()[order]
            self.rechecks_active = int((due & plan).sum())
        self.plan, self.plan_epoch = plan, epoch
        return plan

    # -- recording ------------------------------------------------------------------------------
    def record(
        self,
        index: Tensor,
        active: Tensor,
        masked: Tensor,
        *,
        samples_seen: int,
        headroom: Tensor | None = None,
    ) -> None:
        """Fold in one computed micro-batch, without a device sync.

        ``index``: dataset indices ``(B,)``; ``active``/``masked``: bool rows of the loss
        (``(B,)`` or ``(B * T,)`` at token level); ``headroom``: float rows of the same shape
        (:meth:`MaskStats.headroom_rows`; None: unknown, 0). A sample is zero when every active
        row of it is masked (a sentence with no active token has zero loss too); its headroom is
        its least one over the active rows.
        """
        index = to_device(index, self.device)
        active = active.reshape(len(index), -1)
        masked = masked.reshape(len(index), -1)
        zero = (masked | ~active).all(dim=1)
        self.zero[index] = zero
        self.rows[index] = active.sum(dim=1)
        self.last_computed[index] = samples_seen
        self.streak[index] = torch.where(zero, self.streak[index] + 1, 0)
        if headroom is None:
            self.headroom[index] = 0.0
            return
        rows = headroom.reshape(len(index), -1).float().masked_fill(~active, float("inf"))
        least = rows.amin(dim=1)  # inf: no active row
        self.headroom[index] = torch.where(zero & least.isfinite(), least, 0.0)

    def skipped_rows(self, skipped: Tensor) -> Tensor:
        """Active rows of the zero-loss ones of ``skipped`` samples when last computed, a 0-dim
        device tensor (the soft policy also skips samples that have a gradient)."""
        skipped = to_device(skipped, self.device)
        return (self.rows[skipped] * self.zero[skipped]).sum()

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "keep": self.keep,
            "anneal": self.anneal,
            "total": self.total,
            "seed": self.seed,
            "backoff": self.backoff,
            "zero": self.zero.cpu(),
            "streak": self.streak.cpu(),
            "headroom": self.headroom.cpu(),
            "last_computed": self.last_computed.cpu(),
            "rows": self.rows.cpu(),
            "plan": None if self.plan is None else self.plan.cpu(),
            "plan_epoch": self.plan_epoch,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if len(state["zero"]) != self.n:
            raise ValueError(
                f"AS-Skip state holds {len(state['zero'])} samples, but the run has {self.n}; "
                "resume with the same training data."
            )
        self.keep = check_range("skip_keep", state["keep"], 0.0, 1.0)
        self.anneal = check_range("skip_anneal", state["anneal"], 0.0, 1.0)
        self.total = check_int("total_samples", state["total"], 1)
        self.seed = check_int("seed", state["seed"], 0)
        self.backoff = check_range("skip_backoff", state.get("backoff", 1.0), 1.0)
        self.zero = state["zero"].to(self.device, dtype=torch.bool)
        # Checkpoints written before the back-off hold no streaks: every zero sample found once.
        self.streak = state.get("streak", self.zero.long()).to(self.device, dtype=torch.long)
        headroom = state.get("headroom", torch.zeros(self.n))
        self.headroom = headroom.to(self.device, dtype=torch.float32)
        self.last_computed = state["last_computed"].to(self.device, dtype=torch.long)
        self.rows = state["rows"].to(self.device, dtype=torch.long)
        self.plan = None if state["plan"] is None else state["plan"].to(dtype=torch.bool)
        self.plan_epoch = int(state["plan_epoch"])

    def __repr__(self) -> str:
        return (
            f"ASSkip(n={self.n}, keep={self.keep}, anneal={self.anneal}, seed={self.seed}, "
            f"backoff={self.backoff})"
        )


def planned_visits(
    order: Tensor, plan: Tensor, *, batch_size: int, first: int = 0
) -> Iterator[Visit]:
    """An epoch's micro-batches from micro-batch ``first`` on: ``batch_size`` planned samples
    each (the last may be short), ``plan`` bool ``(n,)`` over the positions of ``order``. Each
    covers the order positions since the previous one; the last also covers the skipped
    positions after it. An epoch that computes nothing yields one empty visit covering every
    position."""
    kept_at = torch.nonzero(plan).flatten()
    if len(kept_at) == 0:
        if first == 0:
            yield Visit(order[:0], len(order), order)
        return
    n_batches = math.ceil(len(kept_at) / batch_size)
    for b in range(first, n_batches):
        at = kept_at[b * batch_size : (b + 1) * batch_size]
        lo = 0 if b == 0 else int(kept_at[b * batch_size - 1]) + 1
        hi = len(order) if b == n_batches - 1 else int(at[-1]) + 1
        span = torch.arange(lo, hi)
        skipped = order[span[~plan[lo:hi]]]
        yield Visit(order[at], hi - lo, skipped)
