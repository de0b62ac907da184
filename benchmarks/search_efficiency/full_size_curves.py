"""Issue 70 item 5, seen rather than read: the full-size study's validation curves.

Each run of :mod:`.full_size` logs one line an evaluation (an epoch) to ``metrics.jsonl`` in its
folder of ``--work-dir``, finished or under way. This gathers them, per dataset and arm, into
``results/full_size_curves.json`` (each run's validation objective after each epoch, and whether
the run has finished; a finished run's curve stays there once its folder is gone) and draws
``results/full_size_curves.png``: one panel a dataset, validation score against epochs, one
colour an arm, one line a seed (dashed: under way). Beside them, how much is left: the CPU-hours
the unfinished runs still need (:func:`remaining`).

    python -m benchmarks.search_efficiency.full_size_curves --work-dir ../full_size_runs
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from astune._text import counted
from benchmarks.common import provenance
from benchmarks.common.harness import commit, machine_line
from benchmarks.search_efficiency import RESULTS, full_size, full_size_tasks, settings

OUTPUT = RESULTS / "full_size_curves.json"
PLOT = RESULTS / "full_size_curves.png"
ARM_COLOURS = {"history": "C3", "at_scale": "C2", "paper": "C0", "scaled": "C1"}


def run_curve(folder: Path) -> list[float]:
    """The validation objective after each evaluation of the run in ``folder`` (empty when it
    has logged none). The loop rewrites the log to its checkpoint when a run resumes, so each
    evaluation is there once; should one be there twice, its last line counts."""
    from astune.training.records import RunLog

    path = RunLog(folder).metrics
    if not path.exists():
        return []
    by_evaluation: dict[int, float] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            by_evaluation[int(row["evaluation"])] = float(row["objective"])
    return [by_evaluation[i] for i in sorted(by_evaluation)]


def recorded_curves(path: Path = OUTPUT) -> dict[tuple[str, str, int], list[float]]:
    """The finished runs' curves that ``path`` (a former :data:`OUTPUT`) holds: a finished
    run's curve is final, so the figure keeps it once its folder is gone (a new machine)."""
    if not path.exists():
        return {}
    found = json.loads(path.read_text())["datasets"]
    return {(dataset, arm, int(seed)): run["validation"]
            for dataset, arms in found.items() for arm, runs in arms.items()
            for seed, run in runs.items() if run["finished"]}  # fmt: skip


def curves(work: Path, recorded: Path = OUTPUT) -> dict[str, Any]:
    """Per dataset, arm and seed: the run's curve, from its folder in ``work`` or else, for a
    finished run, from ``recorded`` (:func:`recorded_curves`); and whether it has finished."""
    done = {full_size.run_key(r) for r in full_size.finished()}
    kept = recorded_curves(recorded)
    out: dict[str, Any] = {}
    for dataset in full_size.DATASETS:
        out[dataset] = {}
        for arm in full_size.ARMS:
            runs = {}
            for seed in full_size.SEEDS:
                key = (dataset, arm, seed)
                curve = run_curve(full_size.run_folder(work, dataset, arm, seed))
                curve = curve or (kept.get(key, []) if key in done else [])
                if curve:
                    runs[str(seed)] = {"validation": curve, "finished": key in done}
            out[dataset][arm] = runs
    return out


def remaining(work: Path) -> dict[str, Any]:
    """What the study still needs: its unfinished runs, those whose config waits on the other
    dataset's runs, and the CPU-hours the others need: their epochs not yet logged x the rows of
    their dataset x its seconds a row-epoch, the median over its finished runs (train seconds
    over rows x epochs; on one torch thread, beside whatever else ran)."""
    done = full_size.finished()
    rows = {d: full_size_tasks.train_rows(d) for d in full_size.DATASETS}
    cost = {
        d: statistics.median(
            r["train_seconds"] / (rows[d] * r["config"]["epochs"]) for r in done
            if r["dataset"] == d
        )
        for d in {r["dataset"] for r in done}
    }  # fmt: skip
    finished = {full_size.run_key(r) for r in done}
    decided, seconds, left, waiting = full_size.decided_configs(), 0.0, 0, 0
    for dataset, arm, seed in full_size.run_order(list(full_size.DATASETS)):
        if (dataset, arm, seed) in finished:
            continue
        left += 1
        if arm in full_size.LEARNT_ARMS:  # read, never decided here
            config = decided.get(dataset, {}).get(arm)
        else:
            config = full_size.arm_config(dataset, arm)
        if config is None or dataset not in cost:
            waiting += 1
            continue
        logged = len(run_curve(full_size.run_folder(work, dataset, arm, seed)))
        seconds += rows[dataset] * (config["epochs"] - logged) * cost[dataset]
    return {"runs_left": left, "runs_waiting": waiting, "cpu_hours": seconds / 3600}


def plot(found: dict[str, Any], path: Path, left: dict[str, Any] | None = None) -> Path:
    """One panel a dataset: validation against epochs, a colour an arm, a line a seed; with
    ``left`` (:func:`remaining`), a title saying what the study still needs."""
    from matplotlib.ticker import MaxNLocator

    from benchmarks.search_efficiency.plots import pyplot, save

    fig, panels = pyplot().subplots(1, len(found), figsize=(5.5 * len(found), 4.2))
    for axis, (dataset, arms) in zip(panels, found.items(), strict=True):
        for arm, runs in arms.items():
            for i, (seed, run) in enumerate(sorted(runs.items())):
                epochs = range(1, len(run["validation"]) + 1)
                axis.plot(
                    epochs, run["validation"], color=ARM_COLOURS[arm], marker="o", markersize=3,
                    linestyle="-" if run["finished"] else "--", label=arm if i == 0 else None,
                )  # fmt: skip
                axis.annotate(seed, (len(run["validation"]), run["validation"][-1]), fontsize=7)
        metric = full_size_tasks.test_metric(dataset).removeprefix("test_")
        axis.set(title=f"{dataset}, whole training set", xlabel="epoch", ylabel=f"val {metric}")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.grid(alpha=0.3)
        if axis.get_legend_handles_labels()[0]:  # a dataset with no run yet has no lines
            axis.legend(fontsize=8, title="arm (seed at the end; dashed: under way)")
    if left is not None:
        fig.suptitle(left_text(left, digits=0), fontsize=10)
    return save(fig, path, dpi=120)


def left_text(left: dict[str, Any], *, digits: int) -> str:
    """``1 run left: about 5.6 CPU-hours, 0 waiting for a config`` (``digits``: of the hours),
    or ``every run finished``."""
    if not left["runs_left"]:
        return "every run finished"
    runs = counted(left["runs_left"], "run")
    return (
        f"{runs} left: about {left['cpu_hours']:.{digits}f} CPU-hours, "
        f"{left['runs_waiting']} waiting for a config"
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work-dir", type=Path, default=Path("../full_size_runs"))
    args = p.parse_args(argv)
    if not args.work_dir.is_dir():
        raise SystemExit(f"--work-dir {args.work_dir}: no such folder (full_size.py's runs)")
    code, machine = commit(), machine_line("cpu", threads=settings.THREADS)
    left = remaining(args.work_dir)
    result = {"datasets": curves(args.work_dir), "remaining": left, "machine": machine,
              "commit": code}  # fmt: skip
    OUTPUT.write_text(json.dumps(result, indent=1) + "\n")
    plot(result["datasets"], PLOT, left)
    print(left_text(left, digits=1))
    inputs = provenance.data_inputs(full_size_tasks.data_dir(), list(full_size.DATASETS))
    for path in (OUTPUT, PLOT):
        provenance.record(path, inputs=inputs, machine=machine, commit=code)
        print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
