"""The one training loop: micro-batches, accumulation (AS-Speed), optimizer steps, evaluations.

Not the Hugging Face Trainer: AS-Speed changes the number of accumulated micro-batches between
optimizer steps, so the LR schedule and the delta warm-up run on samples seen, not on a step
count fixed up front. No Ray: a search gets each evaluation through ``callback(record,
checkpoint_dir)`` (None: the policy wrote no checkpoint then); :class:`LoopHooks` time phases.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch import Tensor

from astune._device import sync_place
from astune.checkpoint_policy import CheckpointPolicy
from astune.config import TRAIN_DIR, TrainConfig
from astune.losses.catalogue import loss_info
from astune.run_folder import CHECKPOINT_DIR
from astune.speed.skip import Visit
from astune.training import state as ckpt
from astune.training.allocator import keep_freed_blocks
from astune.training.checkpoints import Best, Checkpointer
from astune.training.compiled import CompiledStep, StepOut
from astune.training.compute import (
    Computed,
    autocast_dtype,
    check_loss_kernel,
    choose_device,
    forward,
    loss_counts,
    mask_without_gradient,
    model_parts,
    update_weights,
)
from astune.training.evaluate import Evaluation, evaluate, step_margin_sums
from astune.training.hooks import LoopHooks
from astune.training.leave_out import batch_source
from astune.training.progress import LinearSchedule, Position, Window
from astune.training.records import RunLog, evaluation_record, final_record
from astune.training.resume import Resumable

if TYPE_CHECKING:
    from astune.data.media_encoding import TrainData

Callback = Callable[[dict[str, Any], "Path | None"], None]


class Run(Resumable):
    """The state of one training run and the steps that move it forward (its checkpoint state
    and restoring it: :class:`~astune.training.resume.Resumable`)."""

    def __init__(
        self,
        config: TrainConfig,
        *,
        data: TrainData | None = None,
        best_weights: ckpt.BestWeights | None = None,
        hooks: Sequence[LoopHooks] = (),
    ):
        from astune.data.encoded import load_for_run
        from astune.metrics.scores import check_metric_computed

        config = config.validate()
        if loss_info(config.loss).fused:  # before the data and the model are read
            check_loss_kernel(config.loss_kernel, choose_device(config.device))
        if data is None:  # a caller that hands data over has checked its metric
            config, data = load_for_run(config)
            check_metric_computed(data.spec.name, data.spec.metric)
        self.data, self.spec = data, data.spec
        self.config = config = config.with_paper_defaults(self.spec)
        self.device = choose_device(config.device)
        if self.device.type == "cpu":
            keep_freed_blocks()  # the gradient buffers of each step reuse the last step's
        self.autocast = autocast_dtype(config.precision, self.device)
        self.n_train = len(self.data.splits["train"])
        self.total_samples = max(1, round(config.epochs * self.n_train))
        self.batches = batch_source(  # before the model: it refuses what it cannot batch
            self.data,
            batch_size=config.batch_size,
            seed=config.seed,
            config=config,
            total_samples=self.total_samples,
            device=self.device,
            probe=self.probe,
            length_window=config.length_window,
        )
        self.model, self.loss_fn, self.optimizer = model_parts(config, self.spec, self.device)
        self.delta_schedule = config.build_delta(self.total_samples)
        self.compiled = None
        if config.compile:
            self.compiled = CompiledStep(
                self.model,
                self.loss_fn,
                device=self.device,
                dtype=self.autocast,
                batch_size=config.batch_size,
                max_length=config.max_length,
                margins=self.delta_schedule is not None,
                rows=self.batches.reads_rows,
            )
        if hasattr(self.loss_fn, "overwrite_logits"):
            # Nothing reads a training step's logits after its loss: the margins come from the
            # fused kernel's own pass (the torch function gives none, and never overwrites).
            # A CUDA graph's logits are its own output buffer: they are left alone.
            self.loss_fn.overwrite_logits = not (config.compile and self.device.type == "cuda")
        self.lr_schedule = LinearSchedule(self.total_samples, config.lr_warmup_ratio)
        self.speed = config.build_speed()
        self.hooks = tuple(hooks)
        self.pos = Position()
        self.best = Best()
        self.history: list[dict[str, Any]] = []
        self.out = Path(config.output_dir or TRAIN_DIR).resolve()
        self.log = RunLog(self.out)
        self.checkpoints = Checkpointer(
            self.out / CHECKPOINT_DIR,
            CheckpointPolicy(config.checkpoint_every),
            best_weights or ckpt.BestWeights.local(self.out / CHECKPOINT_DIR),
        )
        self.train_seconds = 0.0
        self.window = Window()  # the open accumulation window
        self._window_start = 0  # samples seen when the current window's first micro-batch began
        self._in_flight: deque[Window] = deque()  # stepped windows whose sums are on their way
        self._since_eval = Window()

    def train(self, callback: Callback | None = None) -> dict[str, Any]:
        """Run to the end (from where a restore left off) and return the final record."""
        self.log.start(self.history)
        self._clock = time.perf_counter() - self.train_seconds  # counts training, not evaluation
        every = self.config.eval_every  # optimizer steps between evaluations (None: per epoch)
        while self.pos.samples < self.total_samples:
            for batch, visit in self.batches.epoch(self.pos):
                self.micro_step(batch, visit)
                if self.window.batches >= self.accum_steps:
                    self.optimizer_step()
                    if every is not None and self.pos.steps % every == 0:
                        self._evaluate(callback)
                if self.pos.samples >= self.total_samples:
                    break
            if self.window.batches:  # an epoch ends on an optimizer step
                self.optimizer_step()
            self.pos.epoch, self.pos.batch = self.pos.epoch + 1, 0
            if not self.history or self.history[-1]["samples_seen"] != self.pos.samples:
                self._evaluate(callback)  # each epoch ends with an evaluation
        return self._finish()

    def micro_step(self, batch: dict[str, Tensor] | None, visit: Visit) -> None:
        """Forward and backward one micro-batch (none for an empty visit); its counts are
        summed on the device, read once per optimizer step."""
        self._hook("on_micro_step_start", batch, visit)
        if self.window.batches == 0:
            self._window_start = self.pos.samples
        skipped_rows = self.batches.skipped_rows(visit)
        if batch is not None:
            started = time.perf_counter()
            self.model.train()
            self.apply_delta()
            computed, margins = self.forward_and_loss(batch, visit.weight)
            computed.loss.backward()
            self.batches.after_forward(visit, computed, self.pos.samples)
            self.window.add(computed.loss.detach(), computed.counts, skipped_rows, margins)
            if self.compiled is not None:
                self.compiled.timed(time.perf_counter() - started)
        elif skipped_rows is not None:
            self.window.add_skipped(skipped_rows)
        self.pos.samples += visit.visited
        self.pos.computed += len(visit.index)
        self._since_eval.samples += visit.visited
        self._since_eval.computed += len(visit.index)
        self._hook("on_micro_step_end", batch, visit)

    def probe(self, index: Tensor) -> Computed:
        """AS-Skip's re-check of training samples ``index`` ``(B,)`` at the current delta."""
        self._hook("on_recheck_start", index)
        self.apply_delta()
        batch = self.data.collate("train", index)
        computed = mask_without_gradient(
            self.model, self.loss_fn, batch, device=self.device, dtype=self.autocast
        )
        self._hook("on_recheck_end", index)
        return computed

    def forward_and_loss(self, batch: dict[str, Tensor], weight: Tensor | None) -> StepOut:
        """A micro-batch's forward and loss (``weight`` ``(B,)`` per sample, None: 1), through
        the compiled step with ``compile``; for an AS loss, the margins' sums too."""
        if self.compiled is not None:
            return self.compiled(batch, weight=weight)
        logits, labels = forward(self.model, batch, device=self.device, dtype=self.autocast)
        computed = loss_counts(self.loss_fn, logits, labels, weight=weight)
        margins = None
        if self.delta_schedule is not None:  # an AS loss: its margins are logged
            margins = step_margin_sums(computed.stats, logits, labels)
        return StepOut(computed, margins)

    def optimizer_step(self) -> None:
        """Divide the window's summed gradient by its rows, clip, step; the host reads the
        window's sums one step later (:meth:`settle_windows`), so nothing waits here."""
        self._hook("on_optimizer_step_start")
        window = self.window
        update_weights(
            self.model,
            self.optimizer,
            rows=self.gradient_rows(window),
            max_grad_norm=self.config.max_grad_norm,
            lr=self.config.lr * self.lr_schedule.factor(self._window_start),
        )
        self.pos.steps += 1
        window.step, window.epoch_at_step = self.pos.steps, self.pos.epoch
        window.samples_at_step = self.pos.samples
        window.start_read()
        self._in_flight.append(window)
        self.window = Window()
        self.settle_windows(keep=1)  # the previous step's window: its copy has long landed
        self._hook("on_optimizer_step_end")

    def settle_windows(self, keep: int = 0) -> None:
        """Read the windows of past optimizer steps, oldest first, all but the newest ``keep``
        (``keep=0``: every one, which waits for the device: in a named sync place only). Each
        is checked for a non-finite loss and teaches AS-Speed and the delta schedule; the
        counts since the last evaluation grow by it."""
        while len(self._in_flight) > keep:
            window = self._in_flight.popleft()
            window.settle()
            self._learn_from(window)

    def _learn_from(self, window: Window) -> None:
        if not math.isfinite(window.loss):
            raise FloatingPointError(
                f"loss is {window.loss} at epoch {window.epoch_at_step}, optimizer step "
                f"{window.step} (lr {self.config.lr}, loss {self.config.loss}); "
                "the run stops here."
            )
        if self.speed is not None:
            # AS-Skip's skipped rows had zero loss when last computed: they count as masked, so
            # AS-Speed still sees the share of the data that has no gradient.
            self.speed.update(window.active + window.skipped, window.masked + window.skipped)
        if self.delta_schedule is not None:
            self.delta_schedule.observe(
                window.samples_at_step,
                masked_ratio=window.masked_ratio(),
                margin=window.mean_margin(),
            )
        self._since_eval.merge(window)

    def gradient_rows(self, window: Window) -> Tensor:
        """The rows a step divides the window's summed gradient by, a 0-dim device tensor: the
        rows computed. A skipped sample would have added exactly 0 to the sum, so the update
        keeps the scale of a full batch of computed rows (benchmarks/RESULTS.md measures the
        alternative, computed + skipped, side by side, by overriding this method)."""
        return window.device_sum("active")

    @property
    def accum_steps(self) -> int:
        """Micro-batches the current optimizer step accumulates (1 without AS-Speed)."""
        return 1 if self.speed is None else self.speed.steps

    def delta_now(self) -> float:
        """The delta at the samples seen so far; 1.0 for a loss that is not an AS loss."""
        schedule = self.delta_schedule
        return 1.0 if schedule is None else schedule.delta_at(self.pos.samples)

    def apply_delta(self) -> None:
        """Hand the current delta to an AS loss (``set_delta``); other losses take none."""
        if self.delta_schedule is not None:
            self.loss_fn.set_delta(self.delta_now())

    def _hook(self, name: str, *args: Any) -> None:
        for hook in self.hooks:
            getattr(hook, name)(self, *args)

    def evaluate(self, split: str) -> Evaluation:
        """The model as it is now on ``split``, at the current delta."""
        self.apply_delta()
        with sync_place("evaluation"):
            return evaluate(
                self.model,
                self.data,
                split,
                loss_fn=self.loss_fn,
                device=self.device,
                dtype=self.autocast,
                batch_size=self.config.batch_size,
            )

    def _evaluate(self, callback: Callback | None) -> None:
        """Evaluate, record, checkpoint and report, once the windows in flight are read."""
        with sync_place("evaluation"):
            self.settle_windows()
            self._record_evaluation(callback)

    def _record_evaluation(self, callback: Callback | None) -> None:
        self._hook("on_evaluate_start")
        elapsed = time.perf_counter() - self._clock
        result = self.evaluate("validation")
        record = (
            evaluation_record(
                result,
                metric=self.spec.metric,
                since_eval=self._since_eval,
                pos=self.pos,
                n_train=self.n_train,
                seconds=elapsed - self.train_seconds,
                train_seconds=elapsed,
                accum_steps=self.accum_steps,
                delta_now=self.delta_now(),
                lr_now=self.config.lr * self.lr_schedule.factor(self.pos.samples),
            )
            | self.batches.record(self._since_eval)
            | self.batches.counts(self.pos)
        )
        self.pos.evaluations += 1
        self.best.update(
            record["objective"],
            margins=result.margins,
            evaluation=record["evaluation"],
            model=self.model,
        )
        self.history.append(record)
        self.train_seconds = elapsed
        self._since_eval = Window()
        last = self.pos.samples >= self.total_samples
        folder = self.checkpoints.write_if_due(self.state_dict, self.best, record, last=last)
        self.log.append(record)
        if callback is not None:
            callback(record, folder)
        if folder is not None:  # reported (a search has persisted it): older bests can go
            self.checkpoints.reported()
        self._clock = time.perf_counter() - self.train_seconds
        self._hook("on_evaluate_end")

    def _finish(self) -> dict[str, Any]:
        with sync_place("end"):
            self.settle_windows()
            return self._test_and_write()

    def _test_and_write(self) -> dict[str, Any]:
        self._hook("on_test_start")
        self.model.load_state_dict(self.best.weights)
        final = final_record(
            self.history,
            self.evaluate("test"),
            pos=self.pos,
            train_seconds=self.train_seconds,
            checkpoint_stats=self.checkpoints.stats,
            best_margins=self.best.margins,
        ) | self.batches.counts(self.pos)
        if self.compiled is not None:
            final["compile_seconds"] = round(self.compiled.compile_seconds(), 3)
        self.log.write_final(final)
        self._hook("on_test_end")
        return final
