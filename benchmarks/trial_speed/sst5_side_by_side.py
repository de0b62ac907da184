"""SST-5 at the paper's size, every variant and seed side by side on one card (issue 63 item 1).

``run`` starts one ``as_speed.py`` process per (variant, seed) at once (4 variants x 3 seeds:
12), each pinned to a CPU core of its own (``os.sched_setaffinity``; cores reused in turn when
there are fewer) with one torch thread, so that the runs, each bound by its host's one core,
share the card and not the cores. Each writes its own JSON (``as_speed.py --json``: test
accuracy, training seconds without evaluation, optimizer steps, masked fraction, ...); the
launcher adds each process's wall seconds and exit status to ``launcher.json``. At ``--limit``
seconds the runs still going get SIGINT, then SIGKILL 10 s later: the finished ones are kept.

``summary`` reads those JSONs and writes ``summary.json`` and ``summary.md``: per variant, the
mean and 95% t-interval over seeds of test accuracy, training seconds, wall seconds, optimizer
steps and masked fraction, and the training-time ratio to softmax paired by seed (geometric mean
and the interval of the mean log-ratio). Times compare only within one call: the runs share
the card, so a run's time depends on what ran beside it.

Usage: python -m benchmarks.trial_speed.sst5_side_by_side run OUT_DIR [--variants ...]
           [--seeds 42,43,44] [--limit SECONDS] -- AS_SPEED_ARGS...
       python -m benchmarks.trial_speed.sst5_side_by_side summary OUT_DIR
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common.harness import ROOT
from benchmarks.common.intervals import fmt_ci, mean_ci, ratio_ci

VARIANTS = "softmax,as_softmax,as_speed,as_skip"
PAPER = {  # the paper's SST-5 running times relative to softmax (AS-Speed at equal accuracy)
    "as_speed": 0.78,
}


def run_name(variant: str, seed: int) -> str:
    return f"{variant}_seed{seed}"


def launch(args: argparse.Namespace, extra: list[str]) -> dict:
    out = Path(args.out_dir)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    cores = sorted(os.sched_getaffinity(0))
    jobs = {}
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    for index, (variant, seed) in enumerate((v, s) for s in args.seeds for v in args.variants):
        name = run_name(variant, seed)
        core = cores[index % len(cores)]
        command = [sys.executable, "-m", "benchmarks.trial_speed.as_speed", *extra,
                   "--variants", variant, "--seed", str(seed), "--schedule", "sequential",
                   "--threads", "1", "--probe-rounds", "0",
                   "--output-dir", str(Path(args.work) / name),
                   "--json", str(out / f"{name}.json"), "--plot", ""]  # fmt: skip
        log = open(out / "logs" / f"{name}.log", "w")  # noqa: SIM115 (closed when it ends)
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
            preexec_fn=lambda core=core: os.sched_setaffinity(0, {core}),
        )  # fmt: skip
        jobs[name] = dict(process=process, log=log, start=time.perf_counter(), core=core)
    print(f"started {len(jobs)} runs on cores {[j['core'] for j in jobs.values()]}", flush=True)
    deadline = time.perf_counter() + args.limit
    record: dict[str, dict] = {}
    while len(record) < len(jobs):
        for name, job in jobs.items():
            if name not in record and job["process"].poll() is not None:
                record[name] = finish(job, "done")
                print(f"{name}: exit {record[name]['exit']} after {record[name]['wall_s']:.0f} s",
                      flush=True)  # fmt: skip
        if time.perf_counter() > deadline:
            stop([j["process"] for n, j in jobs.items() if n not in record])
            for name, job in jobs.items():
                if name not in record:
                    record[name] = finish(job, "stopped at the limit")
                    keep_partial(Path(args.work) / name, out / "partial" / name)
            break
        time.sleep(0.5)
    report = {"limit_s": args.limit, "args": extra, "runs": record}
    (out / "launcher.json").write_text(json.dumps(report, indent=1))
    return report


def finish(job: dict, how: str) -> dict:
    job["log"].close()
    wall = time.perf_counter() - job["start"]
    return {"exit": job["process"].returncode, "wall_s": wall, "core": job["core"], "how": how}


def keep_partial(work: Path, dest: Path) -> None:
    """A stopped run's per-evaluation metrics (the loop's metrics.jsonl: epochs done, validation
    accuracy, samples seen), so that a run cut short still says how far it got."""
    for path in work.glob("**/metrics.jsonl"):
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest / path.name)


def stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.send_signal(signal.SIGINT)
    end = time.perf_counter() + 10
    for process in processes:
        try:
            process.wait(timeout=max(0.1, end - time.perf_counter()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def load_runs(out: Path) -> dict[tuple[str, int], dict]:
    """(variant, seed) -> the run's record (as_speed.py's ``runs[variant][0]``) with the
    launcher's wall seconds."""
    launcher = {}
    if (out / "launcher.json").exists():
        launcher = json.loads((out / "launcher.json").read_text())["runs"]
    runs = {}
    for path in sorted([*out.glob("*_seed*.json"), *out.glob("*_seed*.json.gz")]):
        raw = path.read_bytes()
        report = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
        for variant, records in report["runs"].items():
            for record in records:
                seed = int(record["seed"])
                record = dict(record, machine=report.get("machine"))
                record["process_wall_s"] = launcher.get(run_name(variant, seed), {}).get("wall_s")
                runs[variant, seed] = record
    return runs


FIELDS = (  # (record key, column, digits, scale)
    ("test_accuracy", "test accuracy (%)", 2, 100.0),
    ("train_s", "train s (no eval)", 1, 1.0),
    ("process_wall_s", "process wall s", 1, 1.0),
    ("optimizer_steps", "optimizer steps", 0, 1.0),
    ("masked_ratio", "masked fraction", 3, 1.0),
)


def summarize(out: Path) -> dict:
    runs = load_runs(out)
    order = VARIANTS.split(",")
    variants = sorted(
        {v for v, _ in runs}, key=lambda v: (v not in order, order.index(v) if v in order else 0, v)
    )
    table = {}
    for variant in variants:
        seeds = sorted(s for v, s in runs if v == variant)
        row: dict = {"seeds": seeds}
        for key, *_ in FIELDS:
            values = [runs[variant, s].get(key) for s in seeds]
            row[key] = mean_ci([float(x) for x in values if x is not None])
        paired = [s for s in seeds if ("softmax", s) in runs]
        row["train_ratio_to_softmax"] = ratio_ci(
            [runs[variant, s]["train_s"] / runs["softmax", s]["train_s"] for s in paired]
        )
        row["paired_seeds"] = paired
        row["paper_ratio"] = PAPER.get(variant)
        table[variant] = row
    machines = sorted({str(r.get("machine")) for r in runs.values()})
    summary = {"machines": machines, "variants": table, "runs": {f"{v}_seed{s}": {
        k: r.get(k) for k in ("test_accuracy", "train_s", "process_wall_s", "optimizer_steps",
                              "masked_ratio", "micro_batches", "samples_fwd_bwd", "wall_s")}
        for (v, s), r in runs.items()}}  # fmt: skip
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    lines = [f"machine: {m}" for m in machines]
    lines += ["", "| variant | seeds | " + " | ".join(c for _, c, *_ in FIELDS)
              + " | train time / softmax (paired) | paper |",
              "|---" * (len(FIELDS) + 4) + "|"]  # fmt: skip
    for variant, row in table.items():
        cells = [fmt_ci(row[key], digits, scale) for key, _, digits, scale in FIELDS]
        paper = row["paper_ratio"]
        lines.append(
            f"| {variant} | {','.join(map(str, row['seeds']))} | "
            + " | ".join(cells)
            + f" | {fmt_ci(row['train_ratio_to_softmax'])} | {paper if paper else '-'} |"
        )
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return summary


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("action", choices=["run", "summary"])
    p.add_argument("out_dir")
    p.add_argument("--variants", default=VARIANTS, type=lambda s: s.split(","))
    p.add_argument("--seeds", default="42,43,44", type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--limit", type=float, default=420.0, help="seconds before runs are stopped")
    p.add_argument("--work", default=None, help="checkpoint folders (default: a temporary one)")
    args = p.parse_args(own)
    scratch = None if args.work else tempfile.mkdtemp(prefix="sst5_side_by_side_")
    args.work = args.work or scratch
    try:
        if args.action == "run":
            launch(args, extra)
        summarize(Path(args.out_dir))
    finally:  # the runs' checkpoints: what a stopped run kept is copied out by launch
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
