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
  HF_HUB_OFFLINE=1 python -m benchmarks.trial_speed.as_speed --data-dir ../shared/data --num-layers
  2 \\
      --max-train-samples 2000 --max-length 64 --epochs 3 --threads 1
GPU (the paper's setting, the whole training set):
  python -m benchmarks.trial_speed.as_speed --data-dir ../shared/data --backbone bert-base-cased
  --full \\
      --max-length 128 --epochs 7 --device cuda --precision bf16 --repeats 3
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from astune.data.encoded import load_encoded
from benchmarks.common import provenance
from benchmarks.common.harness import machine_line
from benchmarks.trial_speed import RESULTS
from benchmarks.trial_speed.plots import plot, plot_computed
from benchmarks.trial_speed.report import (
    model_ratios,
    print_report,
    print_seed_table,
    seed_table,
    summarize,
)
from benchmarks.trial_speed.runs import cost_probe, train_interleaved, train_variant
from benchmarks.trial_speed.variants import VARIANTS, base_config, variant_config

DEFAULT_PLOT = RESULTS / "as_speed_masked.png"


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
    p.add_argument("--compile", action="store_true", help="the model through torch.compile")
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
        help="train nothing: print the report and draw the plot again from a file --json wrote "
        "(gzipped too: name.json.gz)",
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
    for name in ("max_train_samples", "max_eval_samples"):  # 0: all, which the configs say None
        setattr(args, name, getattr(args, name) or None)
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


def replay(args: argparse.Namespace) -> dict[str, Any]:
    """The report and plot of a saved run (its own settings; this call's --plot)."""
    source = Path(args.from_json)
    text = gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_text()
    report = json.loads(text)
    saved = argparse.Namespace(**{**report["args"], "plot": args.plot})
    done = report.get("repeats_done", saved.repeats)
    if done < saved.repeats:
        print(f"stopped part-way: {done} of {saved.repeats} repeats done\n")
    machine = report["machine"]
    if "torch" not in machine:  # written before the machine line named torch and the threads
        machine += f", {report['threads']} torch thread(s); torch {report['torch']}"
    print_report(
        saved, machine, report["summary"], report["probe"], report["model"], report["tokenize_s"]
    )
    if "seeds" in report:  # from the runs, so that a file written before a column has it too
        print_seed_table(seed_table(report["runs"]), saved)
    if args.plot:
        plot(args.plot, report["runs"], saved)
        print(f"\nplot: {args.plot}")
    if args.skip_plot:
        plot_computed(args.skip_plot, report["runs"], saved)
        print(f"skip plot: {args.skip_plot}")
    inputs = {f"saved report {source.name}": provenance.sha256_of(source)}
    provenance.record_each([args.plot, args.skip_plot], inputs=inputs, machine=machine)
    return report


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.from_json:
        return replay(args)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    base = base_config(args)
    start = time.perf_counter()
    data = load_encoded(base)
    tokenize_s = time.perf_counter() - start
    out = Path(args.output_dir)
    machine = machine_line(args.device, threads=torch.get_num_threads())
    print(
        f"{args.dataset}: {len(data.splits['train'])} train, "
        f"{len(data.splits['validation'])} validation, "
        f"{len(data.splits['test'])} test; tokenized in {tokenize_s:.1f} s; "
        f"machine {machine}",
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
        if args.json and args.json != "-" and rep + 1 < args.repeats:
            # what is done so far, so that a run stopped part-way keeps its finished seeds
            write_report(args.json, report_of(args, machine, tokenize_s, probe, results))

    report = report_of(args, machine, tokenize_s, probe, results)
    print_report(args, report["machine"], report["summary"], probe, report["model"], tokenize_s)
    print_seed_table(report["seeds"], args)
    if args.plot:
        plot(args.plot, results, args)
        print(f"\nplot: {args.plot}")
    if args.skip_plot:
        plot_computed(args.skip_plot, results, args)
        print(f"skip plot: {args.skip_plot}")
    if args.json == "-":
        json.dump(report, sys.stdout, indent=1)
    elif args.json:
        write_report(args.json, report)
    inputs = provenance.data_inputs(args.data_dir, [args.dataset])
    provenance.record_each([args.json, args.plot, args.skip_plot], inputs=inputs, machine=machine)
    return report


def report_of(
    args: argparse.Namespace,
    machine: str,
    tokenize_s: float,
    probe: dict[str, Any] | None,
    results: dict[str, list[dict[str, Any]]],
) -> dict[str, Any]:
    """Every number of the runs so far (``results``: variant -> one record per repeat)."""
    summary = summarize(results)
    return {
        "args": vars(args),
        "machine": machine,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "tokenize_s": tokenize_s,
        "probe": probe,
        "model": model_ratios(summary, probe),
        "summary": summary,
        "seeds": seed_table(results),
        "runs": results,
        "repeats_done": min(len(runs) for runs in results.values()),
    }


def write_report(path: str, report: dict[str, Any]) -> None:
    """Write ``report`` to ``path`` whole or not at all (a stopped run leaves the last one)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    partial.write_text(json.dumps(report, indent=1))
    partial.replace(target)


if __name__ == "__main__":
    main()
