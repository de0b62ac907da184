"""Count the kernels of one loss forward+backward and their device time (torch.profiler).

For each (N, C) it profiles a few steps of ``F.cross_entropy``, today's torch AS-Softmax
(``as_softmax_loss``) and, where triton runs, the fused kernel (``as_softmax_loss_triton``),
and reports per step: the number of device kernels (memcpy and memset included), their summed
device time, and the kernels by name. On the CPU there are no device kernels: it counts the
top-level ATen operators instead and says so (a smoke test of this script).

Usage: python -m benchmarks.loss_kernels.profile_loss [--device cuda|cpu] [--dtype bfloat16|float32]
       [--sizes 16384x5,16384x151,8192x5201] [--steps 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.common import provenance
from benchmarks.loss_kernels.loss_overhead import (
    make_inputs,
    make_losses,
    parse_sizes,
    step,
    triton_runs,
)


def _device_events(prof, device: str) -> list:
    """The profile's kernels on ``device`` (CUDA), or its top-level ATen operators (CPU)."""
    if device == "cuda":
        kind = torch.autograd.DeviceType.CUDA
        return [e for e in prof.events() if e.device_type == kind]
    return [e for e in prof.events() if e.name.startswith("aten::") and e.cpu_parent is None]


def profile_one(loss_fn, logits, labels, device: str, steps: int) -> dict:
    """Kernels per step, their device microseconds per step, and the top names per step."""
    for _ in range(3):  # warm-up: triton's compile, cuBLAS/cuDNN handles, the allocator
        step(loss_fn, logits, labels)
    if device == "cuda":
        torch.cuda.synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step(loss_fn, logits, labels)
        if device == "cuda":
            torch.cuda.synchronize()
    events = _device_events(prof, device)
    names = Counter(e.name[:80] for e in events)
    micros = sum(e.time_range.elapsed_us() for e in events)
    return {
        "kernels_per_step": len(events) / steps,
        "device_us_per_step": micros / steps if device == "cuda" else None,
        "by_name": {name: count / steps for name, count in names.most_common(12)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--sizes", default="16384x5,16384x151,8192x5201")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--delta", type=float, default=0.3)
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()
    if args.device == "cpu":
        print("# CPU: no device kernels to count; counting top-level ATen operators instead")
    losses = make_losses(args.delta, triton=triton_runs(args.device), compiled=False)
    versions = {"torch": torch.__version__, "device": args.device}
    if args.device == "cuda":
        versions["gpu"] = torch.cuda.get_device_name()
    rows = []
    for n, c in parse_sizes(args.sizes):
        logits, labels = make_inputs(n, c, args.device, getattr(torch, args.dtype))
        for name, fn in losses.items():
            row = {"n": n, "c": c, "dtype": args.dtype, "loss": name}
            row |= profile_one(fn, logits, labels, args.device, args.steps)
            rows.append(row)
            us = row["device_us_per_step"]
            print(
                f"{n:>6} x {c:<5} {name:<20} kernels/step {row['kernels_per_step']:>5.1f}  "
                f"device us/step {'-' if us is None else f'{us:.1f}':>8}  "
                + ", ".join(f"{k} x{v:g}" for k, v in list(row["by_name"].items())[:6]),
                flush=True,
            )
        if args.json:  # after every size, so that a run cut short keeps what it measured
            Path(args.json).write_text(json.dumps({"versions": versions, "rows": rows}, indent=2))
            inputs = provenance.generated_inputs(args)
            provenance.record(args.json, inputs=inputs, machine=json.dumps(versions))


if __name__ == "__main__":
    main()
