"""What a user has after a few searches (issue 62 item 5, mode b): an MLflow store holding one
astune search of each dataset, replayed on its table and written by astune's own writer.

Each search is a repetition of the cold ``astune`` arm under the benchmark's budget (the search
a user ran before astune had a portfolio), replayed as the replay runs every arm; the replay
gives each of its repetitions its own store, store i holding the searches seeded i, so that
mode b's figures are over as many users' histories as repetitions. Every
trial it ended becomes a child run through :class:`astune.store.writer.SearchTracker`, as a
real search's MLflow callback writes it: its flat config (as the prior's ``trial_config``),
one ``objective`` a recorded evaluation, and, when it ran to its end, its best objective; a
trial ASHA stopped is tagged so and keeps its truncated score, one whose run diverged is
FAILED, one the budget cut is left out. The held-out dataset's search is excluded when a
portfolio is built from the store, so its sources are the other datasets only.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.search_efficiency import arms, replay, settings, tables
from benchmarks.search_efficiency.prior import trial_config

SOURCE_ARM = "astune"


def write_history(
    uri: str, datasets: list[str], *, root: Path | None = None, seed: int = 0
) -> dict[str, int]:
    """One replayed :data:`SOURCE_ARM` search (seeded ``seed``) of each of ``datasets`` (tables
    under ``root``) written to the MLflow store at ``uri``; dataset -> the trial runs
    written."""
    written = {}
    for dataset in datasets:
        table = replay.Table(tables.complete_table(dataset, root))
        budget = settings.BUDGET_TRIAL_LENGTHS * table.trial_length()
        arm = arms.astune_arm(dataset)
        search = replay.Replay(table, arm, seed=seed, budget=budget).run()
        written[dataset] = log_search(uri, dataset, table, search.trials)
    return written


def log_search(uri: str, dataset: str, table: replay.Table, trials: list[replay.TrialLog]) -> int:
    """``trials`` (a replayed search of ``dataset``) as an astune search in the store at
    ``uri``; how many trial runs it holds."""
    from astune.data.resolve import resolve_dataset
    from astune.store.conventions import STOPPED_EARLY_TAG
    from astune.store.writer import SearchTracker

    data = settings.DATASETS[dataset]
    tracker = SearchTracker(
        uri,
        f"astune-{dataset}",
        dataset=dataset,
        task=resolve_dataset(dataset).spec.task,
        search_params={
            "dataset": dataset,
            "backbone": settings.BACKBONE,
            "num_layers": data.num_layers,
            "max_train_samples": data.train,
            "mode": "max",
        },
    )
    count = 0
    with tracker.session():
        for number, trial in enumerate(trials):
            if trial.end is None:  # the budget ended the search under it: never finished
                continue
            curve = table.curves[trial.key, trial.seed]
            config = {**trial_config(dataset, table.configs[trial.key]), "seed": trial.seed}
            run_id = tracker.open_trial_run(f"trial_{number:05d}", config)
            reported = curve[: trial.evaluations]
            for row in reported:
                tracker.log_result(run_id, {"objective": row.val, "evaluation": row.evaluation})
            diverged = not trial.stopped and trial.evaluations < len(curve)
            if not trial.stopped and not diverged:
                tracker.log_final(run_id, {"objective": max(row.val for row in reported)})
            status = "FAILED" if diverged else "FINISHED"
            tags = {STOPPED_EARLY_TAG: "true"} if trial.stopped else {}
            tracker.close_trial_run(run_id, status, tags)
            count += 1
    return count
