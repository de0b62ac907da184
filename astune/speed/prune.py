"""Soft pruning by loss, as InfoBatch does it (Qin et al., ICLR 2024), built from its paper.

Each sample keeps a score, its loss when last computed (NaN: never computed, or unknown).
Each epoch, the samples whose score is below the mean of the known scores are "well learned":
each is left out with a seeded chance ``prune``, and those kept have their loss scaled by
``1 / (1 - prune)``, so that over the draws an epoch's summed gradient is, in expectation, the
unpruned one. Samples with a score at or above the mean, or none, are always kept at weight 1,
and the last ``anneal`` share of training (in samples seen) prunes nothing.

Two users: :class:`~astune.training.batches.InfoBatches`, InfoBatch on any loss (every sample
eligible), and AS-Skip's ``soft`` policy, which first leaves out the samples of exactly zero
AS-Softmax loss and prunes among the rest (``eligible``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from astune._checks import check_int, check_range
from astune._device import sync_place, to_device

PRUNE_SEED_STRIDE = 104_729
"""Mixes the epoch into the seed of the pruning draws (a prime other than AS-Skip's re-check
stride, so the two draws of an epoch are not the same numbers)."""


class SoftPrune:
    """Per-sample loss scores and the seeded plan of which low-loss samples an epoch leaves out.

    Args:
        n_samples: training examples (dataset indices ``0 .. n_samples - 1``).
        prune: the chance that a sample below the mean score is left out of an epoch, in
            [0, 1); InfoBatch's ``r`` (0.5 in its paper).
        anneal: the last share of training (in samples seen) that prunes nothing, in [0, 1];
            InfoBatch's ``1 - delta`` (0.125 in its paper).
        total_samples: the samples the whole run visits (epochs x n_samples).
        seed: the seed of the pruning draws.
        device: where the scores and weights live (the model's device: recording a micro-batch
            never synchronises a GPU).
    """

    DEVICE_STATE = ("score", "weight")
    """The per-sample tensors kept on the run's device (the plan stays on the host)."""

    def __init__(
        self,
        n_samples: int,
        *,
        prune: float,
        anneal: float,
        total_samples: int,
        seed: int,
        device: torch.device | str = "cpu",
    ):
        self.n = check_int("n_samples", n_samples, 1)
        self.prune = check_range("prune", prune, 0.0, 1.0, high_open=True)
        self.anneal = check_range("anneal", anneal, 0.0, 1.0)
        self.total = check_int("total_samples", total_samples, 1)
        self.seed = check_int("seed", seed, 0)
        self.device = torch.device(device)
        self.score = torch.full((self.n,), math.nan, device=self.device)
        """Each sample's loss when last computed, float32 ``(n,)`` (NaN: unknown)."""
        self.weight = torch.ones(self.n, device=self.device)
        """The planned epoch's loss weight of each sample, by dataset index ``(n,)``."""
        self.keep: Tensor | None = None  # bool (n,), in the epoch's order
        self.plan_epoch = -1

    def anneal_start(self) -> int:
        """Samples seen from which nothing is pruned."""
        return math.floor((1.0 - self.anneal) * self.total)

    def plan_for(
        self, epoch: int, order: Tensor, start: int, *, eligible: Tensor | None = None
    ) -> Tensor:
        """Which positions of ``order`` (a permutation, ``(n,)``) the epoch keeps, bool.

        ``start``: samples seen when the epoch began; ``eligible``: bool ``(n,)`` in the order,
        the samples that may be pruned (None: all); the mean is taken over their known scores.
        Sets :attr:`weight`. Planned once per epoch and stored, so that a resumed run continues
        the same plan.
        """
        if self.plan_epoch == epoch and self.keep is not None:
            return self.keep
        eligible = torch.ones(self.n, dtype=torch.bool) if eligible is None else eligible
        with sync_place("epoch"):  # one sync per epoch
            score = self.score.cpu()[order]
        known = eligible & ~score.isnan()
        low = torch.zeros(self.n, dtype=torch.bool)
        if bool(known.any()):
            low = known & (score < score[known].mean())
        low &= torch.arange(start, start + self.n) < self.anneal_start()
        gen = torch.Generator().manual_seed(self.seed * PRUNE_SEED_STRIDE + epoch)
        pruned = low & (torch.rand(self.n, generator=gen) < self.prune)
        weight = torch.ones(self.n)
        weight[order[low & ~pruned]] = 1.0 / (1.0 - self.prune)
        self.weight = to_device(weight, self.device)
        self.keep, self.plan_epoch = ~pruned, epoch
        return self.keep

    def record(self, index: Tensor, losses: Tensor) -> None:
        """The losses ``(B,)`` of samples ``index`` ``(B,)`` computed just now (their scores)."""
        self.score[to_device(index, self.device)] = losses.detach().float()

    def state_dict(self) -> dict[str, Any]:
        return {
            "prune": self.prune,
            "anneal": self.anneal,
            "total": self.total,
            "seed": self.seed,
            "score": self.score.cpu(),
            "weight": self.weight.cpu(),
            "keep": None if self.keep is None else self.keep.clone(),
            "plan_epoch": self.plan_epoch,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if len(state["score"]) != self.n:
            raise ValueError(
                f"pruning state holds {len(state['score'])} samples, but the run has {self.n}; "
                "resume with the same training data."
            )
        self.prune = check_range("prune", state["prune"], 0.0, 1.0, high_open=True)
        self.anneal = check_range("anneal", state["anneal"], 0.0, 1.0)
        self.total = check_int("total_samples", state["total"], 1)
        self.seed = check_int("seed", state["seed"], 0)
        self.score = state["score"].to(self.device, dtype=torch.float32)
        self.weight = state["weight"].to(self.device, dtype=torch.float32)
        self.keep = None if state["keep"] is None else state["keep"].to(dtype=torch.bool)
        self.plan_epoch = int(state["plan_epoch"])

    def __repr__(self) -> str:
        return f"SoftPrune(n={self.n}, prune={self.prune}, anneal={self.anneal}, seed={self.seed})"
