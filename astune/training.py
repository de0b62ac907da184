"""One training run: a plain PyTorch loop with AS-Softmax, its delta warm-up and AS-Speed.

Not the Hugging Face Trainer: AS-Speed changes the number of accumulated micro-batches from one
optimizer step to the next, so the learning-rate schedule and the delta warm-up are driven by
samples seen rather than by a step count fixed up front. No Ray imports: the search layer gets
each evaluation through ``callback(record, checkpoint_dir)``, the folder None when the
checkpoint policy (``checkpoint_every``) writes none at that evaluation.
"""

from __future__ import annotations

import json
import math
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from astune import checkpointing as ckpt
from astune.checkpoint_policy import CheckpointPolicy
from astune.config import TrainConfig
from astune.losses.as_softmax import DeltaSchedule, MaskStats
from astune.losses.catalogue import AS_LOSSES, MEDIA_TASKS
from astune.skip import ASSkip, Visit
from astune.speed import ASSpeed

if TYPE_CHECKING:
    from astune.data.media_encoding import TrainData

Callback = Callable[[dict[str, Any], "Path | None"], None]
FUSED_CPU_ADAMW_TORCH = (2, 4)
"""The first torch with ``AdamW(fused=True)`` on the CPU; ``pyproject.toml``'s lower bound."""
COMPUTED_METRICS = ("accuracy", "matthews", "f1", "micro_f1", "macro_f1")


@dataclass
class Position:
    """Where training is, in units that survive a change of accumulation steps."""

    epoch: int = 0
    batch: int = 0  # the next micro-batch of ``epoch``
    samples: int = 0  # training examples seen (visited: AS-Skip's skipped ones count)
    computed: int = 0  # training examples that went through the model
    steps: int = 0  # optimizer steps taken
    evaluations: int = 0


def check_metric_computed(dataset: str, metric: str) -> None:
    """ValueError (one line) when ``dataset`` is scored with a metric astune does not compute."""
    if metric not in COMPUTED_METRICS:
        raise ValueError(
            f"dataset {dataset!r} is scored with {metric!r}, which astune does not compute yet; "
            f"computed metrics: {', '.join(COMPUTED_METRICS)}."
        )


class LinearSchedule:
    """Linear warm-up then linear decay of the learning rate, driven by samples seen.

    ``factor(samples)`` rises from ``1 / (warmup + 1)`` to 1 over the first ``warmup`` samples and
    falls to 0 at ``total`` samples (the number of optimizer steps is not known in advance under
    AS-Speed). A step uses the factor of the samples seen when its window started: the first step
    gets the full (or warm-up start) rate, the last one a positive rate.
    """

    def __init__(self, total: int, warmup_ratio: float):
        self.total = max(1, total)
        self.warmup = warmup_ratio * self.total

    def factor(self, samples: int) -> float:
        if samples < self.warmup:
            return (samples + 1) / (self.warmup + 1)
        return max(0.0, (self.total - samples) / max(1.0, self.total - self.warmup))

    def state_dict(self) -> dict[str, float]:
        return {"total": self.total, "warmup": self.warmup}


def fit(
    config: TrainConfig,
    *,
    data: TrainData | None = None,
    callback: Callback | None = None,
    resume_from: str | Path | None = None,
    progress: bool = False,
    best_weights: ckpt.BestWeights | None = None,
) -> dict[str, Any]:
    """Train, evaluate after every epoch (or every ``eval_every`` optimizer steps), keep the best
    checkpoint on the validation metric and score it once on the test split.

    Args:
        config: the run; unset ``epochs``/``batch_size``/``lr`` take the paper's values.
        data: ``EncodedData`` or ``MediaData`` made once by the caller (a search driver); loaded and
            tokenized here when None.
        callback: called after each evaluation with the record (the metric names of DESIGN.md)
            and the checkpoint folder just written (None: the policy wrote none).
        resume_from: a checkpoint folder to continue from exactly.
        progress: show a progress bar on stderr.
        best_weights: where best weights that are not the current ones go when a checkpoint
            is written (default: the run's checkpoint folder).

    Returns:
        The final record (``final.json``): ``val_<metric>`` of the best evaluation,
        ``test_<metric>`` of that checkpoint, ``optimizer_steps`` and ``train_seconds`` (training
        time, evaluations and checkpoint writes excluded).
    """
    run = Run(config, data, best_weights)
    if resume_from is not None:
        run.restore(Path(resume_from))
    return run.train(callback, progress)


class Run:
    """The state of one training run and the steps that move it forward."""

    def __init__(
        self,
        config: TrainConfig,
        data: TrainData | None = None,
        best_weights: ckpt.BestWeights | None = None,
    ):
        from astune.backbones import build_model
        from astune.losses.registry import build_loss

        self.config = config.validate()
        self.data = data if data is not None else load_encoded(config)
        self.spec = self.data.spec
        check_metric_computed(self.spec.name, self.spec.metric)
        self._fill_paper_defaults()
        self.device = _device(config.device)
        self.autocast = _autocast_dtype(config.precision, self.device)
        torch.manual_seed(config.seed)  # the head's initialisation
        self.model = build_model(
            config.backbone,
            task=self.spec.task,
            num_labels=self.spec.num_labels,
            num_layers=config.num_layers,
            dropout=config.dropout,
        ).to(self.device)
        self.loss_fn = build_loss(config.loss, reduction="sum", **config.loss_kwargs())
        self.optimizer = _adamw(self.model, config)
        self.n_train = len(self.data.splits["train"])
        self.total_samples = max(1, round(self.config.epochs * self.n_train))
        self.lr_schedule = LinearSchedule(self.total_samples, config.lr_warmup_ratio)
        self.delta_schedule = (
            DeltaSchedule(config.delta, config.warmup_ratio, self.total_samples)
            if config.loss in AS_LOSSES
            else None
        )
        self.speed = ASSpeed(config.lam, config.max_accum_steps) if config.as_speed else None
        self.skip = (
            ASSkip(
                self.n_train,
                config.skip_keep,
                config.skip_anneal,
                self.total_samples,
                config.seed,
                self.device,
            )
            if config.as_skip
            else None
        )
        self.pos = Position()
        self.best: float | None = None
        self.best_margins: dict[str, list] | None = None
        self.history: list[dict[str, Any]] = []
        self.out = Path(config.output_dir or "astune-runs/train").resolve()
        self.ckpt_dir = self.out / "checkpoint"
        self.checkpoint_policy = CheckpointPolicy(config.checkpoint_every)
        self.best_store = best_weights or ckpt.BestWeights.local(self.ckpt_dir)
        self.best_weights: dict[str, Tensor] | None = None  # a CPU copy, for the test split
        self.best_evaluation: int | None = None
        self._best_stored: tuple[int, str] | None = None  # (evaluation, name) in best_store
        # what the last checkpoints name as their best weights (those files must stay)
        self._named_bests: deque[str] = deque(maxlen=ckpt.KEPT_CHECKPOINTS)
        self._last_checkpoint = time.monotonic()
        # what this run wrote for resuming, over all its attempts: checkpoints and their bytes
        self.checkpoint_stats = {"checkpoints": 0, "checkpoint_bytes": 0}
        self.train_seconds = 0.0
        self._window = _Window()
        self._window_start = 0  # samples seen when the current window's first micro-batch began
        self._since_eval = _Window()

    def _fill_paper_defaults(self) -> None:
        for name in ("epochs", "batch_size", "lr"):
            if getattr(self.config, name) is None:
                paper = getattr(self.spec, name, None)
                if paper is None:
                    raise ValueError(
                        f"dataset {self.spec.name!r} has no paper value for {name}; "
                        f"pass --{name.replace('_', '-')}."
                    )
                setattr(self.config, name, paper)

    # -- training ---------------------------------------------------------------------------
    def train(self, callback: Callback | None, progress: bool) -> dict[str, Any]:
        self.out.mkdir(parents=True, exist_ok=True)
        if not self.history:  # a fresh run starts a fresh log; a resumed one rewrote it
            (self.out / "metrics.jsonl").write_text("")
        bar = _progress(self, progress)
        self._clock = time.perf_counter() - self.train_seconds  # counts training, not evaluation
        while self.pos.samples < self.total_samples:
            for batch, visit in self._epoch_batches():
                self._micro_step(batch, visit)
                if bar is not None:
                    bar.update(visit.visited)
                if self._window.batches >= self._accum_steps():
                    self._optimizer_step()
                    if self._eval_due():
                        self._evaluate(callback)
                if self.pos.samples >= self.total_samples:
                    break
            self._end_epoch()
            if not self._just_evaluated():
                self._evaluate(callback)
        if bar is not None:
            bar.close()
        return self._finish()

    def _epoch_batches(self) -> Iterator[tuple[dict[str, Tensor] | None, Visit]]:
        """The epoch's micro-batches from ``pos.batch`` on, each with its :class:`Visit`; under
        AS-Skip they are filled from the planned samples (an empty visit has batch None)."""
        gen = torch.Generator().manual_seed(self.config.seed * 1_000_003 + self.pos.epoch)
        order = torch.randperm(self.n_train, generator=gen)
        size = self.config.batch_size
        if self.skip is None:
            for b in range(self.pos.batch, math.ceil(self.n_train / size)):
                self.pos.batch = b + 1
                index = order[b * size : (b + 1) * size]
                yield self.data.collate("train", index), Visit(index, len(index), order[:0])
            return
        plan = self.skip.plan_for(self.pos.epoch, order, self.pos.epoch * self.n_train)
        for visit in self.skip.visits(order, plan, size, self.pos.batch):
            self.pos.batch += 1
            batch = self.data.collate("train", visit.index) if len(visit.index) else None
            yield batch, visit

    def _end_epoch(self) -> None:
        if self._window.batches:  # an epoch ends on an optimizer step
            self._optimizer_step()
        self.pos.epoch += 1
        self.pos.batch = 0

    def _micro_step(self, batch: dict[str, Tensor] | None, visit: Visit) -> None:
        """Forward and backward one micro-batch (none for an empty visit); its counts are
        summed on the device, read once per optimizer step."""
        if self._window.batches == 0:
            self._window_start = self.pos.samples
        skipped_rows = None if self.skip is None else self.skip.skipped_rows(visit.skipped)
        if batch is not None:
            self.model.train()
            self.apply_delta()
            loss, counts, stats = self.loss_counts(*self.forward(batch))
            loss.backward()
            if self.skip is not None and stats is not None:
                self.skip.record(visit.index, *stats.rows(), self.pos.samples)
            self._window.add(loss.detach(), counts, skipped_rows)
        elif skipped_rows is not None:
            self._window.add_skipped(skipped_rows)
        self.pos.samples += visit.visited
        self.pos.computed += len(visit.index)
        self._since_eval.samples += visit.visited
        self._since_eval.computed += len(visit.index)

    def forward(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """Logits ``(B, C)`` or ``(B, T, C)`` in float32, and the labels, on the run's device."""
        with torch.autocast(
            self.device.type, dtype=self.autocast, enabled=self.autocast is not None
        ):
            logits = self.model(**_model_inputs(batch, self.device)).logits
        return logits.float(), batch["labels"].to(self.device)

    def loss_of(self, logits: Tensor, labels: Tensor) -> tuple[Tensor, int, int]:
        """The summed loss and the rows it counted, read to the host (one sync):
        ``(loss, n_active, n_masked)``."""
        loss, counts, _ = self.loss_counts(logits, labels)
        n_active, n_masked = counts.tolist()
        return loss, n_active, n_masked

    def loss_counts(
        self, logits: Tensor, labels: Tensor
    ) -> tuple[Tensor, Tensor, MaskStats | None]:
        """The summed loss, ``[n_active, n_masked]`` rows as a device tensor (no sync), and the
        loss's ``MaskStats`` (None for a loss without one)."""
        loss = self.loss_fn(logits, labels)
        stats = getattr(self.loss_fn, "last_stats", None)
        if stats is not None:
            return loss, stats.counts(), stats
        active = torch.tensor(len(labels)) if labels.is_floating_point() else (labels != -100).sum()
        active = active.to(loss.device)
        return loss, torch.stack([active, torch.zeros_like(active)]), None

    def _optimizer_step(self) -> None:
        window = self._window
        window.settle()  # the one device sync of the step
        if not math.isfinite(window.loss):
            raise FloatingPointError(
                f"loss is {window.loss} at epoch {self.pos.epoch}, optimizer step "
                f"{self.pos.steps + 1} (lr {self.config.lr}, loss {self.config.loss}); "
                "the run stops here."
            )
        scale = 1.0 / max(1, self._gradient_rows(window))
        for p in self.model.parameters():
            if p.grad is not None:
                p.grad.mul_(scale)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm)
        lr = self.config.lr * self.lr_schedule.factor(self._window_start)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.pos.steps += 1
        if self.speed is not None:
            # AS-Skip's skipped rows had zero loss when last computed: they count as masked, so
            # AS-Speed still sees the share of the data that has no gradient.
            self.speed.update(window.active + window.skipped, window.masked + window.skipped)
        self._since_eval.merge(window)
        self._window = _Window()

    def _gradient_rows(self, window: _Window) -> int:
        """The rows a step divides the window's summed gradient by: the rows computed. A skipped
        sample would have added exactly 0 to the sum, so the update keeps the scale of a full
        batch of computed rows (benchmarks/RESULTS.md measures the alternative, computed +
        skipped, side by side)."""
        return window.active

    def _accum_steps(self) -> int:
        return 1 if self.speed is None else self.speed.steps

    def delta_now(self) -> float:
        """The delta of the current position (:class:`DeltaSchedule` over samples seen); 1.0 for a
        loss that is not an AS loss."""
        schedule = self.delta_schedule
        return 1.0 if schedule is None else schedule.delta_at(self.pos.samples)

    def apply_delta(self) -> None:
        """Hand the current delta to an AS loss (``set_delta``); other losses take none."""
        if self.delta_schedule is not None:
            self.loss_fn.set_delta(self.delta_now())

    def _eval_due(self) -> bool:
        every = self.config.eval_every
        return every is not None and self.pos.steps % every == 0

    def _just_evaluated(self) -> bool:
        return bool(self.history) and self.history[-1]["samples_seen"] == self.pos.samples

    # -- evaluation and checkpoints ------------------------------------------------------------
    def _evaluate(self, callback: Callback | None) -> None:
        elapsed = time.perf_counter() - self._clock
        metrics, val_loss, margins = evaluate(self, "validation")
        primary = metrics[self.spec.metric]
        record = {f"val_{k}": v for k, v in metrics.items()}
        record.update(self._training_record(primary, val_loss, elapsed))
        self.pos.evaluations += 1
        if self.best is None or primary > self.best:
            self.best, self.best_margins = primary, margins
            self.best_weights, self.best_evaluation = _cpu_state(self.model), record["evaluation"]
        self.history.append(record)
        self.train_seconds = elapsed
        self._since_eval = _Window()
        since = time.monotonic() - self._last_checkpoint
        last = self.pos.samples >= self.total_samples
        due = self.checkpoint_policy.due(seconds_since_last=since, last=last)
        folder = self._write_checkpoint() if due else None
        with open(self.out / "metrics.jsonl", "a") as fh:
            fh.write(json.dumps(record) + "\n")
        if callback is not None:
            callback(record, folder)
        if folder is not None:  # reported (a search has persisted it): older bests can go
            self.best_store.keep_only(set(self._named_bests) - {ckpt.BEST_IS_CURRENT})
        self._clock = time.perf_counter() - self.train_seconds

    def _write_checkpoint(self) -> Path:
        """Write what an exact resume needs; best weights only when they are not the current
        ones and were not stored before (a best is uploaded once, however many checkpoints
        follow it)."""
        state = self.state_dict()
        if self.best_evaluation == self.history[-1]["evaluation"]:  # the evaluation just made
            state["best_weights"], self._best_stored = ckpt.BEST_IS_CURRENT, None
        else:
            if self._best_stored is None or self._best_stored[0] != self.best_evaluation:
                name = self.best_store.put(self.best_weights, self.best_evaluation)
                self._best_stored = (self.best_evaluation, name)
                self.checkpoint_stats["checkpoint_bytes"] += self.best_store.last_bytes
            state["best_weights"] = self._best_stored[1]
        self._named_bests.append(state["best_weights"])
        self.checkpoint_stats["checkpoints"] += 1
        state["checkpoint_stats"] = dict(self.checkpoint_stats)  # counted with this checkpoint
        folder = ckpt.write_checkpoint(self.ckpt_dir, state)
        self.checkpoint_stats["checkpoint_bytes"] += (folder / ckpt.STATE_FILE).stat().st_size
        self._last_checkpoint = time.monotonic()
        return folder

    def _training_record(self, primary: float, val_loss: float, elapsed: float) -> dict[str, Any]:
        window = self._since_eval
        return {
            "objective": primary,
            "val_loss": val_loss,
            "train_loss": window.loss / max(1, window.active),
            # AS-Skip's skipped rows count as masked (see _optimizer_step)
            "masked_ratio": (window.masked + window.skipped)
            / max(1, window.active + window.skipped),
            "accum_steps": self._accum_steps(),
            "delta_now": self.delta_now(),
            "lr_now": self.config.lr * self.lr_schedule.factor(self.pos.samples),
            "samples_per_second": window.samples / max(1e-9, elapsed - self.train_seconds),
            "epoch": self.pos.samples / self.n_train,
            "step": self.pos.steps,
            "samples_seen": self.pos.samples,
            "samples_computed": self.pos.computed,
            "evaluation": self.pos.evaluations,
        } | self._skip_record()

    def _skip_record(self) -> dict[str, float]:
        """``skipped_ratio``: the share of the samples visited since the last evaluation that
        AS-Skip left out; only with AS-Skip."""
        if self.skip is None:
            return {}
        window = self._since_eval
        return {"skipped_ratio": 1.0 - window.computed / max(1, window.samples)}

    def state_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "model": _cpu_state(self.model),
            "optimizer": self.optimizer.state_dict(),
            "lr_schedule": self.lr_schedule.state_dict(),
            "speed": None if self.speed is None else self.speed.state_dict(),
            "skip": None if self.skip is None else self.skip.state_dict(),
            "window_skipped": self._window.skipped_rows_so_far(),
            "position": vars(self.pos).copy(),
            "best": self.best,
            "best_evaluation": self.best_evaluation,
            "best_margins": self.best_margins,
            "history": self.history,
            "train_seconds": self.train_seconds,
            "rng": ckpt.rng_state(),
        }

    def restore(self, folder: Path) -> None:
        """Continue from the checkpoint in ``folder`` exactly where it was written."""
        state = ckpt.read_checkpoint(folder)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.speed is not None and state["speed"] is not None:
            self.speed.load_state_dict(state["speed"])
        if self.skip is not None and state.get("skip") is not None:
            self.skip.load_state_dict(state["skip"])
        self._window = _Window(skipped=state.get("window_skipped", 0))
        self.pos = Position(**state["position"])
        self.best, self.history = state["best"], state["history"]
        self.best_margins = state["best_margins"]
        self.best_evaluation = state["best_evaluation"]
        self.best_weights = ckpt.best_weights_of(state, self.best_store, folder)
        self._named_bests.append(state["best_weights"])
        if state["best_weights"] not in (None, ckpt.BEST_IS_CURRENT):
            if not self.best_store.has(state["best_weights"]):  # resumed from another folder
                self.best_store.put(self.best_weights, self.best_evaluation)
            self._best_stored = (self.best_evaluation, state["best_weights"])
        self.train_seconds = state["train_seconds"]
        self.checkpoint_stats = dict(state["checkpoint_stats"])
        self.checkpoint_stats["checkpoint_bytes"] += (Path(folder) / ckpt.STATE_FILE).stat().st_size
        self._last_checkpoint = time.monotonic()
        self.out.mkdir(parents=True, exist_ok=True)
        with open(self.out / "metrics.jsonl", "w") as fh:  # drop evaluations after the checkpoint
            fh.writelines(json.dumps(r) + "\n" for r in self.history)
        ckpt.set_rng_state(state["rng"])

    def _finish(self) -> dict[str, Any]:
        self.model.load_state_dict(self.best_weights)
        test_metrics, test_loss, _ = evaluate(self, "test")
        best = max(self.history, key=lambda r: r["objective"])
        final = {k: v for k, v in best.items() if k.startswith("val_")}
        final.update({f"test_{k}": v for k, v in test_metrics.items()})
        final.update(
            {
                "test_loss": test_loss,
                "best_evaluation": best["evaluation"],
                "best_objective": best["objective"],
                "optimizer_steps": self.pos.steps,
                "samples_seen": self.pos.samples,
                "samples_computed": self.pos.computed,
                "train_seconds": self.train_seconds,
                **self.checkpoint_stats,
                "p_margin_json": json.dumps(self.best_margins),
            }
        )
        (self.out / "final.json").write_text(json.dumps(final, indent=2))
        return final


@dataclass
class _Window:
    """Sums over micro-batches: of an accumulation window, or since the last evaluation.

    An accumulation window sums on the device (``pending``: loss, active, masked and skipped
    rows) and reads them once, in :meth:`settle`; ``samples`` (visited) and ``computed`` are
    host counts, kept per visit by the loop.
    """

    batches: int = 0
    loss: float = 0.0
    active: int = 0
    masked: int = 0
    skipped: int = 0  # rows of AS-Skip's skipped samples (counted as masked by AS-Speed)
    samples: int = 0
    computed: int = 0
    pending: Tensor | None = None  # float64 (4,) on the run's device

    def add(self, loss: Tensor, counts: Tensor, skipped: Tensor | None) -> None:
        """Fold in one micro-batch: summed ``loss`` (0-dim), ``counts`` ``[active, masked]``."""
        zero = torch.zeros((), dtype=counts.dtype, device=counts.device)
        skipped = zero if skipped is None else skipped
        values = torch.stack([loss.double(), *counts.double(), skipped.double()])
        self.pending = values if self.pending is None else self.pending + values
        self.batches += 1

    def add_skipped(self, skipped: Tensor) -> None:
        """Fold in the skipped rows of a visit that computed nothing."""
        values = torch.zeros(4, dtype=torch.float64, device=skipped.device)
        values[3] = skipped
        self.pending = values if self.pending is None else self.pending + values

    def settle(self) -> None:
        """Read the device sums into the host fields (one sync)."""
        if self.pending is not None:
            loss, active, masked, skipped = self.pending.tolist()
            self.loss += loss
            self.active += round(active)
            self.masked += round(masked)
            self.skipped += round(skipped)
            self.pending = None

    def skipped_rows_so_far(self) -> int:
        """The skipped rows of an open window, read for a checkpoint (one sync). A checkpoint
        follows an optimizer step or an epoch's end, so a window is open then only after an
        epoch whose every sample was skipped: its rows still go to the next AS-Speed update."""
        self.settle()
        return self.skipped

    def merge(self, other: "_Window") -> None:
        """Add a settled window's row sums (samples are counted per visit)."""
        self.loss += other.loss
        self.active += other.active
        self.masked += other.masked
        self.skipped += other.skipped


MARGIN_EDGES = torch.linspace(-1.0, 1.0, 41)


def p_margins(logits: Tensor, labels: Tensor) -> Tensor:
    """``p_t - max_{i != t} p_i`` per active row (single-label ``(B, C)``, token ``(B, T, C)``);
    multi-label (float 0/1 ``labels``): the smallest positive minus the largest negative
    probability, for rows that have both. Softmax over classes, as AS-Softmax's criterion."""
    probs = torch.softmax(logits.float(), dim=-1).reshape(-1, logits.shape[-1])
    if labels.is_floating_point():
        positive = labels.reshape(probs.shape) > 0.5
        both = positive.any(dim=1) & (~positive).any(dim=1)
        low_pos = probs.masked_fill(~positive, 2.0).amin(dim=1)
        high_neg = probs.masked_fill(positive, -1.0).amax(dim=1)
        return (low_pos - high_neg)[both]
    flat = labels.reshape(-1)
    active = flat != -100
    probs, target = probs[active], flat[active].unsqueeze(1)
    p_target = probs.gather(1, target).squeeze(1)
    return p_target - probs.scatter(1, target, -1.0).amax(dim=1)


def margin_histogram(margins: Tensor) -> dict[str, list]:
    """40 equal bins over [-1, 1] (the p_margin figure of the paper's analysis)."""
    counts = torch.histc(margins.clamp(-1.0, 1.0), bins=40, min=-1.0, max=1.0)
    return {"edges": MARGIN_EDGES.tolist(), "counts": [int(c) for c in counts]}


@torch.no_grad()
def evaluate(run: Run, split: str) -> tuple[dict[str, float], float, dict[str, list]]:
    """The dataset's metrics on ``split``, the mean loss per sample (at the current delta) and
    the histogram of p_margins."""
    from astune.metrics import compute_metrics

    run.model.eval()
    run.apply_delta()
    outputs, golds, margins, total_loss, total_active = [], [], [], 0.0, 0
    for batch in run.data.batches(split, max(32, run.config.batch_size)):
        logits, labels = run.forward(batch)
        loss, n_active, _ = run.loss_of(logits, labels)
        total_loss, total_active = total_loss + loss.item(), total_active + n_active
        margins.append(p_margins(logits, labels).cpu())
        if run.spec.task == "token":
            outputs += run.data.word_predictions(split, batch, logits.argmax(-1).cpu())
            golds += run.data.gold_word_labels(split, batch["index"])
        else:
            outputs.append(logits.float().cpu())
            golds.append(batch["labels"])
    if run.spec.task != "token":
        outputs, golds = torch.cat(outputs).numpy(), torch.cat(golds).numpy()
    metrics = compute_metrics(
        run.spec.task,
        outputs,
        golds,
        label_names=run.spec.label_names,
        matthews=run.spec.metric == "matthews",
    )
    return metrics, total_loss / max(1, total_active), margin_histogram(torch.cat(margins))


def load_encoded(config: TrainConfig) -> TrainData:
    """Load and tokenize the run's dataset (a search driver does this once for all trials);
    image and audio datasets keep their file paths, decoded per batch by the backbone's
    processor."""
    from astune.backbones import load_processor, load_tokenizer
    from astune.data import encode_splits, load_dataset_splits
    from astune.data.media_encoding import encode_media

    loaded = load_dataset_splits(
        config.dataset,
        data_dir=config.data_dir,
        max_train_samples=config.max_train_samples,
        max_eval_samples=config.max_eval_samples,
        seed=config.seed,
        validation_fraction=config.validation_fraction,
    )
    if loaded.spec.task in MEDIA_TASKS:
        return encode_media(loaded, load_processor(config.backbone, loaded.spec.task))
    return encode_splits(loaded, load_tokenizer(config.backbone), max_length=config.max_length)


def _model_inputs(batch: dict[str, Tensor], device: torch.device) -> dict[str, Tensor]:
    from astune.data.encoding import MODEL_KEYS

    return {k: batch[k].to(device) for k in MODEL_KEYS if k in batch}


def _adamw(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if param.ndim < 2 or "LayerNorm" in name else decay).append(param)
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    # The fused kernel is 10-20x faster than the per-tensor loop on a CPU, where the embedding
    # table dominates the step.
    return torch.optim.AdamW(groups, lr=config.lr, fused=True)


def _cpu_state(model: nn.Module) -> dict[str, Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def _device(choice: str) -> torch.device:
    if choice == "cuda" or (choice == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise ValueError(
                "device 'cuda' was asked for, but this machine has no CUDA GPU; use --device cpu."
            )
        return torch.device("cuda")
    return torch.device("cpu")


def _autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    if precision == "bf16" and device.type != "cuda":
        raise ValueError("precision 'bf16' needs a CUDA GPU; on the CPU use precision 'fp32'.")
    if precision == "bf16" or (
        precision == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported()
    ):
        return torch.bfloat16
    return None


def _progress(run: Run, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(
        total=run.total_samples,
        initial=run.pos.samples,
        unit="sample",
        desc=f"train {run.spec.name}",
    )
