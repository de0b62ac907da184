"""Issue 70 item 5: does history's first config still win at full size? The whole SST-5 and
CoNLL-2003 training sets, the whole 6-layer MiniLM and the tables' tokens, three seeds:

- ``history``: the first config of the portfolio a search of the dataset's shipped space builds
  for this target (its rows, all layers, its tokens) from the packaged prior and an empty store;
- ``at_scale``: the same from the packaged prior beside the other dataset's full-size runs of
  the three arms below and ``history`` (:func:`full_size_entries`), the dataset's own left out
  of both: the portfolio learns only from the tasks recorded at the size nearest the target's
  (``astune.history.portfolio.at_nearest_size``), so the other dataset's full-size runs decide;
- ``paper``: the paper's own setting for the dataset (its lr, batch size, epochs, delta, r);
- ``scaled``: the paper's setting with the lr the tables scale every space by (``LR_SCALE``).

The two configs history chooses are decided once a dataset, when its first run starts, and kept
in ``results/full_size_configs.json``, so that every seed trains the same one; ``at_scale``
waits (its runs are passed over) until the other dataset's runs hold two configs. Each run is
one piece, trained by astune's own loop (one torch thread: ``--threads``), checkpointed after each
evaluation in ``--work-dir`` (outside the repository) and resumed from there when run again;
a finished run's record is appended to ``results/full_size_runs.jsonl``, which the summary
(``results/full_size.json``: paired differences of the test score with 95% t-intervals, over
the seeds finished in both arms) is computed from. ``--hours`` boxes a process's time: no run
starts after it, and the run under way pauses at its first checkpoint past it. Any number of
processes may run at once: each holds a claim on the run it trains (:func:`claim`).
CoNLL-2003's paper setting trains 20 epochs of 14,041 rows, about 5 CPU-hours a run here (the
study about 50): where the work folder does not outlive a session, ``--arms`` gives a process
the runs that fit in it.

    python -m benchmarks.search_efficiency.full_size --hours 2 --datasets sst5   # resumes
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common import provenance
from benchmarks.common.harness import commit, machine_line
from benchmarks.common.intervals import mean_ci
from benchmarks.search_efficiency import RESULTS, settings
from benchmarks.search_efficiency.full_size_tasks import (
    DATASETS,
    NUM_LAYERS,
    data_dir,
    full_size_profile,
    max_length,
    test_metric,
)  # fmt: skip

if TYPE_CHECKING:
    from collections.abc import Iterator

RUNS = RESULTS / "full_size_runs.jsonl"
OUTPUT = RESULTS / "full_size.json"
DECIDED = RESULTS / "full_size_configs.json"
ARMS = ("history", "at_scale", "paper", "scaled")
LEARNT_ARMS = ("history", "at_scale")
"""The arms whose config history chooses (decided once a dataset, :data:`DECIDED`)."""
SOURCE_ARMS = ("history", "paper", "scaled")
"""The arms whose runs ``at_scale`` learns from: not ``at_scale`` itself, whose config came
from the other dataset's runs."""
ROUNDS = (("history", "at_scale", "paper"), ("scaled",))
"""The order runs are started in: history, at scale and the paper's setting over every seed
first (the issue's question), the scaled setting after."""
SEEDS = (0, 1, 2)
PAPER_KEYS = ("epochs", "batch_size", "lr", "delta", "warmup_ratio")
RECORDED = "full size"
"""The ``recorded`` value of a reference entry made of full-size runs (the tables' have none)."""
TRIAL_DEFAULTS = {
    "lr_warmup_ratio": 0.0, "as_speed": False, "as_skip": False, "infobatch": False,
    "length_window": 0,
}  # fmt: skip
"""What a config of the paper's leaves unsaid, as a trial logs it (a portfolio matches configs
on these switches)."""


def arm_config(dataset: str, arm: str) -> dict[str, Any] | None:
    """The config ``arm`` trains on ``dataset`` (module docstring); None for ``at_scale`` while
    the other dataset's runs hold fewer than two configs."""
    from astune.data.registry import REGISTRY

    spec = REGISTRY[dataset]
    paper = {"loss": "as_softmax", **{k: getattr(spec, k) for k in PAPER_KEYS}}
    if arm == "paper":
        return paper
    if arm == "scaled":
        return {**paper, "lr": paper["lr"] * settings.LR_SCALE}
    decided = decided_configs()
    if arm in decided.get(dataset, {}):
        return decided[dataset][arm]
    config = first_config(dataset) if arm == "history" else at_scale_first(dataset)
    if config is not None:
        decided.setdefault(dataset, {})[arm] = config
        DECIDED.write_text(json.dumps(decided, indent=1, sort_keys=True) + "\n")
        record_file(DECIDED, commit())
    return config


def decided_configs() -> dict[str, dict[str, dict[str, Any]]]:
    """Dataset -> arm -> the config history chose for it, as decided so far."""
    return json.loads(DECIDED.read_text()) if DECIDED.exists() else {}


def first_config(dataset: str, reference: Path | None = None) -> dict[str, Any]:
    """The first config a search of ``dataset``'s shipped space runs at full size, learnt from
    ``reference`` (None: the packaged prior) and an empty store."""
    import tempfile

    from astune.data.resolve import resolve_dataset
    from astune.history.portfolio_sources import search_portfolio, shipped_space
    from astune.history.reference import PRIOR_FILE
    from astune.store.reader import Store

    task = resolve_dataset(dataset).spec.task
    with tempfile.TemporaryDirectory() as folder:
        store = Store(f"sqlite:///{folder}/empty.db")
        found = search_portfolio(
            full_size_profile(dataset), shipped_space(dataset, task), store=store,
            reference=reference or PRIOR_FILE,
        )  # fmt: skip
    return dict(found.entries[0].config)


def at_scale_first(dataset: str) -> dict[str, Any] | None:
    """The first config at full size from the packaged prior and the other datasets' full-size
    runs of :data:`SOURCE_ARMS`, ``dataset``'s own left out of both; None while those runs hold
    fewer than two configs."""
    import tempfile

    from astune.history.reference import (
        PRIOR_FILE,
        at_tables_scale,
        reference_searches,
        write_reference,
    )

    runs = [r for r in finished() if r["dataset"] != dataset and r["arm"] in SOURCE_ARMS]
    entries = full_size_entries(runs)
    if not entries:
        return None
    with tempfile.TemporaryDirectory() as folder:
        tables = [
            e for e in reference_searches(PRIOR_FILE, exclude=[dataset])
            if at_tables_scale(e)
        ]  # fmt: skip
        reference = write_reference(Path(folder) / "at-scale.json", [*tables, *entries])
        return first_config(dataset, reference)


def full_size_entries(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reference-file entries of full-size ``runs``: a task a dataset holding two configs
    or more, each scored by its mean best validation score over the seeds it ran."""
    from astune.history.reference import reference_entry
    from astune.history.transfer import ranked

    entries = []
    for dataset in dict.fromkeys(r["dataset"] for r in runs):
        mine = [r for r in runs if r["dataset"] == dataset]
        scores: dict[str, list[float]] = {}
        for run in mine:
            config = {**TRIAL_DEFAULTS, **run["config"]}
            scores.setdefault(json.dumps(config, sort_keys=True), []).append(run["val"])
        if len(scores) < 2:
            continue
        scored = [(json.loads(k), sum(v) / len(v)) for k, v in scores.items()]
        name = f"full size {dataset}"
        trials = ranked(name, dataset, full_size_profile(dataset), scored, share=1.0)
        by_key = {json.dumps(c, sort_keys=True): s for c, s in scored}
        ordered = [by_key[json.dumps(dict(t.config), sort_keys=True)] for t in trials]
        metric = mine[0]["test_metric"].removeprefix("test_")
        entry = reference_entry(trials, scores=ordered, metric=metric, mode="max")
        entries.append({**entry, "recorded": RECORDED})
    return entries


def runs_pin(count: int | None = None) -> dict[str, Any]:
    """The first ``count`` finished runs (None: all so far) as a prior pins them: their number
    and the SHA-256 of their lines."""
    lines = [x for x in RUNS.read_text().splitlines() if x.strip()] if RUNS.exists() else []
    lines = lines if count is None else lines[:count]
    return {"runs": len(lines), "sha256": hashlib.sha256("\n".join(lines).encode()).hexdigest()}


def pinned_runs(pin: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs ``pin`` names; SystemExit (one line) when the runs file no longer holds them."""
    now = runs_pin(pin["runs"])
    if now != pin:
        raise SystemExit(
            f"{RUNS}: its first {pin['runs']} runs hash to {now['sha256']} ({now['runs']} "
            f"held), not to their pin {pin['sha256']}; restore the file or pin it anew"
        )
    return finished()[: pin["runs"]]


def train(
    dataset: str,
    arm: str,
    seed: int,
    config: dict[str, Any],
    work: Path,
    deadline: float,
    *,
    threads: int = settings.THREADS,
) -> dict | None:
    """One piece: ``config`` on the whole ``dataset`` on ``threads`` torch threads, resumed
    from its checkpoint if any; None when it paused at a checkpoint past ``deadline``
    (``time.monotonic()`` seconds)."""
    import torch

    from astune.config import TrainConfig
    from astune.training import fit
    from benchmarks.common.pieces import PauseAfter, Paused

    torch.set_num_threads(threads)
    out = run_folder(work, dataset, arm, seed)
    fields = {k: v for k, v in config.items() if k in TrainConfig.__dataclass_fields__}
    train_config = TrainConfig(
        dataset=dataset, data_dir=str(data_dir()), backbone=settings.BACKBONE,
        num_layers=NUM_LAYERS, max_length=max_length(dataset), seed=seed, device="cpu",
        output_dir=str(out), checkpoint_every="eval", **fields,
    )  # fmt: skip
    checkpoint = out / "checkpoint"
    start = time.perf_counter()
    try:
        record = fit(
            train_config, resume_from=checkpoint if checkpoint.exists() else None,
            hooks=[PauseAfter(deadline)],
        )  # fmt: skip
    except Paused:
        return None
    metric = test_metric(dataset)
    return {
        "dataset": dataset, "arm": arm, "seed": seed, "config": config,
        "val": float(record["best_objective"]), "test": float(record[metric]),
        "test_metric": metric, "train_seconds": float(record["train_seconds"]),
        "wall_seconds_this_piece": time.perf_counter() - start, "threads_this_piece": threads,
    }  # fmt: skip


def run_folder(work: Path, dataset: str, arm: str, seed: int) -> Path:
    """The folder in ``work`` that a run trains, logs and checkpoints in."""
    return work / f"{dataset}-{arm}-{seed}"


def claim_file(work: Path, dataset: str, arm: str, seed: int) -> Path:
    """The file in ``work``, beside the run's folder, that the process training it holds
    locked (:func:`claim`): no folder is made for a run that is only looked at."""
    return run_folder(work, dataset, arm, seed).with_suffix(".claim")


def finished() -> list[dict[str, Any]]:
    if not RUNS.exists():
        return []
    return [json.loads(line) for line in RUNS.read_text().splitlines() if line.strip()]


def run_key(run: dict[str, Any]) -> tuple[str, str, int]:
    """A run record's ``(dataset, arm, seed)``: the key :func:`run_order` lists runs by."""
    return run["dataset"], run["arm"], run["seed"]


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per dataset, each arm's test scores and history's paired differences to the others."""
    out: dict[str, Any] = {}
    for dataset in DATASETS:
        score = {(r["arm"], r["seed"]): r["test"] for r in runs if r["dataset"] == dataset}
        entry: dict[str, Any] = {"test": {}}
        for arm in ARMS:
            entry["test"][arm] = {s: score[arm, s] for s in SEEDS if (arm, s) in score}
        for arm in LEARNT_ARMS:
            entry[f"{arm}_minus"] = {}
            for other in ("paper", "scaled"):
                paired = [score[arm, s] - score[other, s] for s in SEEDS
                          if (arm, s) in score and (other, s) in score]  # fmt: skip
                entry[f"{arm}_minus"][other] = mean_ci(paired) if len(paired) >= 2 else paired
        out[dataset] = entry
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--hours", type=float, default=2.0,
        help="start no run after this long, and pause the one under way at its next checkpoint",
    )  # fmt: skip
    p.add_argument("--work-dir", type=Path, default=Path("../full_size_runs"))
    p.add_argument(
        "--datasets", default=",".join(DATASETS),
        help="comma-separated: this process's share (processes may share one: each run is claimed)",
    )  # fmt: skip
    p.add_argument(
        "--arms", default=",".join(ARMS),
        help="comma-separated: the arms this process trains (a short session takes the short runs)",
    )  # fmt: skip
    p.add_argument(
        "--threads", type=int, default=settings.THREADS,
        help="torch threads of this process's runs (its last piece's is recorded)",
    )  # fmt: skip
    args = p.parse_args(argv)
    if not args.hours > 0:
        raise SystemExit(f"--hours must be > 0, got {args.hours}")
    if args.threads < 1:
        raise SystemExit(f"--threads must be >= 1, got {args.threads}")
    datasets = listed("--datasets", args.datasets, DATASETS)
    arms = listed("--arms", args.arms, ARMS)
    code, deadline = commit(), time.monotonic() + args.hours * 3600
    for dataset, arm, seed in run_order(datasets, arms):
        if time.monotonic() > deadline:
            break
        with claim(args.work_dir, dataset, arm, seed) as mine:
            if mine and not run_piece(
                dataset, arm, seed, args.work_dir, code, deadline, threads=args.threads
            ):
                break
    return write_summary(code)


def run_piece(
    dataset: str, arm: str, seed: int, work: Path, code: str, deadline: float, *, threads: int
) -> bool:
    """Train one claimed run (unless it has finished or must wait) on ``threads`` torch
    threads and append its record; False when it paused at its deadline (:func:`train`)."""
    if (dataset, arm, seed) in {run_key(r) for r in finished()}:
        return True
    config = arm_config(dataset, arm)
    if config is None:
        print(f"{dataset} {arm} seed {seed}: waits for the other dataset's runs", flush=True)
        return True
    print(f"{dataset} {arm} seed {seed}: {config}", flush=True)
    trained = train(dataset, arm, seed, config, work, deadline, threads=threads)
    if trained is None:
        print(f"{dataset} {arm} seed {seed}: paused at a checkpoint; resumes there", flush=True)
        return False
    record = {**trained, "commit": code}
    with RUNS.open("a") as f:  # one short append: whole lines even beside another process
        f.write(json.dumps(record) + "\n")
    record_file(RUNS, code)
    print(f"  test {record['test']:.4f} ({record['train_seconds']:.0f} s)", flush=True)
    return True


@contextlib.contextmanager
def claim(work: Path, dataset: str, arm: str, seed: int) -> Iterator[bool]:
    """Whether this process holds the run: a lock on its claim file (:func:`claim_file`,
    :func:`benchmarks.common.pieces.claim`), so that any number of processes can share the study
    (``--datasets``) and none trains a run another is training."""
    from benchmarks.common.pieces import claim as lock

    with lock(claim_file(work, dataset, arm, seed)) as mine:
        if not mine:
            print(f"{dataset} {arm} seed {seed}: another process trains it", flush=True)
        yield mine


def listed(flag: str, value: str, accepted: tuple[str, ...]) -> list[str]:
    """The comma-separated ``value`` of ``flag``, each one of ``accepted`` (else one line)."""
    names = value.split(",")
    if unknown := [n for n in names if n not in accepted]:
        raise SystemExit(f"{flag}: {', '.join(unknown)} not one of {', '.join(accepted)}")
    return names


def run_order(
    datasets: list[str], arms: tuple[str, ...] | list[str] = ARMS
) -> list[tuple[str, str, int]]:
    """``(dataset, arm, seed)`` in the order runs start (:data:`ROUNDS`), of ``arms`` only."""
    return [(d, arm, seed) for rnd in ROUNDS for seed in SEEDS for d in datasets for arm in rnd
            if arm in arms]  # fmt: skip


def record_file(path: Path, code: str) -> None:
    """Enter ``path``, as it now is, in its folder's manifest."""
    import torch

    inputs = provenance.data_inputs(data_dir(), list(DATASETS))
    machine = machine_line("cpu", threads=torch.get_num_threads())  # this process's pieces'
    provenance.record(path, inputs=inputs, machine=machine, commit=code,
                      script="python -m benchmarks.search_efficiency.full_size")  # fmt: skip


def write_summary(code: str) -> None:
    runs = finished()
    machine = machine_line("cpu", threads=settings.THREADS)
    result = {"runs": len(runs), "of": len(DATASETS) * len(ARMS) * len(SEEDS),
              "datasets": summary(runs), "machine": machine, "commit": code}  # fmt: skip
    OUTPUT.write_text(json.dumps(result, indent=1) + "\n")
    inputs = provenance.data_inputs(data_dir(), list(DATASETS))
    provenance.record(OUTPUT, inputs=inputs, machine=machine, commit=code)
    print(f"wrote {OUTPUT} ({len(runs)} of {result['of']} runs)")


if __name__ == "__main__":
    main()
