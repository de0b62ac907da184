"""Softmax vs AS-Softmax on spelling correction with the paper's 5,201-wide head (issue 23,
item 5): time per optimizer step, the memory the loss keeps for backward, and the scores.

The data is the synthetic spelling-correction set (astune/data/synthetic_csc.py: SST-5
sentences as letters, look-alikes swapped at 15%); its candidate set (the 26 letters) is padded
with CJK characters to ``--candidates`` so that the head and the loss have the paper's width,
as a real SIGHAN candidate set would (most of its rows never see a label here). Both losses train
on the same tokenized data in one process, rotated order per seed. Memory: the bytes of the
tensors autograd saves for backward in one forward of a training batch through the model and
the loss (``torch.autograd.graph.saved_tensors_hooks``; each storage counted once), which is
what the loss adds to a step's peak; on CUDA also the peak allocated memory of the run.

Usage (CPU, the scale of benchmarks/RESULTS.md):
  HF_HUB_OFFLINE=1 python -m benchmarks.loss_kernels.csc_speed --data-dir ../shared/data --seeds 3
  --threads 1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from astune.config import TrainConfig
from astune.confirmation.stats import paired_difference, t_interval
from astune.data.encoded import load_encoded
from astune.data.synthetic_csc import synthetic_csc
from astune.training import fit
from astune.training.compute import choose_device, forward, loss_counts, model_parts
from benchmarks.common import provenance
from benchmarks.common.harness import config_from_args, machine_line
from benchmarks.loss_kernels import RESULTS

VARIANTS = ("softmax", "as_softmax")
CJK_FIRST = 0x4E00  # the CJK Unified Ideographs block: filler candidates


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True, help="the folder holding sst5/")
    p.add_argument("--candidates", type=int, default=5201)
    p.add_argument("--n-train", type=int, default=512, help="sentences before the carve")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--num-layers", type=int, default=2)
    p.add_argument("--epochs", type=float, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--delta", type=float, default=0.3, help="AS-Softmax's (the paper's SIGHAN)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", default=str(RESULTS / "csc_speed_cpu.json"))
    args = p.parse_args(argv)
    if args.seeds < 2:
        p.error(f"--seeds must be at least 2 (an interval needs two runs), but got {args.seeds}")
    return args


def padded_set(root: Path, args: argparse.Namespace) -> Path:
    """The synthetic set with its candidates padded to ``--candidates`` characters."""
    folder = synthetic_csc(root / "letters", Path(args.data_dir) / "sst5", n_train=args.n_train)
    meta = json.loads((folder / "dataset.json").read_text())
    names = list(meta["label_names"])
    filler = (chr(CJK_FIRST + i) for i in range(args.candidates * 2))
    names += [c for c in filler if c not in names][: args.candidates - len(names)]
    meta["label_names"] = names
    (folder / "dataset.json").write_text(json.dumps(meta, ensure_ascii=False))
    return folder


def saved_bytes(config: TrainConfig, data: Any) -> tuple[int, int]:
    """Bytes autograd keeps for backward in one forward of the first training batch: through
    the model and the loss, and through the loss alone (from the logits)."""
    device = choose_device(config.device)
    parts = model_parts(config, data.spec, device)
    batch = next(iter(data.batches("train", config.batch_size)))
    logits, labels = forward(parts.model, batch, device=device, dtype=None)
    total = _saved(lambda: loss_counts(parts.loss_fn, logits, labels).loss.backward())
    leaf = logits.detach().requires_grad_()
    alone = _saved(lambda: loss_counts(parts.loss_fn, leaf, labels).loss.backward())
    model_only = _saved(lambda: forward(parts.model, batch, device=device, dtype=None))
    return model_only + total, alone


def _saved(step: Any) -> int:
    """The bytes of the storages autograd saves while ``step`` runs, each counted once."""
    seen: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        step()
    return sum(seen.values())


def one_run(config: TrainConfig, data: Any) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        final = fit(dataclasses.replace(config, output_dir=folder), data=data)
    return {
        "seconds_per_step": final["train_seconds"] / max(1, final["optimizer_steps"]),
        "test_correction_f1": float(final["test_correction_f1"]),
        "test_char_correction_f1": float(final["test_char_correction_f1"]),
        "peak_cuda_bytes": float(torch.cuda.max_memory_allocated())
        if torch.cuda.is_available()
        else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as root:
        folder = padded_set(Path(root), args)
        base = config_from_args(
            TrainConfig, args, dataset=str(folder), data_dir=None,  # the set is its own folder
            backbone="minilm", max_length=34, delta=args.delta,
        )  # fmt: skip
        data = load_encoded(base)
        configs = {v: dataclasses.replace(base, loss=v).validate() for v in VARIANTS}
        memory = {v: saved_bytes(c, data) for v, c in configs.items()}  # (step, loss alone)
        runs: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
        for seed in range(1, args.seeds + 1):
            for variant in VARIANTS[seed % 2 :] + VARIANTS[: seed % 2]:
                if torch.cuda.is_available():
                    torch.cuda.reset_peak_memory_stats()
                got = one_run(dataclasses.replace(configs[variant], seed=seed), data)
                runs[variant].append(got)
                print(f"  seed {seed} {variant:<10} {json.dumps(got)}", flush=True)
    machine = machine_line(base.device, threads=torch.get_num_threads())
    print(f"\nmachine: {machine}; wall {time.perf_counter() - started:.0f} s")
    print(report(runs, memory, data.spec.num_labels))
    Path(args.json).write_text(
        json.dumps({"args": vars(args), "machine": machine, "memory": memory, "runs": runs})
    )
    provenance.record(
        args.json, inputs=provenance.data_inputs(args.data_dir, ["sst5"]), machine=machine
    )
    print(f"wrote {args.json}")
    return 0


def report(
    runs: dict[str, list[dict[str, float]]], memory: dict[str, tuple[int, int]], width: int
) -> str:
    """A markdown table: per variant the mean +- 95% interval, AS-Softmax's paired ratios."""
    lines = [
        f"| loss ({width}-wide head) | s / optimizer step | saved for backward (MiB): step, "
        "loss alone | test correction F1 | test char correction F1 |",
        "|---|---|---|---|---|",
    ]
    for variant in VARIANTS:
        cells = [_interval([r[k] for r in runs[variant]], 4) for k in
                 ("seconds_per_step", "test_correction_f1", "test_char_correction_f1")]  # fmt: skip
        step, alone = (m / 2**20 for m in memory[variant])
        saved = f"{step:.1f}, {alone:.1f}"
        lines.append(f"| {variant} | {cells[0]} | {saved} | {cells[1]} | {cells[2]} |")
    ratio = [
        a["seconds_per_step"] / b["seconds_per_step"]
        for a, b in zip(runs["as_softmax"], runs["softmax"])
    ]
    diff = paired_difference(
        [r["test_char_correction_f1"] for r in runs["as_softmax"]],
        [r["test_char_correction_f1"] for r in runs["softmax"]],
    )
    lines.append("")
    lines.append(
        f"AS-Softmax / softmax time per step, paired by seed: {_interval(ratio, 3)}; memory "
        f"saved by the loss x{memory['as_softmax'][1] / memory['softmax'][1]:.2f}; char correction "
        f"F1 difference {diff.interval.mean:+.4f} [{diff.interval.low:+.4f}, "
        f"{diff.interval.high:+.4f}], p={diff.p_value:.3g}"
    )
    peaks = {v: max(r["peak_cuda_bytes"] for r in runs[v]) / 2**20 for v in VARIANTS}
    if any(peaks.values()):  # CUDA only
        lines.append(
            "peak CUDA memory of a run (MiB): "
            + ", ".join(f"{v} {m:.0f}" for v, m in peaks.items())
        )
    return "\n".join(lines)


def _interval(values: list[float], digits: int) -> str:
    interval = t_interval(values)
    half = (interval.high - interval.low) / 2
    return f"{interval.mean:.{digits}f} +- {half:.{digits}f}"


if __name__ == "__main__":
    raise SystemExit(main())
