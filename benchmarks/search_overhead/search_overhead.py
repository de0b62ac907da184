"""Search overhead: the wall time of a real search against the time its trials take.

A search of ``--num-samples`` short trials (SST-5, a 1-layer MiniLM on a training subset, FIFO,
``--max-concurrent`` trials of ``--cpus-per-trial`` CPUs) runs through ``run_search`` exactly as
``astune search`` runs it: a local Ray started and stopped by the search, Optuna TPE, a sqlite
MLflow store. It runs with ``reuse_actors`` on and off and with each ``--checkpoint-every``
policy, in one process, each search in its own folder. Nothing of Ray or astune is patched:
every number comes from the clock around ``run_search`` and from what the search leaves behind
(``_overhead_report.py``).

- wall W: the ``run_search(...)`` call (validation, tokenization, Ray start-up, trials, MLflow
  summary, ``ray.shutdown()``); K = ``--max-concurrent`` slots.
- fit time of a trial: Ray's ``time_total_s`` of its last report (the trial function: model
  build, training, evaluations, checkpoint writes, Ray's checkpoint copies, hand-offs).
- train time of a trial: astune's ``train_seconds`` (training steps only).
- overhead = 1 - summed time / (K x W), against fit time (what Ray and the driver add around the
  trials) and against train time (everything that is not a training step).
- bytes: what the trials wrote for resuming, as they measured it (``checkpoint_bytes``: each
  checkpoint's ``state.pt``, which Ray copies to storage, and each best-weights file, written
  to storage once), per trial and per search; and what the storage folder holds at the end.
- ``--reference``: one trial's fit alone in this process with 1 thread (the calibration).

Usage (this machine: 2 cores; about 10 minutes on a quiet machine):
  HF_HUB_OFFLINE=1 ASTUNE_DATA_DIR=../shared/data python -m
  benchmarks.search_overhead.search_overhead \\
      --num-samples 16 --max-concurrent 2 --cpus-per-trial 1 --reuse on \\
      --checkpoint-every eval,10m --json /tmp/search_overhead.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from astune.checkpoint_policy import CheckpointPolicy
from benchmarks.common import provenance
from benchmarks.common.harness import SEARCH_LIBRARIES, config_from_args, machine_line
from benchmarks.search_overhead import RESULTS
from benchmarks.search_overhead.overhead_report import (
    folder_bytes,
    plot_timeline,
    print_report,
    summarise,
    trial_rows,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = p.add_argument
    add("--num-samples", type=int, default=16, help="trials per search")
    add("--max-concurrent", type=int, default=2, help="trials at once (K)")
    add("--cpus-per-trial", type=float, default=1.0)
    add("--reuse", default="both", choices=["both", "on", "off"], help="reuse_actors")
    add("--order", default="on,off", help="order of the two searches with --reuse both")
    add("--checkpoint-every", default="eval,10m",
        help="checkpoint policies, comma-separated: one search each")  # fmt: skip
    add("--dataset", default="sst5")
    add("--data-dir", default=None, help="default: $ASTUNE_DATA_DIR")
    add("--backbone", default="minilm")
    add("--num-layers", type=int, default=1)
    add("--max-length", type=int, default=64)
    add("--max-train-samples", "--train-samples", type=int, default=1200,
        help="training subset (~30 s a trial here)")  # fmt: skip
    add("--max-eval-samples", "--eval-samples", type=int, default=200,
        help="validation and test subsets")  # fmt: skip
    add("--epochs", type=int, default=2, help="per trial; one evaluation and checkpoint each")
    add("--batch-size", type=int, default=16)
    add("--lr", type=float, default=1e-3)
    add("--seed", type=int, default=0)
    add("--reference", action=argparse.BooleanOptionalAction, default=True,
        help="first time one trial's fit alone in this process (1 thread)")  # fmt: skip
    add("--output-dir", default=None, help="searches' folders (default: a temporary one)")
    add("--keep-checkpoints", action="store_true", help="keep the *.pt files of the searches")
    add("--plot", default=str(RESULTS / "search_overhead.png"), help="PNG timeline ('' to skip)")
    add("--json", default=None, help="write every number to this file ('-': stdout)")
    add("--from-json", default=None, help="run nothing: print and plot an earlier --json")
    args = p.parse_args(argv)
    if min(args.num_samples, args.max_concurrent, args.max_train_samples, args.epochs) < 1:
        p.error("--num-samples, --max-concurrent, --max-train-samples and --epochs must be >= 1")
    order = [v.strip() for v in args.order.split(",") if v.strip()]
    if sorted(order) != ["off", "on"]:
        p.error(f"--order must name on and off once each, got {args.order!r}")
    reuse = order if args.reuse == "both" else [args.reuse]
    policies = [v.strip() for v in args.checkpoint_every.split(",") if v.strip()]
    for policy in policies:
        try:
            CheckpointPolicy(policy)
        except ValueError as err:
            p.error(str(err))
    args.variants = [(r, c) for c in policies for r in reuse]
    return args


def label(variant: tuple[str, str]) -> str:
    return f"reuse-{variant[0]}_ckpt-{variant[1]}"


def space_mapping(args: argparse.Namespace) -> dict[str, Any]:
    """tests/spaces/tiny.yaml's shape: FIFO, as_softmax (delta, AS-Speed) and softmax."""
    fixed = {"lr": args.lr, "batch_size": args.batch_size, "epochs": args.epochs}
    return {
        "extends": "default",
        "description": "benchmarks/search_overhead/search_overhead.py",
        "num_samples": args.num_samples,
        "losses": ["as_softmax", "softmax"],
        "scheduler": {"type": "none"},
        "params": {k: {"type": "fixed", "value": v} for k, v in fixed.items()},
        "loss_params": {
            "as_softmax": {
                "delta": {"type": "float", "low": 0.1, "high": 0.5, "step": 0.05},
                "warmup_ratio": {"type": "fixed", "value": 0.0},
            }
        },
        "speed_params": {
            "as_speed": {"type": "categorical", "choices": [True, False]},
            "lam": {"type": "float", "low": 1.0, "high": 2.0, "step": 0.5},
            "max_accum_steps": {"type": "int", "low": 2, "high": 3},
        },
        "seed_points": [],
    }


def run_variant(args: argparse.Namespace, variant: tuple[str, str], root: Path) -> dict[str, Any]:
    """One search with ``variant`` = (reuse_actors, checkpoint policy): its wall time, trials
    and bytes."""
    import yaml

    from astune.tuning.runner import SearchSettings, run_search

    reuse, policy = variant
    folder = root / label(variant)
    folder.mkdir(parents=True)
    space = folder / "space.yaml"
    space.write_text(yaml.safe_dump(space_mapping(args), sort_keys=False))
    settings = config_from_args(
        SearchSettings,
        args,
        space=str(space),
        epochs=None,  # the space fixes them, with the batch size and lr
        storage_path=str(folder / "ray"),
        tracking_uri=f"sqlite:///{folder / 'mlflow.db'}",
        name=f"overhead-{label(variant)}",
        scheduler="none",
        reuse_actors=reuse == "on",
        checkpoint_every=policy,
        console=False,
    )
    load_before = os.getloadavg()[0]
    t0 = time.time()
    summary = run_search(settings)
    wall = time.time() - t0
    rows = trial_rows(summary.experiment_path, summary.tracking_uri, summary.experiment)
    result = {
        "variant": label(variant),
        "t0": t0,
        **summarise(rows, wall, args.max_concurrent),
        "storage_bytes": folder_bytes(folder / "ray"),
        "storage_pt_bytes": folder_bytes(folder / "ray", ".pt"),
        "loadavg_before_after": [load_before, os.getloadavg()[0]],
        "rows": rows,
    }
    if not args.keep_checkpoints:
        for pt in folder.rglob("*.pt"):
            pt.unlink()
    return result


def reference_fit(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """One trial's fit alone in this process with 1 thread (the trials' thread count)."""
    import torch

    from astune.config import TrainConfig
    from astune.data.encoded import load_encoded
    from astune.training import Run

    config = config_from_args(
        TrainConfig,
        args,
        loss="as_softmax",
        delta=0.3,
        device="cpu",
        output_dir=str(root / "reference"),
    )
    data = load_encoded(config)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        t = time.perf_counter()
        run = Run(config, data=data)
        build = time.perf_counter() - t
        t = time.perf_counter()
        final = run.train()
        train = time.perf_counter() - t
    finally:
        torch.set_num_threads(threads)
    shutil.rmtree(root / "reference", ignore_errors=True)
    return {"build_s": build, "train_s": train, "train_seconds": final["train_seconds"]}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json:
        payload = json.loads(Path(args.from_json).read_text())
        finish(args, payload["reference"], payload["results"])
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if args.data_dir:
        args.data_dir = str(Path(args.data_dir).resolve())
    temporary = not args.output_dir
    root = Path(args.output_dir or tempfile.mkdtemp(prefix="search-overhead-")).resolve()
    root.mkdir(parents=True, exist_ok=True)
    for variant in args.variants:
        if (root / label(variant)).exists():
            raise SystemExit(f"{root / label(variant)} exists; choose another --output-dir")
    print(f"searches in {root}; load average {os.getloadavg()[0]:.2f}", flush=True)
    reference = reference_fit(args, root) if args.reference else None
    results = []
    for variant in args.variants:
        print(f"search {label(variant)} ...", flush=True)
        results.append(run_variant(args, variant, root))
    payload = {
        "command": " ".join(["python", *sys.argv]),
        "args": {k: v for k, v in vars(args).items()},
        "machine": machine_line("cpu", libraries=SEARCH_LIBRARIES),
        "reference": reference,
        "results": results,
    }
    if args.json == "-":
        json.dump(payload, sys.stdout, indent=1, default=str)
    elif args.json:
        Path(args.json).write_text(json.dumps(payload, indent=1, default=str))
        print(f"numbers: {args.json}")
    finish(args, reference, results)
    inputs = provenance.data_inputs(args.data_dir, [args.dataset])
    provenance.record_each([args.json, args.plot], inputs=inputs, machine=payload["machine"])
    if temporary:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def finish(args: argparse.Namespace, reference: dict | None, results: list[dict]) -> None:
    print_report(results, reference)
    if args.plot:
        plot_timeline(results, Path(args.plot))
        print(f"timeline: {args.plot}")


if __name__ == "__main__":
    sys.exit(main())
