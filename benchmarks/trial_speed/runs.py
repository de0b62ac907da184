"""Training the variants of benchmarks/trial_speed/as_speed.py side by side: the timing hooks, the
sequential and interleaved schedules, what each run leaves (``collect``) and the cost probe."""

from __future__ import annotations

import gc
import json
import math
import shutil
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from astune.config import TrainConfig
from astune.speed.skip import Visit
from astune.training import LoopHooks, Run
from benchmarks.trial_speed.variants import run_class


class Clock:
    """Points in time without a sync: on CUDA an event recorded on the stream (the GPU's own
    clock, read once at the end, so measuring never makes a step wait), else the host's."""

    def __init__(self, cuda: bool):
        self.cuda = cuda

    def now(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self, start: Any, end: Any) -> float:
        """Between two :meth:`now` marks; on CUDA only after :meth:`settle`."""
        return start.elapsed_time(end) / 1000.0 if self.cuda else end - start

    def settle(self) -> None:
        """Wait for every mark recorded so far (once, at the end of a run)."""
        if self.cuda:
            torch.cuda.synchronize()


class Timed(LoopHooks):
    """Times the phases of one run through the loop's public hooks with a :class:`Clock`, and
    keeps each micro-batch's mask counts on the device; :meth:`settle` reads both once, at the
    end. Records per micro-batch and per optimizer step. ``before_micro`` runs before a
    micro-batch's clock starts (the interleaved schedule hands the turn on there)."""

    def __init__(self, cuda: bool, before_micro: Callable[[], None] | None = None):
        self.clock, self.before_micro = Clock(cuda), before_micro
        self.micro: list[dict[str, Any]] = []  # one per micro-batch
        self.steps: list[dict[str, Any]] = []  # one per optimizer step
        self.evals: list[float] = []  # seconds of each validation evaluation (+ checkpoint write)
        self.finish = 0.0  # the final test evaluation
        self.rechecks: list[dict[str, Any]] = []  # AS-Skip's re-checks: samples and seconds
        self._start: Any = 0.0
        self._host_start, self._position, self._accum, self._batches = 0.0, 0, 1, 0

    def on_micro_step_start(self, run: Run, batch: Any, visit: Visit) -> None:
        if self.before_micro is not None:
            self.before_micro()
        self._position, self._accum = run.window.batches, run.accum_steps
        self._start = self.clock.now()

    def on_micro_step_end(self, run: Run, batch: Any, visit: Visit) -> None:
        end = self.clock.now()
        stats = getattr(run.loss_fn, "last_stats", None) if batch is not None else None
        n = 0 if batch is None else len(visit.index)
        self.micro.append(
            {
                "samples": run.pos.samples,
                "seconds": (self._start, end),
                "position": self._position,
                "accum": self._accum,
                # [active, masked] left on the device, read in settle()
                "counts": stats.counts() if stats is not None else (n, 0),
                "visited": visit.visited,
                "computed": n,
            }
        )

    def on_recheck_start(self, run: Run, index: torch.Tensor) -> None:
        self._start = self.clock.now()

    def on_recheck_end(self, run: Run, index: torch.Tensor) -> None:
        seconds = (self._start, self.clock.now())
        self.rechecks.append({"samples": run.pos.samples, "n": len(index), "seconds": seconds})

    def on_optimizer_step_start(self, run: Run) -> None:
        self._batches = run.window.batches
        self._start = self.clock.now()

    def on_optimizer_step_end(self, run: Run) -> None:
        seconds = (self._start, self.clock.now())
        self.steps.append(
            {"samples": run.pos.samples, "seconds": seconds, "batches": self._batches}
        )

    def on_evaluate_start(self, run: Run) -> None:
        self._host_start = time.perf_counter()

    def on_evaluate_end(self, run: Run) -> None:
        self.evals.append(time.perf_counter() - self._host_start)

    def on_test_start(self, run: Run) -> None:
        self._host_start = time.perf_counter()

    def on_test_end(self, run: Run) -> None:
        self.finish = time.perf_counter() - self._host_start

    def settle(self) -> None:
        """Turn the marks into seconds and the counts into ``active`` and ``masked``: one wait
        for the device, after the run."""
        self.clock.settle()
        for record in (*self.micro, *self.steps, *self.rechecks):
            if isinstance(record["seconds"], tuple):
                record["seconds"] = self.clock.seconds(*record["seconds"])
        for m in self.micro:
            if "counts" in m:
                counts = m.pop("counts")
                m["active"], m["masked"] = (
                    counts.tolist() if isinstance(counts, torch.Tensor) else counts
                )


def _is_cuda(config: TrainConfig) -> bool:
    return config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())


def train_variant(
    variant: str, config: TrainConfig, data: Any, keep_checkpoints: bool
) -> dict[str, Any]:
    """One training on its own (the sequential schedule)."""
    timed = Timed(_is_cuda(config))
    run = run_class(variant)(config, data=data, hooks=[timed])
    if run.device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    final = run.train()
    wall = time.perf_counter() - start
    return collect(variant, run, timed, final, wall, final["train_seconds"], keep_checkpoints)


class Baton:
    """Round-robin turns between threads: the holder computes, the others wait."""

    def __init__(self, names: list[str]):
        self.order, self.turn, self.cond = list(names), 0, threading.Condition()

    def acquire(self, name: str) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.order[self.turn] == name)

    def release(self, name: str) -> None:
        with self.cond:
            self.turn = (self.turn + 1) % len(self.order)
            self.cond.notify_all()

    def leave(self, name: str) -> None:
        with self.cond:
            at = self.order.index(name)
            self.order.remove(name)
            if self.order:  # the turn stays with whoever held it; the leaver's passes on
                if at < self.turn:
                    self.turn -= 1
                self.turn %= len(self.order)
            self.cond.notify_all()


def train_interleaved(
    configs: dict[str, TrainConfig], data: Any, keep_checkpoints: bool
) -> dict[str, dict[str, Any]]:
    """All variants at once, in lock-step: each runs its own ``Run.train`` in a thread, and a
    baton lets one compute at a time, passing it on at every micro-batch. A run's time is the sum
    of its turns, so a slow patch of the shared machine lands on every variant alike.

    Each run keeps its own global RNG state across turns (dropout draws), so it computes exactly
    what it computes alone. The library's ``train_seconds`` counts the other runs' turns too and
    is not reported in this schedule. On CUDA a turn is timed by events on the stream, which the
    baton's order keeps apart, so handing the turn on never waits for the device.
    """
    names = list(configs)
    runs: dict[str, Run] = {}
    rng: dict[str, torch.Tensor] = {}
    cuda = _is_cuda(next(iter(configs.values())))
    clock = Clock(cuda)
    baton = Baton(names)
    turns: dict[str, list[tuple[Any, Any]]] = {name: [] for name in names}
    since: dict[str, Any] = {}
    finals: dict[str, dict[str, Any]] = {}
    errors: list[BaseException] = []

    def take(name: str) -> None:
        baton.acquire(name)
        torch.set_rng_state(rng[name])
        since[name] = clock.now()

    def give(name: str) -> None:
        turns[name].append((since[name], clock.now()))  # no wait: read after every run
        rng[name] = torch.get_rng_state()

    def turn(name: str) -> Callable[[], None]:
        def before_micro() -> None:
            give(name)
            baton.release(name)
            take(name)

        return before_micro

    timed = {name: Timed(cuda, turn(name)) for name in names}
    for name in names:  # built one after another, as alone: each seeds the global RNG
        runs[name] = run_class(name)(configs[name], data=data, hooks=[timed[name]])
        rng[name] = torch.get_rng_state()

    def worker(name: str) -> None:
        take(name)
        try:
            finals[name] = runs[name].train()
        except BaseException as err:  # noqa: BLE001 - re-raised in the main thread
            errors.append(err)
        finally:
            give(name)
            baton.leave(name)

    # daemon threads: Ctrl-C or a timeout's SIGINT in the main thread's join ends the process
    # instead of leaving it waiting on runs parked at the baton
    threads = [
        threading.Thread(target=worker, args=(name,), name=f"as_speed-{name}", daemon=True)
        for name in names
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    clock.settle()
    held = {name: sum(clock.seconds(*turn) for turn in turns[name]) for name in names}
    return {
        name: collect(
            name, runs[name], timed[name], finals[name], held[name], None, keep_checkpoints
        )
        for name in names
    }


def collect(
    variant: str,
    run: Run,
    timed: Timed,
    final: dict[str, Any],
    wall: float,
    lib_train_seconds: float | None,
    keep_checkpoints: bool,
) -> dict[str, Any]:
    timed.settle()
    eval_seconds = sum(timed.evals)
    train_only = wall - eval_seconds - timed.finish
    micro_s = sum(m["seconds"] for m in timed.micro)
    step_s = sum(s["seconds"] for s in timed.steps)
    recheck_s = sum(r["seconds"] for r in timed.rechecks)
    first = [m["seconds"] for m in timed.micro if m["position"] == 0]
    accum = [m["seconds"] for m in timed.micro if m["position"] > 0]
    active = sum(m["active"] for m in timed.micro)
    masked = sum(m["masked"] for m in timed.micro)
    last_epoch = [m for m in timed.micro if m["samples"] > run.total_samples - run.n_train]
    metrics = [
        json.loads(line) for line in (run.out / "metrics.jsonl").read_text().splitlines() if line
    ]
    result = {
        "variant": variant,
        "train_s": train_only,  # wall time of training, evaluation excluded
        "lib_train_seconds": lib_train_seconds,  # None in the interleaved schedule
        "wall_s": wall,  # everything: training, validation evaluations, checkpoints, test
        "eval_s": eval_seconds,
        "n_evals": len(timed.evals),
        "test_eval_s": timed.finish,
        "micro_s": micro_s,
        "step_s": step_s,
        "recheck_s": recheck_s,  # AS-Skip's forward passes without gradient
        "other_s": train_only - micro_s - step_s - recheck_s,
        "optimizer_steps": final["optimizer_steps"],
        "micro_batches": len(timed.micro),
        "samples_fwd_bwd": final["samples_computed"],
        "samples_seen": final["samples_seen"],
        "samples_rechecked": final.get("samples_rechecked", 0),
        "rechecks_active": final.get("rechecks_active", 0),
        "seed": run.config.seed,
        "samples_with_grad": active - masked,
        "masked_ratio": masked / max(1, active),
        "masked_ratio_last_epoch": sum(m["masked"] for m in last_epoch)
        / max(1, sum(m["active"] for m in last_epoch)),
        "final_accum": run.accum_steps,
        "t_micro_median": statistics.median(m["seconds"] for m in timed.micro),
        "t_micro_first_median": statistics.median(first) if first else None,
        "t_micro_accum_median": statistics.median(accum) if accum else None,
        "t_step_median": statistics.median(s["seconds"] for s in timed.steps),
        "val_accuracy": final.get("val_accuracy"),
        "test_accuracy": final.get("test_accuracy"),
        "best_evaluation": final.get("best_evaluation"),
        "curve": [
            {k: m[k] for k in ("samples", "active", "masked", "accum", "visited", "computed")}
            for m in timed.micro
        ],
        "metrics_jsonl": [
            {
                k: r.get(k)
                for k in (
                    "samples_seen",
                    "step",
                    "masked_ratio",
                    "accum_steps",
                    "val_accuracy",
                    "samples_per_second",
                )
            }
            for r in metrics
        ],
        "n_train": run.n_train,
        "per_epoch": per_epoch(timed, run.n_train, metrics),
    }
    if not keep_checkpoints:
        shutil.rmtree(run.checkpoints.folder, ignore_errors=True)
    return result


def per_epoch(timed: Timed, n_train: int, metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Masked ratio, optimizer steps, accumulation steps and validation accuracy per epoch."""
    rows = []
    epochs = max(1, math.ceil(timed.micro[-1]["samples"] / n_train)) if timed.micro else 0
    for e in range(epochs):
        lo, hi = e * n_train, (e + 1) * n_train
        micro = [m for m in timed.micro if lo < m["samples"] <= hi]
        active, masked = sum(m["active"] for m in micro), sum(m["masked"] for m in micro)
        evals = [r for r in metrics if lo < r["samples_seen"] <= hi]
        rows.append(
            {
                "epoch": e + 1,
                "masked_ratio": masked / max(1, active),
                "optimizer_steps": sum(1 for s in timed.steps if lo < s["samples"] <= hi),
                "accum_max": max((m["accum"] for m in micro), default=None),
                "val_accuracy": evals[-1].get("val_accuracy") if evals else None,
            }
        )
    return rows


def cost_probe(config: TrainConfig, data: Any, rounds: int) -> dict[str, float]:
    """Median seconds of: a micro-batch that starts a window (gradients unset), one that
    accumulates into it, and the optimizer step, interleaved round by round on the same model.
    Also the warm-up of the process (allocator, kernels) before the timed trainings."""
    run = Run(config, data=data)
    gen = torch.Generator().manual_seed(config.seed)
    order = torch.randperm(run.n_train, generator=gen)
    size = config.batch_size
    n_batches = max(1, run.n_train // size)
    times: dict[str, list[float]] = {"first": [], "accum": [], "step": []}
    sync = torch.cuda.synchronize if run.device.type == "cuda" else (lambda: None)
    for r in range(rounds + 2):  # the first two rounds warm up, untimed
        batches = [
            data.collate("train", order[(i % n_batches) * size : ((i % n_batches) + 1) * size])
            for i in (2 * r, 2 * r + 1)
        ]
        t0 = time.perf_counter()
        run.micro_step(batches[0], _visit(batches[0]))
        t1 = time.perf_counter()
        run.micro_step(batches[1], _visit(batches[1]))
        t2 = time.perf_counter()
        run.optimizer_step()
        sync()
        t3 = time.perf_counter()
        if r >= 2:
            times["first"].append(t1 - t0)
            times["accum"].append(t2 - t1)
            times["step"].append(t3 - t2)
    del run
    gc.collect()
    return {k: statistics.median(v) for k, v in times.items()}


def _visit(batch: dict[str, torch.Tensor]) -> Visit:
    return Visit(batch["index"], len(batch["index"]), batch["index"][:0])
