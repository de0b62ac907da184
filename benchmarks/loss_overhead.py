"""Forward+backward cost of AS-Softmax against F.cross_entropy, side by side in one process.

For each (N, C) it times, interleaved and repeated, forward+backward of
  - ``F.cross_entropy`` (the reference cost),
  - ``astune.losses.as_softmax_loss`` (the custom autograd function),
  - a straightforward AS-Softmax (softmax, gather, compare, ``torch.where(-inf)``, cross-entropy),
and prints medians, the ratios to cross-entropy, the bytes each keeps for backward, and the peak
memory of one forward+backward above the inputs (each measured in a fresh subprocess, the only
way to read a CPU peak: ``ru_maxrss``).

Usage: python benchmarks/loss_overhead.py [--device cpu|cuda] [--dtype float32|bfloat16]
       [--repeats 30] [--delta 0.3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from astune.losses import as_softmax_loss

SIZES = [(16384, 5), (16384, 151), (8192, 5201)]
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def naive_as_softmax(logits: torch.Tensor, labels: torch.Tensor, delta: float) -> torch.Tensor:
    """The straightforward implementation the custom function replaces."""
    probs = logits.float().softmax(dim=1)
    p_target = probs.gather(1, labels.unsqueeze(1))
    masked = (p_target - probs) > delta
    return F.cross_entropy(logits.masked_fill(masked, float("-inf")), labels)


def make_losses(delta: float) -> dict[str, LossFn]:
    return {
        "cross_entropy": lambda x, y: F.cross_entropy(x, y),
        "as_softmax": lambda x, y: as_softmax_loss(x, y, delta),
        "naive": lambda x, y: naive_as_softmax(x, y, delta),
    }


def make_inputs(
    n: int, c: int, device: str, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of a half-trained classifier: the target leads by a margin, so some rows are
    masked."""
    gen = torch.Generator().manual_seed(0)
    labels = torch.randint(0, c, (n,), generator=gen)
    logits = torch.randn(n, c, generator=gen) * 2.0
    logits[torch.arange(n), labels] += torch.rand(n, generator=gen) * 8.0
    return logits.to(device=device, dtype=dtype), labels.to(device)


def step(loss_fn: LossFn, logits: torch.Tensor, labels: torch.Tensor) -> None:
    leaf = logits.detach().requires_grad_()
    loss_fn(leaf, labels).backward()


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_interleaved(
    losses: dict[str, LossFn], logits, labels, repeats: int, device: str, block: int = 5
) -> dict[str, float]:
    """Median seconds per forward+backward.

    The variants take turns in rounds, so drift in the machine's speed hits all alike; within a
    round each runs ``block`` steps back to back (the first untimed), as in a training loop, so
    that one variant's allocations do not set the allocator state the next one is timed in.
    """
    samples: dict[str, list[float]] = {name: [] for name in losses}
    for _ in range(max(1, repeats // block)):
        for name, fn in losses.items():
            step(fn, logits, labels)
            for _ in range(block):
                sync(device)
                start = time.perf_counter()
                step(fn, logits, labels)
                sync(device)
                samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(times) for name, times in samples.items()}


def saved_bytes(loss_fn: LossFn, logits: torch.Tensor, labels: torch.Tensor) -> int:
    """Bytes of the tensors autograd keeps for backward, other than the logits themselves."""
    leaf = logits.detach().requires_grad_()
    seen: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() != leaf.untyped_storage().data_ptr():
            seen[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_fn(leaf, labels)
    loss.backward()
    return sum(seen.values())


def peak_bytes_subprocess(name: str, n: int, c: int, delta: float, dtype: str) -> int:
    """Peak resident-memory growth of one forward+backward, in a fresh process (CPU).

    glibc is told to map every large block on its own so that freed memory leaves the process
    and the high-water mark (reset through /proc/self/clear_refs) sees only this step.
    """
    code = (
        "import sys, torch; sys.path.insert(0, 'benchmarks'); import loss_overhead as b;"
        f"x, y = b.make_inputs({n}, {c}, 'cpu', getattr(torch, '{dtype}'));"
        f"fn = b.make_losses({delta})['{name}']; b.step(fn, x[:64], y[:64]);"
        "base = b.rss_kib('VmRSS'); open('/proc/self/clear_refs', 'w').write('5');"
        "b.step(fn, x, y); print((b.rss_kib('VmHWM') - base) * 1024)"
    )
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return int(out.stdout.strip().splitlines()[-1])


def rss_kib(field: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS now, VmHWM the high-water mark)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def peak_bytes_cuda(loss_fn: LossFn, logits: torch.Tensor, labels: torch.Tensor) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step(loss_fn, logits, labels)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def masked_fraction(logits: torch.Tensor, labels: torch.Tensor, delta: float) -> float:
    from astune.losses import as_softmax_with_stats

    _, stats = as_softmax_with_stats(logits, labels, delta)
    return stats.n_masked / stats.n_active


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--delta", type=float, default=0.3)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    losses = make_losses(args.delta)
    machine = (
        torch.cuda.get_device_name()
        if args.device == "cuda"
        else platform.processor() or platform.machine()
    )
    print(
        f"# device={args.device} ({machine}), threads={torch.get_num_threads()}, "
        f"dtype={args.dtype}, "
        f"delta={args.delta}, torch={torch.__version__}"
    )
    header = f"{'N x C':>13} {'masked':>7} {'CE ms':>8} {'AS ms':>8} {'AS/CE':>6} {'naive/CE':>8} "
    header += f"{'saved CE':>9} {'saved AS':>9} {'peak CE':>9} {'peak AS':>9} {'peak naive':>10}"
    print(header)
    rows = []
    for n, c in SIZES:
        logits, labels = make_inputs(n, c, args.device, dtype)
        times = time_interleaved(losses, logits, labels, args.repeats, args.device)
        saved = {name: saved_bytes(fn, logits, labels) for name, fn in losses.items()}
        if args.device == "cuda":
            peak = {name: peak_bytes_cuda(fn, logits, labels) for name, fn in losses.items()}
        else:
            peak = {
                name: peak_bytes_subprocess(name, n, c, args.delta, args.dtype) for name in losses
            }
        row = {
            "n": n,
            "c": c,
            "masked_fraction": masked_fraction(logits, labels, args.delta),
            "ms": {k: v * 1e3 for k, v in times.items()},
            "ratio_as": times["as_softmax"] / times["cross_entropy"],
            "ratio_naive": times["naive"] / times["cross_entropy"],
            "saved_mb": {k: v / 2**20 for k, v in saved.items()},
            "peak_mb": {k: v / 2**20 for k, v in peak.items()},
        }
        rows.append(row)
        print(
            f"{n:>6} x {c:<5} {row['masked_fraction']:>7.2f} {row['ms']['cross_entropy']:>8.2f} "
            f"{row['ms']['as_softmax']:>8.2f} {row['ratio_as']:>6.2f} {row['ratio_naive']:>8.2f} "
            f"{row['saved_mb']['cross_entropy']:>8.1f}M {row['saved_mb']['as_softmax']:>8.1f}M "
            f"{row['peak_mb']['cross_entropy']:>8.1f}M {row['peak_mb']['as_softmax']:>8.1f}M "
            f"{row['peak_mb']['naive']:>9.1f}M",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
