"""astune's training loop against ``transformers.Trainer`` (issue 45 item 5): one epoch of the
same model, data slice, padding, batch size, precision, optimizer and schedule, softmax.

    python -m benchmarks.trainer_loop.trainer_side_by_side [--rounds 3] [--max-train-samples 2000]
        [--num-layers 2] [--max-length 64] [--batch-size 16] [--threads 2] [--device cpu]

Both sides, fixed before any run:

- the model: astune's ``build_model`` (MiniLM, the first ``--num-layers`` layers, a fresh
  classification head seeded alike); the Trainer trains that same module;
- the data: SST-5's first ``--max-train-samples`` training rows, tokenized once by astune
  (``--max-length`` tokens), each batch padded to its longest example (the Trainer through
  ``DataCollatorWithPadding`` on the same token ids), batches drawn at random;
- AdamW, fused (``adamw_torch_fused``), lr 2e-5, weight decay 0.01 on matrices only, a linear
  decay without warm-up, gradients clipped at 1.0, the model's float32 (``--device cuda``:
  bf16 autocast on both);
- evaluation and checkpoints off: astune's epoch-end evaluation and its final test run on 16
  rows and fall outside the clock; the Trainer evaluates and saves nothing.

Time: wall seconds of the first epoch, from its first batch to its last optimizer step (astune:
its hooks; the Trainer: ``on_epoch_begin`` to ``on_epoch_end``). Each side runs in a process of
its own (neither inherits the other's settings, astune's allocator tuning for one), the sides
alternating for ``--rounds`` rounds; the result is the median per side and the median of the
per-round ratios, written to benchmarks/<study>/results/trainer_side_by_side_<device>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import provenance
from benchmarks.common.harness import machine_line
from benchmarks.trainer_loop import RESULTS

LR, WEIGHT_DECAY, MAX_GRAD_NORM, SEED = 2e-5, 0.01, 1.0, 0
SIDES = ("astune", "trainer")


def astune_config(args: argparse.Namespace, out: str) -> Any:
    from astune.config import TrainConfig

    return TrainConfig(
        dataset="sst5",
        data_dir=args.data_dir,
        backbone="minilm",
        num_layers=args.num_layers,
        max_length=args.max_length,
        max_train_samples=args.max_train_samples,
        max_eval_samples=16,
        epochs=1,
        batch_size=args.batch_size,
        lr=LR,
        weight_decay=WEIGHT_DECAY,
        max_grad_norm=MAX_GRAD_NORM,
        lr_warmup_ratio=0.0,
        loss="softmax",
        seed=SEED,
        device=args.device,
        precision="auto",
        output_dir=out,
        checkpoint_every="end",
        compile=args.compile,
    ).validate()


def time_astune(args: argparse.Namespace) -> dict[str, Any]:
    """One epoch of astune's loop: seconds from the first micro-step to the epoch's end."""
    import tempfile

    from astune.training import Run
    from astune.training.hooks import LoopHooks

    class Clock(LoopHooks):
        start: float | None = None
        end: float | None = None

        def on_micro_step_start(self, run, batch, visit) -> None:
            if self.start is None:
                self.start = time.perf_counter()

        def on_evaluate_start(self, run) -> None:
            if self.end is None:
                _sync(args.device)
                self.end = time.perf_counter()

    clock = Clock()
    with tempfile.TemporaryDirectory() as out:
        run = Run(astune_config(args, out), hooks=[clock])
        final = run.train()
    return {"epoch_seconds": clock.end - clock.start, "steps": final["optimizer_steps"]}


def time_trainer(args: argparse.Namespace) -> dict[str, Any]:
    """One epoch of ``transformers.Trainer`` on the same model and token ids."""
    import tempfile

    import torch
    from transformers import (
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    from astune.backbones.models import build_model
    from astune.backbones.registry import resolve_backbone
    from astune.data.encoded import load_encoded

    config = astune_config(args, tempfile.mkdtemp())
    data = load_encoded(config)
    rows = [
        {"input_ids": ids, "labels": int(data.splits["train"].labels[i])}
        for i, ids in enumerate(_token_ids(data))
    ]
    torch.manual_seed(SEED)  # the head's initialisation, as astune seeds it
    model = build_model("minilm", task="single_label", num_labels=data.spec.num_labels,
                        num_layers=args.num_layers)  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(resolve_backbone("minilm"))

    class Clock(TrainerCallback):
        start = end = None

        def on_epoch_begin(self, *_a, **_k):
            self.start = time.perf_counter()

        def on_epoch_end(self, *_a, **_k):
            _sync(args.device)
            self.end = time.perf_counter()

    clock = Clock()
    with tempfile.TemporaryDirectory() as out:
        training = TrainingArguments(
            output_dir=out,
            per_device_train_batch_size=args.batch_size,
            num_train_epochs=1,
            learning_rate=LR,
            weight_decay=WEIGHT_DECAY,
            max_grad_norm=MAX_GRAD_NORM,
            lr_scheduler_type="linear",
            warmup_steps=0,
            optim="adamw_torch_fused",
            eval_strategy="no",
            save_strategy="no",
            report_to=[],
            logging_strategy="no",
            seed=SEED,
            bf16=args.device == "cuda",
            use_cpu=args.device == "cpu",
            dataloader_num_workers=0,
            disable_tqdm=True,
            torch_compile=args.compile,
        )
        trainer = Trainer(
            model=model,
            args=training,
            train_dataset=rows,
            data_collator=DataCollatorWithPadding(tokenizer),
            callbacks=[clock],
        )
        state = trainer.train()
    return {"epoch_seconds": clock.end - clock.start, "steps": state.global_step}


def _token_ids(data: Any) -> list[list[int]]:
    """Each training example's token ids, as astune tokenized them."""
    split = data.splits["train"]
    offsets = split.offsets.tolist()
    return [split.ids[offsets[i] : offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def one_side(args: argparse.Namespace) -> None:
    """Run ``args.side`` once in this process and print its JSON line."""
    import torch

    torch.set_num_threads(args.threads)
    timed = time_astune(args) if args.side == "astune" else time_trainer(args)
    print(json.dumps({"side": args.side, **timed}), flush=True)


def compare(args: argparse.Namespace, argv: list[str], save=None) -> dict[str, Any]:
    """Alternate the sides, each in a fresh process, for ``args.rounds`` rounds, or fewer when
    the next round would end past ``args.max_seconds`` (judged by the longest round so far);
    ``save`` gets the result so far after every round (a stopped run keeps its rounds)."""
    rounds: list[dict[str, dict[str, Any]]] = []
    start, longest = time.perf_counter(), 0.0
    result: dict[str, Any] = {}
    for r in range(args.rounds):
        if args.max_seconds and time.perf_counter() - start + longest > args.max_seconds:
            print(f"round {r + 1}: not started (--max-seconds {args.max_seconds})", flush=True)
            break
        began = time.perf_counter()
        order = SIDES if r % 2 == 0 else SIDES[::-1]  # neither always goes first
        sides = {}
        for side in order:
            done = subprocess.run(
                [sys.executable, __file__, *argv, "--side", side],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                raise SystemExit(f"{side} failed:\n{done.stderr[-3000:]}")
            sides[side] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"round {r + 1} {side}: {sides[side]['epoch_seconds']:.2f} s", flush=True)
        rounds.append(sides)
        longest = max(longest, time.perf_counter() - began)
        result = summarize_rounds(rounds)
        if save is not None:
            save(result)
    return result


def summarize_rounds(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Medians per side, the per-round ratios astune / Trainer, their median and the 95%
    interval of their geometric mean (``common.intervals.ratio_ci``): at most 1.0x is shown when the
    interval's ``high`` is at most 1."""
    from benchmarks.common.intervals import ratio_ci

    per_side = {s: [r[s]["epoch_seconds"] for r in rounds] for s in SIDES}
    ratios = [r["astune"]["epoch_seconds"] / r["trainer"]["epoch_seconds"] for r in rounds]
    return {
        "median_epoch_seconds": {s: statistics.median(v) for s, v in per_side.items()},
        "per_round": per_side,
        "ratio_median": statistics.median(ratios),
        "ratios": ratios,
        "ratio_ci": ratio_ci(ratios),
        "rounds_done": len(rounds),
        "steps": {s: rounds[0][s]["steps"] for s in SIDES},
    }


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-train-samples", type=int, default=2000)
    p.add_argument("--num-layers", type=int, default=2)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument(
        "--compile",
        action="store_true",
        help="both sides compiled: astune's --compile, the Trainer's torch_compile=True (each "
        "side's epoch then holds its compile, from inductor's cache after the first round)",
    )
    p.add_argument("--data-dir", default=None)
    p.add_argument("--output", type=Path, default=None)
    p.add_argument(
        "--max-seconds", type=float, default=0.0, help="start no round that would end past this"
    )
    p.add_argument("--side", choices=SIDES, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.rounds < 1:
        raise SystemExit(f"--rounds must be >= 1, got {args.rounds}")
    return args


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    if args.side is not None:
        return one_side(args)
    head = {
        "machine": machine_line(args.device, threads=args.threads, libraries=("transformers",)),
        "settings": {k: v for k, v in vars(args).items() if k not in ("side", "output")},
    }
    out = args.output or RESULTS / f"trainer_side_by_side_{args.device}.json"
    save = lambda so_far: out.write_text(json.dumps(head | so_far, indent=2) + "\n")  # noqa: E731
    result = head | compare(args, argv, save)
    if "ratios" not in result:
        raise SystemExit("no round fitted in --max-seconds")
    med, ci = result["median_epoch_seconds"], result["ratio_ci"]
    interval = "" if ci["low"] is None else f", 95% interval [{ci['low']:.3f}, {ci['high']:.3f}]"
    inputs = provenance.data_inputs(args.data_dir, ["sst5"])
    provenance.record(out, inputs=inputs, machine=result["machine"])
    print(
        f"astune {med['astune']:.2f} s, Trainer {med['trainer']:.2f} s an epoch; astune / "
        f"Trainer {result['ratio_median']:.3f} (median of {result['rounds_done']} rounds; "
        f"geometric mean {ci['geomean']:.3f}{interval}); wrote {out}"
    )


if __name__ == "__main__":
    main()
