"""Reading, summing and showing one search of ``search_overhead.py`` (no Ray started here).

Everything comes from what the search left behind, through public interfaces: Ray Tune's own
result files (``ray.tune.ExperimentAnalysis``: ``time_total_s``, ``pid``, ``checkpoint_dir_name``
of every report), astune's final report (``train_seconds``), the MLflow trial runs (start and
end on the driver's clock) and the sizes of the files in the storage folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def folder_bytes(folder: str | Path, suffix: str = "") -> int:
    """Bytes of the files under ``folder`` (those ending with ``suffix``)."""
    return sum(p.stat().st_size for p in Path(folder).rglob(f"*{suffix}") if p.is_file())


def trial_rows(experiment_path: str, tracking_uri: str, experiment: str) -> list[dict[str, Any]]:
    """One row per trial: Ray's and astune's times, worker pid, checkpoints and their bytes."""
    from ray.tune import ExperimentAnalysis

    analysis = ExperimentAnalysis(experiment_path)
    runs = mlflow_times(tracking_uri, experiment)
    rows = []
    for trial in analysis.trials:
        last = trial.last_result or {}
        frame = analysis.trial_dataframes.get(trial.trial_id)
        reports = 0 if frame is None or frame.empty else len(frame)
        checkpoints = 0
        if frame is not None and "checkpoint_dir_name" in frame:
            checkpoints = int(frame["checkpoint_dir_name"].notna().sum())
        kept = [folder_bytes(c) for c in Path(trial.path).glob("checkpoint_*") if c.is_dir()]
        rows.append(
            {
                "trial_id": trial.trial_id,
                "status": trial.status,
                "pid": last.get("pid"),
                "fit_s": last.get("time_total_s"),
                "train_seconds": last.get("train_seconds"),
                "reports": reports,
                "checkpoints": checkpoints,
                "kept_checkpoint_bytes": sum(kept),
                # measured by the trial: every checkpoint's state.pt (Ray copies each one to
                # storage) and each best-weights file it wrote (straight to storage)
                "written_bytes": last.get("checkpoint_bytes") or 0,
                "trial_folder_bytes": folder_bytes(trial.path),
                **runs.get(trial.trial_id, {}),
            }
        )
    return rows


def mlflow_times(tracking_uri: str, experiment: str) -> dict[str, dict[str, float]]:
    """Trial id -> start and end (epoch seconds) of its MLflow run, opened and closed by the
    driver's Tune callback when the trial starts and completes."""
    from mlflow import MlflowClient

    from astune.store.conventions import ROLE_TAG, TRIAL_ID_TAG, quote

    client = MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return {}
    runs = client.search_runs(
        [found.experiment_id], f"tags.`{ROLE_TAG}` = {quote('trial')}", max_results=10_000
    )
    return {
        r.data.tags[TRIAL_ID_TAG]: {
            "run_start": r.info.start_time / 1000,
            "run_end": (r.info.end_time or r.info.start_time) / 1000,
        }
        for r in runs
        if TRIAL_ID_TAG in r.data.tags
    }


def summarise(rows: list[dict[str, Any]], wall: float, slots: int) -> dict[str, Any]:
    """Totals and overheads: overhead = 1 - summed trial time / (slots x wall)."""
    fit = sum(r["fit_s"] or 0.0 for r in rows)
    train = sum(r["train_seconds"] or 0.0 for r in rows)
    capacity = slots * wall
    return {
        "trials": len(rows),
        "wall_s": wall,
        "slots": slots,
        "summed_fit_s": fit,
        "summed_train_s": train,
        "overhead_vs_fit_pct": 100.0 * (1 - fit / capacity),
        "overhead_vs_train_pct": 100.0 * (1 - train / capacity),
        "worker_processes": len({r["pid"] for r in rows if r["pid"] is not None}),
        "checkpoints": sum(r["checkpoints"] for r in rows),
        "kept_checkpoint_bytes": sum(r["kept_checkpoint_bytes"] for r in rows),
        "written_bytes": sum(r["written_bytes"] for r in rows),
        "written_bytes_per_trial": sum(r["written_bytes"] for r in rows) / max(1, len(rows)),
    }


TABLE = [
    ("search", "{variant}"),
    ("trials", "{trials}"),
    ("wall s", "{wall_s:.1f}"),
    ("sum fit s", "{summed_fit_s:.1f}"),
    ("sum train s", "{summed_train_s:.1f}"),
    ("overhead vs fit", "{overhead_vs_fit_pct:.1f}%"),
    ("overhead vs train", "{overhead_vs_train_pct:.1f}%"),
    ("workers", "{worker_processes}"),
    ("checkpoints", "{checkpoints}"),
    ("MB written", "{written_mb:.0f}"),
    ("MB written per trial", "{per_trial_mb:.0f}"),
    ("MB in storage at end", "{storage_mb:.0f}"),
]


def print_report(results: list[dict[str, Any]], reference: dict[str, Any] | None) -> None:
    """The markdown table of RESULTS.md, one row per search, and the ratio off / on."""
    if reference:
        print(
            f"\nreference fit alone (1 thread): build {reference['build_s']:.1f} s + train "
            f"{reference['train_s']:.1f} s (train_seconds {reference['train_seconds']:.1f} s)"
        )
    print("\n| " + " | ".join(h for h, _ in TABLE) + " |")
    print("|" + "---|" * len(TABLE))
    for r in results:
        values = {
            **r,
            "written_mb": r["written_bytes"] / 1e6,
            "per_trial_mb": r["written_bytes_per_trial"] / 1e6,
            "storage_mb": r["storage_bytes"] / 1e6,
        }
        print("| " + " | ".join(f.format(**values) for _, f in TABLE) + " |")
    first = results[0]
    for r in results[1:]:
        print(f"wall {r['variant']} / {first['variant']}: {r['wall_s'] / first['wall_s']:.2f}x")
    print(
        "fit = Ray's time_total_s of a trial (model build, training, evaluations, checkpoint "
        "writes and copies, reports); train = astune's train_seconds (training steps only); "
        "overhead = 1 - sum / (slots x wall)."
    )


def plot_timeline(results: list[dict[str, Any]], path: Path) -> None:
    """One panel per search, one row per trial: grey from the driver opening its MLflow run to
    the fit's start, green the fit (Ray's time_total_s, ending at the run's close); before the
    first row the driver starts up, the black line is the end of run_search."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        len(results), 1, figsize=(10, 1 + 0.3 * sum(len(r["rows"]) for r in results))
    )
    for ax, r in zip(axes if len(results) > 1 else [axes], results, strict=True):
        rows = sorted((x for x in r["rows"] if "run_start" in x), key=lambda x: x["run_start"])
        for y, row in enumerate(rows):
            start, end = row["run_start"] - r["t0"], row["run_end"] - r["t0"]
            fit = min(row["fit_s"] or 0.0, end - start)
            ax.barh(y, end - fit - start, left=start, color="0.75")
            ax.barh(y, fit, left=end - fit, color="tab:green")
        ax.axvline(r["wall_s"], color="k", lw=0.8)
        ax.set_xlim(0, 1.02 * r["wall_s"])
        ax.invert_yaxis()  # the first trial on top
        ax.set_yticks(range(len(rows)), [f"pid {x['pid']}" for x in rows], fontsize=6)
        ax.set_title(f"{r['variant']}: wall {r['wall_s']:.1f} s", fontsize=9)
    (axes[-1] if len(results) > 1 else axes).set_xlabel("seconds since run_search was called")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
