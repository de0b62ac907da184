"""A CPU training step with glibc's default allocator against one that keeps large freed
blocks in the heap (``astune/training/allocator.py``), measured side by side.

Side by side means two processes at once, one per core, one torch thread each: ``default``
(glibc as it comes) and ``kept`` (:func:`astune.training.allocator.keep_freed_blocks` called
first). They cannot take turns in one process: once a large block has been kept, the heap
hands it to the other setting too (measured: 0 faults a step after switching back). Each
process builds the same model and batch, runs ``--warmup`` untimed steps, then ``--steps`` timed
ones. A step is made as the loop makes one: forward, a summed cross-entropy, backward and the
loop's ``update_weights`` (scale, clip, fused AdamW), on random token ids of SST-5's length.
It prints the median step time of each, their ratio and the page faults a step
(``ru_minflt``), and writes them to ``--json`` (default: results/cpu_allocator_cpu.json).

Usage: python -m benchmarks.trial_speed.cpu_allocator [--layers 1 6] [--steps 40] [--warmup 5]
[--json FILE]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

from astune.backbones import build_model, model_logits
from astune.training.allocator import keep_freed_blocks
from astune.training.compute import update_weights
from benchmarks.common import provenance
from benchmarks.common.harness import machine_line
from benchmarks.trial_speed import RESULTS

ARMS = ("default", "kept")
OUT = RESULTS / "cpu_allocator_cpu.json"


def make_step(layers: int, batch: int, tokens: int):
    """One training step of a MiniLM with ``layers`` layers on a (batch, tokens) batch."""
    torch.manual_seed(0)
    model = build_model("minilm", task="single_label", num_labels=5, num_layers=layers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(1000, 20000, (batch, tokens))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    labels = torch.randint(0, 5, (batch,))

    def step() -> None:
        loss = F.cross_entropy(model_logits(model, inputs), labels, reduction="sum")
        loss.backward()
        update_weights(model, optimizer, rows=batch, max_grad_norm=1.0, lr=1e-4)

    return step


def measure(arm: str, layers: int, *, steps: int, warmup: int, batch: int, tokens: int) -> dict:
    """Median step time (ms) and page faults a step of one arm, in this process."""
    if arm == "kept" and not keep_freed_blocks():
        raise SystemExit("glibc refused the thresholds; this benchmark needs glibc")
    torch.set_num_threads(1)
    step = make_step(layers, batch, tokens)
    for _ in range(warmup):  # the heap settles within a few steps (tests/test_allocator.py)
        step()
    times, faults = [], []
    for _ in range(steps):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return {"step_ms": 1e3 * statistics.median(times), "faults": statistics.median(faults)}


def side_by_side(args: argparse.Namespace, layers: int) -> dict:
    """Both arms at once, each in a fresh process."""
    procs = {
        arm: subprocess.Popen(
            [sys.executable, __file__, "--arm", arm, "--layers", str(layers)]
            + ["--steps", str(args.steps), "--warmup", str(args.warmup)]
            + ["--batch", str(args.batch), "--tokens", str(args.tokens)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for arm in ARMS
    }
    got = {}
    for arm, proc in procs.items():
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"the {arm!r} process failed (exit {proc.returncode})")
        got[arm] = json.loads(out.strip().splitlines()[-1])
    ratio = got["kept"]["step_ms"] / got["default"]["step_ms"]
    return {"layers": layers, "arms": got, "kept_over_default": ratio, "steps": args.steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 6])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--json", default=str(OUT), help="where the rows go")
    parser.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)  # one side, internal
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    if args.arm:
        sizes = dict(steps=args.steps, warmup=args.warmup, batch=args.batch, tokens=args.tokens)
        print(json.dumps(measure(args.arm, args.layers[0], **sizes)))
        return
    rows = []
    for layers in args.layers:
        row = side_by_side(args, layers)
        rows.append(row)
        d, k = row["arms"]["default"], row["arms"]["kept"]
        print(
            f"{layers} layer(s): default {d['step_ms']:.1f} ms ({d['faults']:.0f} faults a "
            f"step), kept {k['step_ms']:.1f} ms ({k['faults']:.0f}), kept / default "
            f"{row['kept_over_default']:.3f}  ({args.steps} steps each)",
            flush=True,
        )
    machine = machine_line("cpu", threads=1)  # each arm runs one torch thread
    Path(args.json).write_text(
        json.dumps({"args": vars(args), "machine": machine, "rows": rows}, indent=1)
    )
    provenance.record(args.json, inputs=provenance.generated_inputs(args), machine=machine)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
