"""The fused losses against torch's, eager and captured in a CUDA graph (issue 63 item 2).

Two families, each timed forward+backward on the same inputs, the variants taking turns in
``--rounds`` interleaved rounds of ``--block`` steps (one untimed first), CUDA events around
each step (on the CPU: perf_counter, eager only):

- single-label at ``--sizes`` (N x C): ``F.cross_entropy`` against ``as_softmax_loss_triton``;
- multi-label at ``--multi-sizes`` (GoEmotions' 28 classes): ``F.binary_cross_entropy_with_logits``
  (float 0/1 targets) against ``multilabel_rows_triton`` (bool targets: the form that needs no
  check of the values, hence no host sync) and the torch multi-label AS-Softmax.

``eager``: a new leaf every step, ``loss.backward()``, so host work (Python, autograd, launches)
counts. ``graph``: the forward and backward captured once in a CUDA graph (a static leaf; its
gradient rewritten by every replay) and replayed: what is left is the kernels and their gaps, the
way a training step captured whole would run them. ``compiled`` (single-label only): each loss
through ``torch.compile``, forward and backward, as ``--compile``'s step holds it (issue 69):
cross-entropy against AS-Softmax's torch function with delta a 0-dim tensor, the form inductor
fuses; on a card also in a CUDA graph (``compiled_graph``: the compiled loss captured as above).
Each row gives the median ms over all timed steps, and per round the ratio of the medians to the
reference (CE or BCE): their median and the 95% interval of their geometric mean.

Usage: python -m benchmarks.loss_kernels.loss_graphs [--device cuda] [--dtypes bfloat16,float32]
       [--sizes 16384x5,16384x151,8192x5201] [--multi-sizes 16384x28] [--rounds 7]
       [--block 10] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.common.intervals import ratio_ci
from benchmarks.loss_kernels.loss_overhead import make_inputs, parse_sizes

Step = Callable[[torch.Tensor], torch.Tensor]  # leaf logits -> loss


def single_label(labels: torch.Tensor, delta: float) -> dict[str, Step]:
    from astune.losses.as_softmax_triton import as_softmax_loss_triton

    return {
        "cross_entropy": lambda x: F.cross_entropy(x, labels),
        "as_softmax_triton": lambda x: as_softmax_loss_triton(x, labels, delta),
    }


def compiled_single_label(labels: torch.Tensor, delta: float) -> dict[str, Step]:
    """Cross-entropy and AS-Softmax as ``--compile``'s step traces them (delta a tensor input)."""
    from astune.losses.as_softmax import as_softmax_loss

    torch._dynamo.reset()
    delta_input = torch.tensor(delta, device=labels.device)
    return {
        "cross_entropy": torch.compile(lambda x: F.cross_entropy(x, labels), dynamic=False),
        "as_softmax_compiled": torch.compile(
            lambda x: as_softmax_loss(x, labels, delta_input, kernel="torch"), dynamic=False
        ),
    }


def multi_label(n: int, c: int, device: str, dtype, delta: float) -> tuple[torch.Tensor, dict]:
    """Logits and the three losses of GoEmotions-like rows: one to three positives a row."""
    from astune.losses.multilabel import multilabel_as_softmax_loss
    from astune.losses.multilabel_triton import multilabel_rows_triton

    gen = torch.Generator().manual_seed(0)
    positive = torch.rand(n, c, generator=gen) < 1.5 / c
    positive[torch.arange(n), torch.randint(0, c, (n,), generator=gen)] = True
    logits = torch.randn(n, c, generator=gen) * 2.0 + positive * 3.0
    positive = positive.to(device)
    target = positive.to(dtype)
    losses = {
        "bce_with_logits": lambda x: F.binary_cross_entropy_with_logits(x, target),
        "multilabel_triton": lambda x: multilabel_rows_triton(x, positive, delta).loss,
        "multilabel_torch": lambda x: multilabel_as_softmax_loss(
            x, positive, delta, kernel="torch"
        ),
    }
    return logits.to(device=device, dtype=dtype), losses


def eager(fn: Step, x: torch.Tensor) -> Callable[[], None]:
    def run() -> None:
        fn(x.detach().requires_grad_()).backward()

    return run


def graphed(fn: Step, x: torch.Tensor) -> Callable[[], None]:
    """Forward and backward of ``fn`` captured in a CUDA graph (after 3 warm-up steps on a side
    stream, as torch.cuda.graph's documentation does); the replay."""
    leaf = x.detach().clone().requires_grad_()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            leaf.grad = None
            fn(leaf).backward()
    torch.cuda.current_stream().wait_stream(side)
    leaf.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn(leaf).backward()
    return graph.replay


def time_rounds(runs: dict[str, Callable[[], None]], rounds: int, block: int, cuda: bool) -> dict:
    samples: dict[str, list[list[float]]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            run()
            if cuda:
                torch.cuda.synchronize()
                pairs = []
                for _ in range(block):
                    begin, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                    begin.record()
                    run()
                    end.record()
                    pairs.append((begin, end))
                torch.cuda.synchronize()
                samples[name].append([b.elapsed_time(e) for b, e in pairs])
            else:
                times = []
                for _ in range(block):
                    start = time.perf_counter()
                    run()
                    times.append((time.perf_counter() - start) * 1e3)
                samples[name].append(times)
    return samples


def row_of(samples: dict, reference: str) -> dict:
    ms = {k: statistics.median(t for r in v for t in r) for k, v in samples.items()}
    per_round = {
        k: [statistics.median(a) / statistics.median(b) for a, b in zip(v, samples[reference])]
        for k, v in samples.items()
        if k != reference
    }
    return {
        "ms": ms,
        "ratio_of_medians": {k: ms[k] / ms[reference] for k in ms},
        "per_round_ratios": per_round,
        "ratio_ci": {k: ratio_ci(v) for k, v in per_round.items()},
    }


def measure(name: str, runs_of: Callable[[str], dict], modes: list[str], args, meta) -> list:
    rows = []
    for mode in modes:
        runs, variants = {}, runs_of(mode)  # once: a compiled mode compiles its losses here
        for variant, fn in variants.items():
            try:  # a column that cannot run (or be captured) is reported and left out
                runs[variant] = fn()
                runs[variant]()
            except Exception as err:
                print(f"# {name} {mode} {variant} dropped: {type(err).__name__}: {err}"[:300])
        reference = next(iter(variants))
        if reference not in runs:
            continue
        samples = time_rounds(runs, args.rounds, args.block, args.device == "cuda")
        row = dict(meta, mode=mode, **row_of(samples, reference))
        rows.append(row)
        cells = [
            f"{k} {v:.4f} ms ({row['ratio_of_medians'][k]:.2f}x)" for k, v in row["ms"].items()
        ]
        print(f"{name} {mode}: " + " | ".join(cells), flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    p.add_argument("--dtypes", default="bfloat16,float32")
    p.add_argument("--sizes", default="16384x5,16384x151,8192x5201")
    p.add_argument("--multi-sizes", default="16384x28,512x28")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--block", type=int, default=10)
    p.add_argument("--delta", type=float, default=0.3)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    cuda = args.device == "cuda"
    modes = ["eager", "graph", "compiled", "compiled_graph"] if cuda else ["eager", "compiled"]
    report: dict = {"torch": torch.__version__, "rows": []}
    report["machine"] = torch.cuda.get_device_name() if cuda else "cpu"
    import triton

    report["triton"] = triton.__version__
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        for n, c in parse_sizes(args.sizes):
            x, labels = make_inputs(n, c, args.device, dtype)
            meta = dict(kind="single", n=n, c=c, dtype=dtype_name)

            def runs_of(mode: str, x=x, labels=labels) -> dict:
                compiled = mode.startswith("compiled")
                losses = (compiled_single_label if compiled else single_label)(labels, args.delta)
                wrap = graphed if mode.endswith("graph") else eager
                return {k: (lambda f=f: wrap(f, x)) for k, f in losses.items()}

            report["rows"] += measure(f"{dtype_name} {n}x{c}", runs_of, modes, args, meta)
            write(args.json, report)
        for n, c in parse_sizes(args.multi_sizes):
            x, losses = multi_label(n, c, args.device, dtype, args.delta)
            meta = dict(kind="multi", n=n, c=c, dtype=dtype_name)
            report["rows"] += measure(
                f"{dtype_name} multi {n}x{c}",
                lambda mode, x=x, losses=losses: {
                    k: (lambda f=f: (eager if mode == "eager" else graphed)(f, x))
                    for k, f in losses.items()
                },
                [m for m in modes if not m.startswith("compiled")], args, meta,
            )  # fmt: skip
            write(args.json, report)


def write(path: Path | None, report: dict) -> None:
    if path is not None:
        path.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
