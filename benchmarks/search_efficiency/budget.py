"""The CPU-hours the search-efficiency tables need, measured: one real 1-epoch run per dataset
timed on this machine, times the config-epochs of its grid (``python -m benchmarks.search_efficiency
settings``)."""

from __future__ import annotations

import argparse
import time

from benchmarks.common.harness import machine_line
from benchmarks.search_efficiency import record as recorder
from benchmarks.search_efficiency import settings


def time_one_run(dataset: str) -> float:
    """Wall seconds of the recorder's own 1-epoch run (as_softmax, batch 16) on ``dataset``'s
    slice: construction, the epoch, its validation and test scoring and the final test; data
    loading and the first model load excluded (a piece pays them once)."""
    import tempfile

    import torch

    from astune.config import TrainConfig
    from astune.training import Run

    torch.set_num_threads(settings.THREADS)
    config = {
        "loss": "as_softmax",
        "lr": settings.LRS[1],
        "batch_size": 16,
        "epochs": 1,
        "delta": 0.3,
    }
    config["warmup_ratio"] = 0.0
    data = recorder.load_data(dataset)
    with tempfile.TemporaryDirectory() as out:  # the first model load, paid once per piece
        Run(TrainConfig(**settings.train_fields(dataset, config, 0), output_dir=out), data=data)
    start = time.perf_counter()
    recorder.record_run(dataset, config, seed=0, data=data)
    return time.perf_counter() - start


def estimate(datasets: list[str]) -> dict[str, dict[str, float]]:
    """Per dataset: runs, config-epochs, the measured seconds of a 1-epoch run and the hours
    of its table: config-epochs x those seconds, an upper bound (a run's construction and
    final test are paid once per run, not per epoch)."""
    out = {}
    for name in datasets:
        runs, epochs = settings.runs_per_dataset(name)
        seconds = time_one_run(name)
        hours = epochs * seconds / 3600
        out[name] = {"runs": runs, "config_epochs": epochs, "run_s": seconds, "hours": hours}
        print(
            f"{name:12s} {runs:4d} runs, {epochs:5d} config-epochs; a 1-epoch run "
            f"{seconds:5.1f} s -> {hours:5.1f} h on one core",
            flush=True,
        )
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default=",".join(settings.DATASETS))
    args = p.parse_args(argv)
    names = [settings.check_dataset(n) for n in args.datasets.split(",")]
    first, workers = names[0], settings.WORKERS
    print(machine_line("cpu", threads=settings.THREADS))
    print(
        f"grid: {len(settings.grid(first))} configs x {len(settings.SEEDS)} seeds on {first} "
        f"(epochs {settings.epochs_of(first)}); workers {workers}; "
        f"repetitions {settings.REPETITIONS}; budget {settings.BUDGET_TRIAL_LENGTHS} trial-lengths"
    )
    rows = estimate(names)
    total = sum(r["hours"] for r in rows.values())
    print(
        f"total: {total:.1f} CPU-hours (one core each; {total / workers:.1f} h of wall time "
        f"with {workers} recorders on this {workers}-core machine, if it is otherwise idle)"
    )


if __name__ == "__main__":
    main()
