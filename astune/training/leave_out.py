"""Batch sources that leave samples out of an epoch: AS-Skip (:class:`SkipBatches`) and
InfoBatch (:class:`InfoBatches`), and :func:`batch_source`, which picks the run's source.

Both plan each epoch over its seeded order, fill the micro-batches from the samples the plan
keeps (:func:`astune.speed.skip.planned_visits`), and give each computed sample its loss weight in
``Visit.weight`` (soft pruning's ``1 / (1 - p)``; None: 1).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from astune._device import to_device
from astune.config import TrainConfig
from astune.speed.prune import SoftPrune
from astune.speed.skip import ASSkip, Visit, planned_visits
from astune.training.batches import Batch, Probe, ShuffledBatches, epoch_order
from astune.training.compute import Computed
from astune.training.progress import Position, Window

if TYPE_CHECKING:
    from astune.data.media_encoding import TrainData


class _PlannedBatches(ShuffledBatches):
    """What both sources share: the run's config (its AS-Skip and InfoBatch fields) and size,
    the plan's micro-batches, regrouped by length among the kept positions when
    ``length_window`` asks, with their weights; ``skipped_ratio``."""

    def __init__(
        self,
        data: TrainData,
        *,
        batch_size: int,
        seed: int,
        config: TrainConfig,
        total_samples: int,
        device: torch.device,
        length_window: int = 0,
    ):
        super().__init__(data, batch_size=batch_size, seed=seed, length_window=length_window)
        self.config, self.total_samples, self.device = config, total_samples, device

    def soft_prune(self, *, prune: float, anneal: float) -> SoftPrune:
        """A :class:`SoftPrune` over the training set, seeded and sized as the run."""
        return SoftPrune(
            self.n,
            prune=prune,
            anneal=anneal,
            total_samples=self.total_samples,
            seed=self.seed,
            device=self.device,
        )

    def planned_epoch(
        self, pos: Position, order: Tensor, plan: Tensor, weight: Tensor | None
    ) -> Iterator[tuple[Batch | None, Visit]]:
        """The micro-batches of ``plan`` (bool ``(n,)`` over ``order``'s positions) from
        ``pos.batch`` on, each visit with its samples' loss ``weight`` (by dataset index)."""
        if self.lengths is not None:  # the kept samples regrouped among the kept positions
            kept_at = torch.nonzero(plan).flatten()
            order = order.clone()
            order[kept_at] = self.grouped(order[kept_at], pos.epoch)
        for visit in planned_visits(order, plan, batch_size=self.batch_size, first=pos.batch):
            pos.batch += 1
            batch = self.data.collate("train", visit.index) if len(visit.index) else None
            if weight is not None and batch is not None:
                visit.weight = weight[to_device(visit.index, weight.device)]
            yield batch, visit

    def record(self, since_eval: Window) -> dict[str, float]:
        """``skipped_ratio``: the share of the samples visited since the last evaluation that
        were left out."""
        return {"skipped_ratio": 1.0 - since_eval.computed / max(1, since_eval.samples)}


class SkipBatches(_PlannedBatches):
    """AS-Skip: the epoch's order, planned by :class:`ASSkip` (an epoch that keeps none yields
    one empty visit, batch None); ``settings`` as :class:`_PlannedBatches` takes them.
    ``probe`` re-checks the samples due for it, ``batch_size`` at a time, when an epoch is
    planned (None: they are trained on directly). With
    ``config.skip_policy == "soft"``, the samples AS-Skip keeps are pruned further by their loss
    (:class:`SoftPrune`, chance ``config.skip_prune``, annealed as AS-Skip is)."""

    reads_rows = True

    def __init__(self, data: TrainData, *, probe: Probe | None = None, **settings: Any):
        super().__init__(data, **settings)
        config = self.config
        self.skip = ASSkip(
            self.n,
            keep=config.skip_keep,
            anneal=config.skip_anneal,
            total_samples=self.total_samples,
            seed=self.seed,
            backoff=config.skip_backoff,
            device=self.device,
        )
        self.soft = None
        if config.skip_policy == "soft":
            self.soft = self.soft_prune(prune=config.skip_prune, anneal=config.skip_anneal)
        self.probe = probe

    def epoch(self, pos: Position) -> Iterator[tuple[Batch | None, Visit]]:
        order = epoch_order(self.n, self.seed, pos.epoch)
        start = pos.epoch * self.n
        probe = self.probe
        recheck = None if probe is None else (lambda index: self.recheck(probe, index, pos, start))
        planned = self.skip.plan_epoch == pos.epoch
        plan = self.skip.plan_for(pos.epoch, order, start, recheck=recheck)
        if not planned:
            pos.rechecks_active += self.skip.rechecks_active
        weight = None
        if self.soft is not None:  # prunes among the samples with a gradient
            plan = plan & self.soft.plan_for(pos.epoch, order, start, eligible=plan)
            weight = self.soft.weight
        yield from self.planned_epoch(pos, order, plan, weight)

    def recheck(self, probe: Probe, index: Tensor, pos: Position, samples_seen: int) -> None:
        """Probe ``index`` ``(D,)`` in micro-batches and record what each found; count them."""
        if len(index) == 0:
            return
        for chunk in index.split(self.batch_size):
            self.record_computed(chunk, probe(chunk), samples_seen)
        pos.rechecked += len(index)

    def after_forward(self, visit: Visit, computed: Computed, samples_seen: int) -> None:
        """Record which computed samples had zero loss, and their losses (no device sync)."""
        if computed.stats is not None:
            self.record_computed(visit.index, computed, samples_seen)

    def record_computed(self, index: Tensor, computed: Computed, samples_seen: int) -> None:
        stats = computed.stats
        self.skip.record(
            index, *stats.rows(), samples_seen=samples_seen, headroom=stats.headroom_rows()
        )
        if self.soft is not None:
            self.soft.record(index, computed.sample_losses)

    def skipped_rows(self, visit: Visit) -> Tensor:
        return self.skip.skipped_rows(visit.skipped)

    def counts(self, pos: Position) -> dict[str, int]:
        """``samples_rechecked``: zero-loss samples re-checked by a forward pass without
        gradient; ``rechecks_active``: of those, the ones found active (then trained on)."""
        return {"samples_rechecked": pos.rechecked, "rechecks_active": pos.rechecks_active}

    def state_dict(self) -> dict[str, Any]:
        state = self.skip.state_dict()
        return state if self.soft is None else {**state, "soft": self.soft.state_dict()}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        if state is None:
            return
        self.skip.load_state_dict(state)
        if self.soft is not None:
            if "soft" not in state:
                raise ValueError(
                    "the checkpoint's AS-Skip ran skip_policy 'zero', but this run asks for "
                    "'soft'; resume with the checkpoint's skip_policy."
                )
            self.soft.load_state_dict(state["soft"])


class InfoBatches(_PlannedBatches):
    """InfoBatch on any loss: each epoch, samples whose last loss was below the mean are left
    out with chance ``config.infobatch_prune`` and the kept ones among them weighted up
    (:class:`SoftPrune`); the last ``config.infobatch_anneal`` of training uses every sample.
    ``settings`` as :class:`_PlannedBatches` takes them."""

    def __init__(self, data: TrainData, **settings: Any):
        super().__init__(data, **settings)
        config = self.config
        self.prune = self.soft_prune(prune=config.infobatch_prune, anneal=config.infobatch_anneal)

    def epoch(self, pos: Position) -> Iterator[tuple[Batch | None, Visit]]:
        order = epoch_order(self.n, self.seed, pos.epoch)
        plan = self.prune.plan_for(pos.epoch, order, pos.epoch * self.n)
        yield from self.planned_epoch(pos, order, plan, self.prune.weight)

    def after_forward(self, visit: Visit, computed: Computed, samples_seen: int) -> None:
        """The computed samples' losses become their scores."""
        self.prune.record(visit.index, computed.sample_losses)

    def state_dict(self) -> dict[str, Any]:
        return self.prune.state_dict()

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        if state is not None:
            self.prune.load_state_dict(state)


def batch_source(
    data: TrainData,
    *,
    batch_size: int,
    seed: int,
    config: TrainConfig,
    total_samples: int,
    device: torch.device,
    probe: Probe | None = None,
    length_window: int = 0,
) -> ShuffledBatches:
    """AS-Skip's source when ``config.as_skip``, InfoBatch's when ``config.infobatch``, else the
    plain shuffled one. ``probe``: AS-Skip's re-check, used when ``config.skip_probe``;
    ``length_window``: micro-batches grouped by length (0: none)."""
    common = dict(data=data, batch_size=batch_size, seed=seed, length_window=length_window)
    if config.as_skip:
        return SkipBatches(
            **common,
            config=config,
            total_samples=total_samples,
            device=device,
            probe=probe if config.skip_probe else None,
        )
    if config.infobatch:
        return InfoBatches(**common, config=config, total_samples=total_samples, device=device)
    return ShuffledBatches(**common)
