"""AS-Speed on SST-5: softmax vs AS-Softmax vs AS-Speed, same seed, same data, one process.

The dataset is tokenized once (``load_encoded``); the three variants then train on it with the
same seed (same head initialisation, same batch order, same dropout draws until the variants
diverge):

  - ``softmax``     loss "softmax"
  - ``as_softmax``  loss "as_softmax" with ``--delta``
  - ``as_speed``    as_softmax plus AS-Speed (``--lam``, ``--max-accum-steps``)
  - ``as_skip``     as_softmax plus AS-Skip (``--skip-keep``, ``--skip-anneal``)
  - ``as_speed_skip`` both
  - ``as_skip_represented`` as_skip, its gradient divided by the rows represented (computed +
    skipped) instead of the library's rows computed: the normalisation measured side by side
  - ``as_skip_v1``  as_skip with ``skip_probe`` off and no back-off: the samples due for a
    re-check (a share ``skip_keep`` each epoch) are trained on directly instead of probed by a
    forward pass without gradient (AS-Skip v1)
  - ``as_skip_flat`` as_skip without the back-off (``skip_backoff`` 1): every zero-loss sample
    has the chance ``skip_keep`` each epoch (AS-Skip v2, step 1)
  - ``softmax_grouped`` and ``as_skip_grouped``: softmax and as_skip with their micro-batches
    grouped by length (``--length-window``), so each pads to about its own length
  - ``as_skip_soft`` as_skip with ``skip_policy`` soft: the samples AS-Skip keeps are pruned
    further, InfoBatch's way, with chance ``--prune`` when their loss is below the mean
  - ``infobatch``   softmax with InfoBatch (``--prune``, ``--infobatch-anneal``): the published
    peer, built in astune from its paper (astune/prune.py)

``--group-all`` groups every variant but ``softmax`` by length, so that the variants compare at
the same batching and ``softmax`` stays the plain reference; time ratios are then also given
against ``softmax_grouped``.

``--seeds N`` trains every variant with N seeds (``--seed``, ``--seed`` + 1, ...; the data subset
stays the one drawn with ``--seed``) and adds the mean and 95% t-interval over seeds of each
variant's training-time ratio to softmax (paired within a seed) and of its test accuracy.

Two schedules. ``interleaved`` (the default) trains the three in lock-step in one process: each
runs the library's own loop (``Run.train``) in a thread, and a baton lets one compute at a time,
handing over at every micro-batch; a run's time is the sum of its turns, so a slow patch of a
shared machine lands on all three alike. Each run keeps its own RNG state across turns and so
computes exactly what it computes alone. ``sequential`` runs one training after another, in
rotated order per repeat, and also reports the library's own ``train_seconds``.

For each run it reports
  - training time excluding evaluation: the wall time of ``Run.train`` minus the time spent in
    validation evaluations (with their checkpoint writes) and in the final test evaluation; and,
    for comparison, the library's own ``final["train_seconds"]``, which is the clock at the last
    evaluation and so includes every evaluation but the last, with its checkpoint writes;
  - optimizer steps and micro-batches;
  - samples forwarded+backwarded: every training sample seen. A masked sample's loss row is
    zero, but it is still in its batch's forward and backward pass: masking removes its
    gradient, not its compute;
  - samples with a gradient: the sum over micro-batches of ``n_active - n_masked`` (rows not
    fully masked by AS-Softmax), read from the loss's per-call counts;
  - best validation accuracy and the test accuracy of that checkpoint;
  - masked ratio and accumulation steps over training (per micro-batch, exact; and the
    per-evaluation ``masked_ratio`` of ``metrics.jsonl``), drawn to a PNG.

Where the time goes: every micro-batch (forward+backward) and every optimizer step (gradient
scaling, clipping, AdamW, zero_grad) is timed inside the runs, and a short interleaved probe
times a micro-batch that starts a window, one that accumulates into it, and an optimizer step,
side by side. AS-Speed does the same micro-batches as softmax and fewer optimizer steps, so its
saving is bounded by the optimizer steps' share of softmax's training time.

The timing goes through the training loop's public hooks (``astune.training.LoopHooks``: micro
step, optimizer step, evaluation, test); they change nothing the loop computes. On a GPU it
synchronises at the end of each timed phase so that its kernels are counted in its time.

Usage (CPU, a subset):
  HF_HUB_OFFLINE=1 python benchmarks/as_speed.py --data-dir ../shared/data --num-layers 2 \\
      --max-train-samples 2000 --max-length 64 --epochs 3 --threads 1
GPU (the paper's setting, the whole training set):
  python benchmarks/as_speed.py --data-dir ../shared/data --backbone bert-base-cased --full \\
      --max-length 128 --epochs 7 --device cuda --precision bf16 --repeats 3
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from astune.config import TrainConfig
from astune.confirm.stats import t_interval
from astune.data.encoded import load_encoded
from astune.skip import Visit
from astune.training import LoopHooks, Run

SKIP_VARIANTS = (
    "as_skip",
    "as_speed_skip",
    "as_skip_represented",
    "as_skip_v1",
    "as_skip_flat",
    "as_skip_grouped",
    "as_skip_soft",
)
VARIANTS = ("softmax", "as_softmax", "as_speed", *SKIP_VARIANTS, "softmax_grouped", "infobatch")
SOFTMAX_VARIANTS = ("softmax", "softmax_grouped", "infobatch")
GROUPED_VARIANTS = ("as_skip_grouped", "softmax_grouped")
SPEED_VARIANTS = ("as_speed", "as_speed_skip")
DEFAULT_PLOT = Path(__file__).resolve().parent / "as_speed_masked.png"


# -- configuration ----------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--dataset", default="sst5")
    p.add_argument(
        "--data-dir", default=None, help="folder holding <dataset>/{train,validation,test}.jsonl"
    )
    p.add_argument("--backbone", default="minilm")
    p.add_argument(
        "--num-layers", type=int, default=None, help="keep the first N layers (default: all)"
    )
    p.add_argument(
        "--max-train-samples",
        type=int,
        default=2000,
        help="a fixed random subset of the training set (drawn with --seed); 0: all of it",
    )
    p.add_argument(
        "--full", action="store_true", help="the whole training set (same as --max-train-samples 0)"
    )
    p.add_argument(
        "--max-eval-samples", type=int, default=0, help="subset of validation and test each; 0: all"
    )
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--epochs", type=float, default=3.0)
    p.add_argument("--batch-size", type=int, default=16, help="micro-batch size (paper SST-5: 16)")
    p.add_argument("--lr", type=float, default=2e-5, help="peak learning rate (paper SST-5: 2e-5)")
    p.add_argument("--delta", type=float, default=0.3, help="AS-Softmax delta (paper SST-5: 0.3)")
    p.add_argument("--lam", type=float, default=1.5, help="AS-Speed lambda (paper SST-5: 1.5)")
    p.add_argument("--max-accum-steps", type=int, default=4, help="AS-Speed cap (paper SST-5: 4)")
    p.add_argument("--skip-keep", type=float, default=None, help="AS-Skip re-check share")
    p.add_argument("--skip-anneal", type=float, default=None, help="AS-Skip full-data tail")
    p.add_argument("--skip-backoff", type=float, default=None, help="AS-Skip re-check back-off cap")
    p.add_argument(
        "--length-window", type=int, default=8, help="micro-batches grouped by length (*_grouped)"
    )
    p.add_argument(
        "--group-all",
        action="store_true",
        help="group every variant but softmax by length (--length-window)",
    )
    p.add_argument(
        "--prune",
        type=float,
        default=0.5,
        help="the chance of pruning a low-loss sample: as_skip_soft's skip_prune and "
        "infobatch's infobatch_prune (InfoBatch's paper: 0.5)",
    )
    p.add_argument(
        "--infobatch-anneal", type=float, default=None, help="infobatch's full-data tail"
    )
    p.add_argument(
        "--seeds", type=int, default=1, help="seeds per variant (mean and 95%% interval if > 1)"
    )
    p.add_argument(
        "--skip-plot", default="", help="PNG of the share of samples computed over training"
    )
    p.add_argument(
        "--eval-every",
        type=int,
        default=None,
        help="evaluate every N optimizer steps (default: once per epoch). In optimizer steps, "
        "so AS-Speed, taking fewer steps, would evaluate less often; training time here "
        "excludes evaluation either way",
    )
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"])
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default: torch's). On a shared CPU, 1 thread is far steadier",
    )
    p.add_argument(
        "--schedule",
        default="interleaved",
        choices=["interleaved", "sequential"],
        help="interleaved: the variants train in lock-step, one micro-batch each in turn (robust "
        "to a shared machine's drift); sequential: one training after another (also reports "
        "the library's train_seconds)",
    )
    p.add_argument("--repeats", type=int, default=1, help="trainings per variant, in rotated order")
    p.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {VARIANTS}"
    )
    p.add_argument(
        "--probe-rounds",
        type=int,
        default=20,
        help="rounds of the interleaved micro-batch / optimizer-step probe (0: skip)",
    )
    p.add_argument(
        "--output-dir",
        default="astune-runs/bench-as-speed",
        help="the runs' metrics and checkpoints",
    )
    p.add_argument(
        "--keep-checkpoints", action="store_true", help="keep each run's checkpoint folder"
    )
    p.add_argument(
        "--plot",
        default=str(DEFAULT_PLOT),
        help="PNG of masked ratio and accumulation steps ('' to skip)",
    )
    p.add_argument(
        "--json",
        default=None,
        help="write every number (and the curves) to this file; '-' for stdout",
    )
    p.add_argument(
        "--from-json",
        default=None,
        help="train nothing: print the report and draw the plot again from a file --json wrote",
    )
    args = p.parse_args(argv)
    if args.full:
        args.max_train_samples = 0
    for name in ("max_train_samples", "max_eval_samples"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0 (0: all), got {getattr(args, name)}")
    if args.repeats < 1:
        p.error(f"--repeats must be >= 1, got {args.repeats}")
    if args.seeds < 1:
        p.error(f"--seeds must be >= 1, got {args.seeds}")
    if args.seeds > 1 and args.repeats > 1:
        p.error("--seeds and --repeats are exclusive: each seed is one repeat")
    args.repeats = max(args.repeats, args.seeds)
    if args.probe_rounds < 0:
        p.error(f"--probe-rounds must be >= 0, got {args.probe_rounds}")
    if args.threads is not None and args.threads < 1:
        p.error(f"--threads must be >= 1, got {args.threads}")
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown or not args.variants:
        p.error(
            f"--variants takes a comma-separated subset of {', '.join(VARIANTS)}; "
            f"got {unknown or 'none'}"
        )
    return args


def base_config(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(
        dataset=args.dataset,
        data_dir=args.data_dir,
        backbone=args.backbone,
        num_layers=args.num_layers,
        max_length=args.max_length,
        max_train_samples=args.max_train_samples or None,
        max_eval_samples=args.max_eval_samples or None,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        seed=args.seed,
        eval_every=args.eval_every,
        device=args.device,
        precision=args.precision,
        loss="softmax",
    )


def variant_config(
    base: TrainConfig, variant: str, args: argparse.Namespace, output_dir: Path
) -> TrainConfig:
    config = TrainConfig.from_dict({**base.to_dict(), "output_dir": str(output_dir)})
    if variant in GROUPED_VARIANTS or (args.group_all and variant != "softmax"):
        config.length_window = args.length_window
    if variant in SOFTMAX_VARIANTS:
        config.loss = "softmax"
        if variant == "infobatch":
            config.infobatch, config.infobatch_prune = True, args.prune
            if args.infobatch_anneal is not None:
                config.infobatch_anneal = args.infobatch_anneal
    else:
        config.loss, config.delta = "as_softmax", args.delta
        if variant in SPEED_VARIANTS:
            config.as_speed, config.lam, config.max_accum_steps = (
                True,
                args.lam,
                args.max_accum_steps,
            )
        if variant in SKIP_VARIANTS:
            config.as_skip = True
            for name in ("skip_keep", "skip_anneal", "skip_backoff"):
                if getattr(args, name) is not None:
                    setattr(config, name, getattr(args, name))
            # v1: the samples due for a re-check are trained on, not probed without gradient
            config.skip_probe = variant != "as_skip_v1"
            if variant in ("as_skip_v1", "as_skip_flat"):
                config.skip_backoff = 1.0
            if variant == "as_skip_soft":
                config.skip_policy, config.skip_prune = "soft", args.prune
    return config.validate()


class RepresentedRun(Run):
    """AS-Skip's alternative normalisation: each step divides the summed gradient by the rows
    represented (computed + skipped, as if the skipped samples had added their zero), so the
    step shrinks as skipping grows."""

    def gradient_rows(self, window: Any) -> int:
        return window.active + window.skipped


def run_class(variant: str) -> type[Run]:
    return RepresentedRun if variant == "as_skip_represented" else Run


# -- instrumentation --------------------------------------------------------------------------
class Timed(LoopHooks):
    """Times the phases of one run through the loop's public hooks; records per micro-batch and
    per optimizer step. ``before_micro`` runs before a micro-batch's clock starts (the
    interleaved schedule hands the turn on there)."""

    def __init__(self, cuda: bool, before_micro: Callable[[], None] | None = None):
        self.cuda, self.before_micro = cuda, before_micro
        self.micro: list[dict[str, float]] = []  # one per micro-batch
        self.steps: list[dict[str, float]] = []  # one per optimizer step
        self.evals: list[float] = []  # seconds of each validation evaluation (+ checkpoint write)
        self.finish = 0.0  # the final test evaluation
        self.rechecks: list[dict[str, float]] = []  # AS-Skip's re-checks: samples and seconds
        self._start, self._position, self._accum, self._batches = 0.0, 0, 1, 0

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def on_micro_step_start(self, run: Run, batch: Any, visit: Visit) -> None:
        if self.before_micro is not None:
            self.before_micro()
        self._position, self._accum = run.window.batches, run.accum_steps
        self._sync()
        self._start = time.perf_counter()

    def on_micro_step_end(self, run: Run, batch: Any, visit: Visit) -> None:
        self._sync()
        seconds = time.perf_counter() - self._start
        stats = getattr(run.loss_fn, "last_stats", None) if batch is not None else None
        n = 0 if batch is None else len(visit.index)
        # counts read after the clock stopped: the loop itself syncs once per optimizer step
        self.micro.append(
            {
                "samples": run.pos.samples,
                "seconds": seconds,
                "position": self._position,
                "accum": self._accum,
                "active": stats.n_active if stats is not None else n,
                "masked": stats.n_masked if stats is not None else 0,
                "visited": visit.visited,
                "computed": n,
            }
        )

    def on_recheck_start(self, run: Run, index: torch.Tensor) -> None:
        self._sync()
        self._start = time.perf_counter()

    def on_recheck_end(self, run: Run, index: torch.Tensor) -> None:
        self._sync()
        seconds = time.perf_counter() - self._start
        self.rechecks.append({"samples": run.pos.samples, "n": len(index), "seconds": seconds})

    def on_optimizer_step_start(self, run: Run) -> None:
        self._batches = run.window.batches
        self._start = time.perf_counter()

    def on_optimizer_step_end(self, run: Run) -> None:
        self._sync()
        self.steps.append(
            {
                "samples": run.pos.samples,
                "seconds": time.perf_counter() - self._start,
                "batches": self._batches,
            }
        )

    def on_evaluate_start(self, run: Run) -> None:
        self._start = time.perf_counter()

    def on_evaluate_end(self, run: Run) -> None:
        self.evals.append(time.perf_counter() - self._start)

    def on_test_start(self, run: Run) -> None:
        self._start = time.perf_counter()

    def on_test_end(self, run: Run) -> None:
        self.finish = time.perf_counter() - self._start


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
    is not reported in this schedule.
    """
    names = list(configs)
    runs: dict[str, Run] = {}
    rng: dict[str, torch.Tensor] = {}
    cuda = _is_cuda(next(iter(configs.values())))
    baton = Baton(names)
    held = {name: 0.0 for name in names}
    since: dict[str, float] = {}
    finals: dict[str, dict[str, Any]] = {}
    errors: list[BaseException] = []

    def take(name: str) -> None:
        baton.acquire(name)
        torch.set_rng_state(rng[name])
        since[name] = time.perf_counter()

    def give(name: str) -> None:
        if cuda:
            torch.cuda.synchronize()
        held[name] += time.perf_counter() - since[name]
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

    threads = [
        threading.Thread(target=worker, args=(name,), name=f"as_speed-{name}") for name in names
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
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


# -- report -----------------------------------------------------------------------------------
def summarize(results: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per variant: medians over repeats, and the median over repeats of the ratio to softmax
    taken within each repeat (the variants of a repeat ran back to back)."""
    keys = (
        "train_s",
        "lib_train_seconds",
        "wall_s",
        "eval_s",
        "micro_s",
        "step_s",
        "recheck_s",
        "other_s",
        "t_micro_median",
        "t_step_median",
    )
    summary: dict[str, dict[str, Any]] = {}
    base = results.get("softmax")
    for variant, runs in results.items():
        # .get: JSON written before a key existed (--from-json) reads it as None
        row: dict[str, Any] = {k: median_or_none([r.get(k) for r in runs]) for k in keys}
        for k in (
            "optimizer_steps",
            "micro_batches",
            "samples_fwd_bwd",
            "samples_with_grad",
            "samples_rechecked",
            "rechecks_active",
            "masked_ratio",
            "masked_ratio_last_epoch",
            "final_accum",
            "val_accuracy",
            "test_accuracy",
            "n_evals",
            "n_train",
            "per_epoch",
        ):
            row[k] = runs[0].get(k)
        row["deterministic"] = all(
            r["test_accuracy"] == runs[0]["test_accuracy"]
            and r["optimizer_steps"] == runs[0]["optimizer_steps"]
            for r in runs
        )
        row["train_s_repeats"] = [r["train_s"] for r in runs]
        if base is not None:
            for k in ("train_s", "lib_train_seconds", "step_s"):
                row[f"{k}_ratio"] = median_or_none(
                    [None if r[k] is None else r[k] / b[k] for r, b in zip(runs, base)]
                )
            row["steps_ratio"] = row["optimizer_steps"] / base[0]["optimizer_steps"]
        summary[variant] = row
    return summary


def median_or_none(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else statistics.median(values)


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def model_ratios(
    summary: dict[str, dict[str, Any]], probe: dict[str, float] | None
) -> dict[str, Any]:
    """What the per-unit costs predict: time = S*(t_first + t_step) + (M - S)*t_accum, for M
    micro-batches in S optimizer steps; the step share is softmax's S*t_step over its time."""
    if probe is None or "softmax" not in summary:
        return {}

    def predicted(row):
        m, s = row["micro_batches"], row["optimizer_steps"]
        return s * (probe["first"] + probe["step"]) + (m - s) * probe["accum"]

    base = predicted(summary["softmax"])
    out = {"step_share_softmax": summary["softmax"]["micro_batches"] * probe["step"] / base}
    for variant, row in summary.items():
        out[f"predicted_ratio_{variant}"] = predicted(row) / base
    return out


def print_report(
    args,
    machine: str,
    summary,
    probe,
    model,
    tokenize_s: float,
    *,
    threads: int | None = None,
    torch_version: str | None = None,
) -> None:
    threads = torch.get_num_threads() if threads is None else threads
    print(f"\nmachine: {machine}; torch {torch_version or torch.__version__}; threads {threads}")
    print(
        f"config: {args.dataset} {args.backbone} layers={args.num_layers or 'all'} "
        f"train={summary[next(iter(summary))]['n_train']} samples x {args.epochs:g} epochs, "
        f"max_length={args.max_length}, batch={args.batch_size}, lr={args.lr:g}, "
        f"delta={args.delta:g}, lam={args.lam:g}, max_accum={args.max_accum_steps}, "
        f"seed={args.seed}, repeats={args.repeats}, "
        f"tokenize once: {tokenize_s:.1f} s"
    )
    print(
        f"\nTiming, {args.schedule} schedule (medians over repeats; ratios to softmax taken "
        "within each repeat, then the median)\n"
    )
    print(
        "| variant | train s (excl. eval) | x softmax | lib train_seconds | x softmax "
        "| optimizer steps | x softmax "
        "| micro-batches | fwd+bwd s | opt-step s | other s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")

    def ratio(r: dict[str, Any], k: str) -> str:
        return fmt(r.get(k), ".3f")

    for v, r in summary.items():
        print(
            f"| {v} | {r['train_s']:.1f} | {ratio(r, 'train_s_ratio')} | "
            f"{fmt(r['lib_train_seconds'], '.1f')} | "
            f"{ratio(r, 'lib_train_seconds_ratio')} | {r['optimizer_steps']} | "
            f"{ratio(r, 'steps_ratio')} | "
            f"{r['micro_batches']} | {r['micro_s']:.1f} | {r['step_s']:.1f} | {r['other_s']:.1f} |"
        )
    print("\nSamples and accuracy\n")
    print(
        "| variant | samples fwd+bwd | samples with a gradient | re-checked (active) "
        "| re-check s | masked (all) | masked (last epoch) "
        "| final accum steps | val acc | test acc | evals | eval s (excluded) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for v, r in summary.items():
        print(
            f"| {v} | {r['samples_fwd_bwd']} | {r['samples_with_grad']} | "
            f"{fmt(r.get('samples_rechecked'), 'd')} ({fmt(r.get('rechecks_active'), 'd')}) | "
            f"{fmt(r.get('recheck_s'), '.1f')} | "
            f"{r['masked_ratio']:.1%} | "
            f"{r['masked_ratio_last_epoch']:.1%} | {r['final_accum']} | {r['val_accuracy']:.4f} | "
            f"{r['test_accuracy']:.4f} | {r['n_evals']} | {r['eval_s']:.1f} |"
        )
    print(
        "\nOver training (first repeat): masked ratio / optimizer steps / "
        "largest accumulation steps / val acc, per epoch\n"
    )
    rows = {v: r["per_epoch"] for v, r in summary.items()}
    n_epochs = max(len(r) for r in rows.values())
    print("| epoch | " + " | ".join(rows) + " |")
    print("|---|" + "---|" * len(rows))
    for e in range(n_epochs):
        cells = []
        for _, r in rows.items():
            if e < len(r):
                x = r[e]
                acc = "-" if x["val_accuracy"] is None else f"{x['val_accuracy']:.3f}"
                cells.append(
                    f"{x['masked_ratio']:.1%} / {x['optimizer_steps']} / {x['accum_max']} / {acc}"
                )
            else:
                cells.append("")
        print(f"| {e + 1} | " + " | ".join(cells) + " |")
    if args.repeats > 1:
        print(
            "\ntrain s per repeat: "
            + "; ".join(
                f"{v}: " + ", ".join(f"{t:.1f}" for t in r["train_s_repeats"])
                for v, r in summary.items()
            )
        )
        if not all(r["deterministic"] for r in summary.values()):
            print(
                "note: accuracy or steps differed between repeats (non-deterministic kernels); "
                "the first repeat's are shown"
            )
    print("\nPer-unit costs (median seconds)\n")
    print("| variant | micro-batch (in run) | optimizer step (in run) |")
    print("|---|---|---|")
    for v, r in summary.items():
        print(f"| {v} | {r['t_micro_median']:.4f} | {r['t_step_median']:.4f} |")
    if probe:
        print(
            f"\ninterleaved probe ({args.probe_rounds} rounds): "
            f"micro-batch starting a window {probe['first']:.4f} s, "
            f"accumulating micro-batch {probe['accum']:.4f} s, "
            f"optimizer step {probe['step']:.4f} s "
            f"(step / first micro-batch = {probe['step'] / probe['first']:.3f})"
        )
    if model:
        print(
            "optimizer steps' share of softmax's training time, from the probe: "
            f"{model['step_share_softmax']:.1%}"
        )
        print(
            "time ratio to softmax the probe's unit costs predict: "
            + ", ".join(f"{v} {model[f'predicted_ratio_{v}']:.3f}" for v in summary)
        )


def plot(path: str, results: dict[str, list[dict[str, Any]]], args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax2 = ax.twinx()
    colors = {"as_softmax": "tab:blue", "as_speed": "tab:orange", "softmax": "tab:gray"}
    for variant in ("as_softmax", "as_speed"):
        if variant not in results:
            continue
        run = results[variant][0]
        curve, n_train = run["curve"], run["n_train"]
        bin_size = max(args.batch_size, n_train // 10)  # 10 points per epoch
        xs, ys, acc_active, acc_masked, edge = [], [], 0, 0, bin_size
        for m in curve:
            acc_active, acc_masked = acc_active + m["active"], acc_masked + m["masked"]
            if m["samples"] >= edge or m is curve[-1]:
                xs.append(m["samples"] / n_train)
                ys.append(acc_masked / max(1, acc_active))
                acc_active, acc_masked, edge = 0, 0, edge + bin_size
        ax.plot(xs, ys, color=colors[variant], label=f"{variant}: masked ratio")
        evals = run["metrics_jsonl"]
        ax.scatter(
            [e["samples_seen"] / n_train for e in evals],
            [e["masked_ratio"] for e in evals],
            color=colors[variant],
            marker="o",
            s=25,
            zorder=3,
        )
        if variant == "as_speed":
            ax2.step(
                [m["samples"] / n_train for m in curve],
                [m["accum"] for m in curve],
                where="post",
                color=colors[variant],
                linestyle="--",
                label="as_speed: accumulation steps",
            )
    ax.set_xlabel("epochs (training samples seen / training set size)")
    ax.set_ylabel("masked ratio (fully masked rows / rows)")
    ax.set_ylim(0, 1)
    # AS-Speed's request round(lam / (1 - r)) reaches k micro-batches once the masked ratio r of a
    # window is at least 1 - lam / (k - 0.5): mark those levels.
    for k in range(2, args.max_accum_steps + 1):
        level = 1 - args.lam / (k - 0.5)
        if 0 < level < 1:
            ax.axhline(level, color="tab:orange", linewidth=0.6, linestyle=":")
            ax.text(
                0.01,
                level + 0.01,
                f"masked ratio for {k} accumulation steps",
                fontsize=7,
                color="tab:orange",
                transform=ax.get_yaxis_transform(),
            )
    ax2.set_ylabel("accumulation steps (micro-batches per optimizer step)")
    ax2.set_ylim(0, args.max_accum_steps + 0.5)
    lines = ax.get_legend_handles_labels(), ax2.get_legend_handles_labels()
    ax.legend(lines[0][0] + lines[1][0], lines[0][1] + lines[1][1], loc="upper left", fontsize=8)
    ax.set_title(
        f"{args.dataset}, {args.backbone} (layers={args.num_layers or 'all'}), "
        f"delta={args.delta:g}, "
        f"lam={args.lam:g}, s={args.max_accum_steps}; dots: metrics.jsonl per evaluation",
        fontsize=9,
    )
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def mean_interval(values: list[float]) -> tuple[float, float]:
    """Mean and half-width of its 95% t-interval (``astune.confirm.stats.t_interval``; 0 for a
    single value)."""
    interval = t_interval(values)
    return interval.mean, interval.half_width if interval.n > 1 else 0.0


def seed_table(results: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per variant over seeds: the training-time ratio to softmax (and to softmax_grouped when
    run; paired by seed), test accuracy, its difference to AS-Softmax's (paired by seed), the
    share of samples computed and the re-check forwards, each as (mean, 95% half-width)."""
    base, grouped = results.get("softmax"), results.get("softmax_grouped")
    reference = results.get("as_softmax")
    table = {}
    for variant, runs in results.items():
        row = {
            "seeds": [r["seed"] for r in runs],
            "test_accuracy": mean_interval([r["test_accuracy"] for r in runs]),
            "computed_share": mean_interval(
                [r["samples_fwd_bwd"] / r["samples_seen"] for r in runs]
            ),
            "train_s": mean_interval([r["train_s"] for r in runs]),
            "rechecked": mean_interval([r["samples_rechecked"] for r in runs]),
            "rechecks_active": mean_interval([r["rechecks_active"] for r in runs]),
        }
        if base is not None:
            row["time_ratio"] = mean_interval(
                [r["train_s"] / b["train_s"] for r, b in zip(runs, base)]
            )
            row["steps_ratio"] = mean_interval(
                [r["optimizer_steps"] / b["optimizer_steps"] for r, b in zip(runs, base)]
            )
        if grouped is not None:
            row["time_ratio_grouped"] = mean_interval(
                [r["train_s"] / b["train_s"] for r, b in zip(runs, grouped)]
            )
        if reference is not None:
            row["acc_minus_as_softmax"] = mean_interval(
                [r["test_accuracy"] - b["test_accuracy"] for r, b in zip(runs, reference)]
            )
        table[variant] = row
    return table


def print_seed_table(table: dict[str, dict[str, Any]], args) -> None:
    n = len(next(iter(table.values()))["seeds"])
    print(f"\nOver {n} seed(s): mean +- 95% t-interval (ratios and differences paired by seed)\n")
    print(
        "| variant | train s | time x softmax | time x softmax_grouped | steps x softmax "
        "| samples computed | re-check forwards (active) | test acc | test acc - as_softmax |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    pm = lambda x, spec: f"{format(x[0], spec)} +- {format(x[1], spec)}"  # noqa: E731
    opt = lambda x, spec: "-" if x is None else pm(x, spec)  # noqa: E731
    for v, r in table.items():
        rechecks = f"{r['rechecked'][0]:.0f} ({r['rechecks_active'][0]:.0f})"
        print(
            f"| {v} | {pm(r['train_s'], '.1f')} | {opt(r.get('time_ratio'), '.3f')} | "
            f"{opt(r.get('time_ratio_grouped'), '.3f')} | {opt(r.get('steps_ratio'), '.3f')} | "
            f"{pm(r['computed_share'], '.1%')} | {rechecks} | {pm(r['test_accuracy'], '.4f')} | "
            f"{opt(r.get('acc_minus_as_softmax'), '+.4f')} |"
        )


def plot_computed(path: str, results: dict[str, list[dict[str, Any]]], args) -> None:
    """Share of the visited samples that went through the model, per tenth of an epoch, for
    each skipping variant and seed; AS-Softmax's masked ratio for reference."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    colors = {
        "as_skip": "tab:green",
        "as_speed_skip": "tab:red",
        "as_skip_represented": "tab:purple",
        "as_skip_v1": "tab:orange",
        "as_skip_flat": "tab:brown",
        "as_skip_grouped": "tab:olive",
        "as_skip_soft": "tab:cyan",
        "infobatch": "tab:gray",
        "as_softmax": "tab:blue",
    }
    for variant in ("as_softmax", *SKIP_VARIANTS, "infobatch"):
        for k, run in enumerate(results.get(variant, [])):
            curve, n_train = run["curve"], run["n_train"]
            edge, step, xs, ys, num, den = 0, max(1, n_train // 10), [], [], 0, 0
            for m in curve:
                if variant == "as_softmax":
                    num, den = num + m["masked"], den + m["active"]
                else:
                    num, den = num + m.get("computed", 0), den + m.get("visited", 0)
                if m["samples"] >= edge + step or m is curve[-1]:
                    xs.append(m["samples"] / n_train)
                    ys.append(num / max(1, den))
                    edge, num, den = m["samples"], 0, 0
            label = (
                None
                if k
                else f"{variant}: masked ratio"
                if variant == "as_softmax"
                else f"{variant}: samples computed / visited"
            )
            ax.plot(xs, ys, color=colors[variant], alpha=0.8, linewidth=1, label=label)
    ax.set_xlabel("epochs (training samples seen / training set size)")
    ax.set_ylabel("share")
    ax.set_ylim(0, 1.05)
    ax.legend(loc="lower left", fontsize=8)
    ax.set_title(
        f"AS-Skip on {args.dataset}: one line per seed; delta={args.delta:g}, "
        f"keep={_or_default(args.skip_keep, 'skip_keep')}, "
        f"anneal={_or_default(args.skip_anneal, 'skip_anneal')}",
        fontsize=9,
    )
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _or_default(value: float | None, field: str) -> float:
    from astune.config import TRAIN_FIELDS

    return TRAIN_FIELDS[field].default if value is None else value


def machine_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name()
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name}, {os.cpu_count()} CPUs"


def replay(args: argparse.Namespace) -> dict[str, Any]:
    """The report and plot of a saved run (its own settings; this call's --plot)."""
    report = json.loads(Path(args.from_json).read_text())
    saved = argparse.Namespace(**{**report["args"], "plot": args.plot})
    print_report(
        saved,
        report["machine"],
        report["summary"],
        report["probe"],
        report["model"],
        report["tokenize_s"],
        threads=report["threads"],
        torch_version=report["torch"],
    )
    if "seeds" in report:
        print_seed_table(report["seeds"], saved)
    if args.plot:
        plot(args.plot, report["runs"], saved)
        print(f"\nplot: {args.plot}")
    if args.skip_plot:
        plot_computed(args.skip_plot, report["runs"], saved)
        print(f"skip plot: {args.skip_plot}")
    return report


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.from_json:
        return replay(args)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    base = base_config(args)
    base.validate()
    start = time.perf_counter()
    data = load_encoded(base)
    tokenize_s = time.perf_counter() - start
    out = Path(args.output_dir)
    device = torch.device(
        "cuda"
        if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
        else "cpu"
    )
    print(
        f"{args.dataset}: {len(data.splits['train'])} train, "
        f"{len(data.splits['validation'])} validation, "
        f"{len(data.splits['test'])} test; tokenized in {tokenize_s:.1f} s; "
        f"device {machine_name(device)}",
        file=sys.stderr,
    )

    probe = None
    if args.probe_rounds:
        probe = cost_probe(
            variant_config(base, "softmax", args, out / "probe"), data, args.probe_rounds
        )
        print(f"probe: {probe}", file=sys.stderr)

    results: dict[str, list[dict[str, Any]]] = {v: [] for v in args.variants}
    for rep in range(args.repeats):
        k = rep % len(args.variants)
        order = args.variants[k:] + args.variants[:k]
        configs = {v: variant_config(base, v, args, out / f"r{rep}" / v) for v in order}
        if args.seeds > 1:  # one seed per repeat: model head, batch order, dropout, re-checks
            for config in configs.values():
                config.seed = args.seed + rep
        if args.schedule == "interleaved":
            done = train_interleaved(configs, data, args.keep_checkpoints)
        else:
            done = {}
            for v in order:
                done[v] = train_variant(v, configs[v], data, args.keep_checkpoints)
                gc.collect()
        for v in order:
            r = done[v]
            results[v].append(r)
            print(
                f"repeat {rep} {v}: train {r['train_s']:.1f} s "
                f"(eval {r['eval_s']:.1f} s excluded), "
                f"{r['optimizer_steps']} steps, test acc {r['test_accuracy']:.4f}",
                file=sys.stderr,
            )
        del done
        gc.collect()

    summary = summarize(results)
    model = model_ratios(summary, probe)
    print_report(args, machine_name(device), summary, probe, model, tokenize_s)
    seeds = seed_table(results)
    print_seed_table(seeds, args)
    if args.plot:
        plot(args.plot, results, args)
        print(f"\nplot: {args.plot}")
    if args.skip_plot:
        plot_computed(args.skip_plot, results, args)
        print(f"skip plot: {args.skip_plot}")
    report = {
        "args": vars(args),
        "machine": machine_name(device),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "tokenize_s": tokenize_s,
        "probe": probe,
        "model": model,
        "summary": summary,
        "seeds": seeds,
        "runs": results,
    }
    if args.json == "-":
        json.dump(report, sys.stdout, indent=1)
    elif args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
