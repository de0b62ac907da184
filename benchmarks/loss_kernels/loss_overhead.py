"""Forward+backward cost of AS-Softmax against F.cross_entropy, side by side in one process.

For each (N, C) it times, interleaved and repeated, forward+backward of
  - ``F.cross_entropy`` (the reference cost),
  - ``astune.losses.as_softmax_loss`` (the torch custom autograd function),
  - ``as_softmax_loss_triton`` (the fused Triton kernel; on CUDA, or on the CPU under
    ``TRITON_INTERPRET=1``),
  - ``torch.compile`` of ``as_softmax_loss`` (``--no-compile`` leaves it out),
  - a straightforward AS-Softmax (softmax, gather, compare, ``torch.where(-inf)``, cross-entropy),
and prints medians (CUDA events on a GPU), the ratios to cross-entropy, the bytes each keeps for
backward, the peak memory of one forward+backward above the inputs (on the CPU each measured in
a fresh subprocess, the only way to read a CPU peak: ``ru_maxrss``), and the memory floor: the
bytes a fused forward+backward must move (read the logits and labels, write the gradient)
divided by a device-to-device copy's bandwidth, measured in the same process.

Usage: python -m benchmarks.loss_kernels.loss_overhead [--device cpu|cuda]
       [--dtype float32|bfloat16]
       [--rounds 5] [--delta 0.3] [--sizes 16384x5,16384x151,8192x5201] [--no-compile]
       [--json FILE]
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
from benchmarks.common import provenance
from benchmarks.common.harness import ROOT

SIZES = "16384x5,16384x151,8192x5201"
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
CPU_PEAK_LOSSES = ("cross_entropy", "as_softmax", "naive")  # those a subprocess rebuilds


def naive_as_softmax(logits: torch.Tensor, labels: torch.Tensor, delta: float) -> torch.Tensor:
    """The straightforward implementation the custom function replaces."""
    probs = logits.float().softmax(dim=1)
    p_target = probs.gather(1, labels.unsqueeze(1))
    masked = (p_target - probs) > delta
    return F.cross_entropy(logits.masked_fill(masked, float("-inf")), labels)


def triton_runs(device: str) -> bool:
    """Whether the fused kernel can run on ``device`` here; says why not when it cannot."""
    try:
        import triton  # noqa: F401
    except ImportError:
        print("# triton is not installed: no as_softmax_triton column")
        return False
    if device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        print("# CPU without TRITON_INTERPRET=1: no as_softmax_triton column")
        return False
    return True


def make_losses(delta: float, *, triton: bool = False, compiled: bool = False) -> dict[str, LossFn]:
    losses: dict[str, LossFn] = {
        "cross_entropy": lambda x, y: F.cross_entropy(x, y),
        "as_softmax": lambda x, y: as_softmax_loss(x, y, delta),
    }
    if triton:
        from astune.losses.as_softmax_triton import as_softmax_loss_triton

        losses["as_softmax_triton"] = lambda x, y: as_softmax_loss_triton(x, y, delta)
    if compiled:
        losses["as_softmax_compiled"] = torch.compile(
            lambda x, y: as_softmax_loss(x, y, delta), dynamic=False
        )
    losses["naive"] = lambda x, y: naive_as_softmax(x, y, delta)
    return losses


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """``"16384x5,8192x5201"`` -> ``[(16384, 5), (8192, 5201)]``."""
    try:
        return [(int(n), int(c)) for n, c in (size.split("x") for size in text.split(","))]
    except ValueError:
        raise SystemExit(f"--sizes takes NxC[,NxC...], e.g. {SIZES}; got {text!r}") from None


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
    losses: dict[str, LossFn], logits, labels, rounds: int, device: str, block: int = 5
) -> dict[str, float]:
    """Median seconds per forward+backward over ``rounds * block`` steps of each loss.

    The variants take turns in rounds, so drift in the machine's speed hits all alike; within a
    round each runs ``block`` steps back to back (after one untimed), as in a training loop, so
    that one variant's allocations do not set the allocator state the next one is timed in. On
    CUDA each step lies between two events on the stream: the time includes launch gaps.
    """
    samples: dict[str, list[float]] = {name: [] for name in losses}
    for _ in range(rounds):
        for name, fn in losses.items():
            step(fn, logits, labels)
            sync(device)
            if device == "cuda":
                events: list[list[torch.cuda.Event]] = []
                for _ in range(block):
                    pair = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
                    pair[0].record()
                    step(fn, logits, labels)
                    pair[1].record()
                    events.append(pair)
                torch.cuda.synchronize()
                samples[name] += [begin.elapsed_time(end) / 1e3 for begin, end in events]
                continue
            for _ in range(block):
                start = time.perf_counter()
                step(fn, logits, labels)
                samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(times) for name, times in samples.items()}


def copy_bandwidth(device: str, nbytes: int = 1 << 28, repeats: int = 10) -> float:
    """Bytes a second a device-to-device copy moves (read plus write), the median of
    ``repeats`` copies of ``nbytes``."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    times = []
    for _ in range(repeats + 1):
        sync(device)
        start = time.perf_counter()
        if device == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end) / 1e3)
        else:
            dst.copy_(src)
            times.append(time.perf_counter() - start)
    return 2 * nbytes / statistics.median(times[1:])


def floor_bytes(n: int, c: int, dtype: torch.dtype) -> int:
    """What a fused forward+backward must move: the logits read once, the gradient written once,
    the int64 labels read."""
    return 2 * n * c * dtype.itemsize + 8 * n


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
        "import torch; from benchmarks.loss_kernels import loss_overhead as b;"
        f"x, y = b.make_inputs({n}, {c}, 'cpu', getattr(torch, '{dtype}'));"
        f"fn = b.make_losses({delta})['{name}']; b.step(fn, x[:64], y[:64]);"
        "base = b.rss_kib('VmRSS'); open('/proc/self/clear_refs', 'w').write('5');"
        "b.step(fn, x, y); print((b.rss_kib('VmHWM') - base) * 1024)"
    )
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=ROOT,  # where ``benchmarks`` imports from
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


def warm_up(losses: dict[str, LossFn], logits, labels, device: str) -> dict[str, float]:
    """One step of each loss (torch.compile compiles, triton JITs); seconds each took. A loss
    that fails is dropped from ``losses`` with one printed line."""
    first = {}
    for name, fn in list(losses.items()):
        start = time.perf_counter()
        try:
            step(fn, logits, labels)
            sync(device)
        except Exception as err:  # a benchmark column, not the run: report it and go on
            print(f"# {name} dropped at {tuple(logits.shape)}: {type(err).__name__}: {err}"[:300])
            del losses[name]
            continue
        first[name] = time.perf_counter() - start
    return first


def measure(losses, n: int, c: int, args, bandwidth: float) -> dict:
    """One row: medians, ratios to cross-entropy, saved and peak bytes, the memory floor."""
    dtype = getattr(torch, args.dtype)
    logits, labels = make_inputs(n, c, args.device, dtype)
    here = dict(losses)
    first = warm_up(here, logits, labels, args.device)
    times = time_interleaved(here, logits, labels, args.rounds, args.device, args.block)
    saved = {k: saved_bytes(fn, logits, labels) for k, fn in here.items() if "compiled" not in k}
    if args.device == "cuda":
        peak = {name: peak_bytes_cuda(fn, logits, labels) for name, fn in here.items()}
    else:
        peak = {
            name: peak_bytes_subprocess(name, n, c, args.delta, args.dtype)
            for name in here
            if name in CPU_PEAK_LOSSES
        }
    floor = floor_bytes(n, c, dtype) / bandwidth
    return {
        "n": n,
        "c": c,
        "dtype": args.dtype,
        "masked_fraction": masked_fraction(logits, labels, args.delta),
        "ms": {k: v * 1e3 for k, v in times.items()},
        "ratio_to_ce": {k: v / times["cross_entropy"] for k, v in times.items()},
        "floor_ms": floor * 1e3,
        "ratio_to_floor": {k: v / floor for k, v in times.items()},
        "first_call_s": first,
        "saved_mb": {k: v / 2**20 for k, v in saved.items()},
        "peak_mb": {k: v / 2**20 for k, v in peak.items()},
    }


def print_row(row: dict, names: list[str]) -> None:
    cells = [f"{row['n']:>6} x {row['c']:<5} {row['masked_fraction']:>6.2f}"]
    for name in names:
        ms, ratio = row["ms"].get(name), row["ratio_to_ce"].get(name)
        peak = row["peak_mb"].get(name)
        cells.append(
            "-"
            if ms is None
            else f"{ms:.3f} ms {ratio:.2f}x peak {'-' if peak is None else f'{peak:.1f}M'}"
        )
    ratio = row["ratio_to_floor"].get("as_softmax_triton")
    cells.append(
        f"floor {row['floor_ms']:.3f} ms" + (f" triton/floor {ratio:.2f}" if ratio else "")
    )
    print(" | ".join(cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (>= 5)")
    parser.add_argument("--block", type=int, default=5, help="timed steps a loss runs a round")
    parser.add_argument("--delta", type=float, default=0.3)
    parser.add_argument("--sizes", default=SIZES, help="NxC[,NxC...]")
    parser.add_argument("--no-compile", action="store_true", help="no torch.compile column")
    parser.add_argument("--json", help="also write the rows to this file (after every size)")
    args = parser.parse_args()
    losses = make_losses(args.delta, triton=triton_runs(args.device), compiled=not args.no_compile)
    machine = (
        torch.cuda.get_device_name()
        if args.device == "cuda"
        else platform.processor() or platform.machine()
    )
    bandwidth = copy_bandwidth(args.device)
    print(
        f"# device={args.device} ({machine}), threads={torch.get_num_threads()}, "
        f"dtype={args.dtype}, delta={args.delta}, torch={torch.__version__}, "
        f"copy bandwidth {bandwidth / 1e9:.0f} GB/s (read + write)"
    )
    names = list(losses)
    print(f"{'N x C':>13} {'masked':>6} | " + " | ".join(names) + " | memory floor")
    rows = []
    for n, c in parse_sizes(args.sizes):
        rows.append(measure(losses, n, c, args, bandwidth))
        print_row(rows[-1], names)
        if args.json:
            report = {"machine": machine, "torch": torch.__version__, "rows": rows}
            report["copy_bandwidth_gbs"] = bandwidth / 1e9
            with open(args.json, "w") as fh:
                json.dump(report, fh, indent=2)
            provenance.record(args.json, inputs=provenance.generated_inputs(args), machine=machine)


if __name__ == "__main__":
    main()
