"""Compiled / eager time an epoch (issue 69): ``--compile`` against the eager model, the same
config, data and seed, side by side in one process.

For each MiniLM depth, one eager and one compiled run are built; the compiled one first trains
an untimed epoch (torch compiles there: its seconds are reported apart). Then each round times
one epoch of each, the order alternating round by round; the ratio is per round, with the
median and the 95% interval of the geometric mean. A second compiled model of the same shapes is
compiled at the end in this process, and again in a new process (``--first-epoch``), with
inductor's on-disk cache now warm: what a search's later trials on the node pay. The run has an
empty cache of its own (``TORCHINDUCTOR_CACHE_DIR``), so its first compile is cold.

    python -m benchmarks.trial_speed.compiled --data-dir ../shared/data --layers 2 6 \
        --rounds 3 --json benchmarks/trial_speed/results/compiled_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from astune.config import TrainConfig
from astune.data.encoded import load_encoded
from astune.training import Run
from benchmarks.common.intervals import ratio_ci


def epoch_seconds(run: Run) -> float:
    """Train ``run`` one epoch (its micro-batches and optimizer steps, no evaluation)."""
    start = time.perf_counter()
    for batch, visit in run.batches.epoch(run.pos):
        run.micro_step(batch, visit)
        if run.window.batches >= run.accum_steps:
            run.optimizer_step()
    if run.window.batches:
        run.optimizer_step()
    run.settle_windows()  # what an epoch's end waits for anyway
    run.pos.epoch, run.pos.batch = run.pos.epoch + 1, 0
    return time.perf_counter() - start


def config(args: argparse.Namespace, layers: int, compiled: bool, out: str) -> TrainConfig:
    return TrainConfig(
        dataset="sst5", data_dir=args.data_dir, backbone="minilm", num_layers=layers,
        max_length=args.max_length, max_train_samples=args.max_train_samples,
        max_eval_samples=16, epochs=args.rounds + 2, batch_size=args.batch_size,
        lr=args.lr, loss=args.loss, seed=args.seed, device=args.device, compile=compiled,
        checkpoint_every="end", output_dir=out,
    )  # fmt: skip


def measure(args: argparse.Namespace, layers: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as out:
        data = load_encoded(config(args, layers, False, out))
        runs = {mode: Run(config(args, layers, mode == "compiled", out), data=data)
                for mode in ("eager", "compiled")}  # fmt: skip
        first = {mode: epoch_seconds(run) for mode, run in runs.items()}  # compiles; warms up
        times: dict[str, list[float]] = {"eager": [], "compiled": []}
        for r in range(args.rounds):
            for mode in ("eager", "compiled") if r % 2 == 0 else ("compiled", "eager"):
                times[mode].append(epoch_seconds(runs[mode]))
                seconds = times[mode][-1]
                print(f"{layers} layers, round {r + 1}, {mode}: {seconds:.2f} s", flush=True)
        ratios = [c / e for c, e in zip(times["compiled"], times["eager"])]
        cold = runs["compiled"].compiled.compile_seconds()
        again = Run(config(args, layers, True, out), data=data)
        warm_epoch = epoch_seconds(again)
    new_process = first_epoch_in_a_new_process(args, layers)
    return {
        "layers": layers,
        "epoch_s": times,
        "first_epoch_s": first,
        "ratio_per_round": ratios,
        "ratio_median": statistics.median(ratios),
        "ratio_ci": ratio_ci(ratios),
        "compile_s_cold": cold,
        "compile_s_warm_cache": again.compiled.compile_seconds(),
        "first_epoch_s_warm_cache": warm_epoch,
        "new_process": new_process,
    }


def first_epoch_in_a_new_process(args: argparse.Namespace, layers: int) -> dict[str, float]:
    """A fresh process's compiled first epoch and compile seconds (inductor's disk cache)."""
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
             if k in ("data_dir", "max_train_samples", "max_length", "batch_size", "lr", "loss",
                      "seed", "device") and v is not None]  # fmt: skip
    if args.threads:
        flags.append(f"--threads={args.threads}")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.trial_speed.compiled", *flags, "--layers", str(layers),
         "--first-epoch"], capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def first_epoch(args: argparse.Namespace) -> None:
    """Print the compiled first epoch of ``args.layers[0]`` layers as JSON (a new process)."""
    with tempfile.TemporaryDirectory() as out:
        run = Run(config(args, args.layers[0], True, out))
        seconds = epoch_seconds(run)
    print(json.dumps({"first_epoch_s": seconds, "compile_s": run.compiled.compile_seconds()}))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--layers", type=int, nargs="+", default=[2, 6])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-train-samples", type=int, default=512)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--loss", default="as_softmax")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--json", default="")
    p.add_argument("--first-epoch", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.first_epoch:
        return first_epoch(args)
    # a cache of its own, empty: the first compile is cold whatever ran on the machine before
    cache = tempfile.TemporaryDirectory(prefix="inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache.name
    from benchmarks.common.harness import commit

    started_at = commit()  # the tree may change while it runs (docs written meanwhile)
    rows = [measure(args, layers) for layers in args.layers]
    for row in rows:
        ci = row["ratio_ci"]
        print(
            f"{row['layers']} layers: compiled / eager {row['ratio_median']:.3f} "
            f"[{ci['low']}, {ci['high']}]; compile {row['compile_s_cold']:.0f} s cold, "
            f"{row['compile_s_warm_cache']:.0f} s again in this process, "
            f"{row['new_process']['compile_s']:.0f} s in a new one (inductor's disk cache)"
        )
    if args.json:
        from benchmarks.common.harness import machine_line
        from benchmarks.common.provenance import data_inputs, record

        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
        record(args.json, inputs=data_inputs(args.data_dir, ["sst5"]), commit=started_at,
               machine=machine_line(args.device, threads=torch.get_num_threads()))  # fmt: skip


if __name__ == "__main__":
    main()
