"""Real searches of the benchmark's arms, to validate the replay (issue 44 item 3): the same
searcher and scheduler an arm replays (:mod:`benchmarks.search_efficiency.arms`), driven by Ray Tune
on real trials that train the proposed grid config on the dataset's slice with astune's loop,
``WORKERS`` trials at once, one CPU and one torch thread each, until ``T_common`` is reached
or the budget of trial-seconds is spent (``--full-budget``: the budget in any case; what a
search does after reaching the target does not change its time to it, and stopping there
makes a real search of a fast arm minutes rather than the budget's 20).

    python -m benchmarks.search_efficiency real --dataset sst5 --arm by-hand --seed 0

A real search's time-to-target reads the incumbent as the replay does: the evaluation with the
best validation score reported so far, reached when the table's seed-mean score of that
(config, evaluation) cell passes ``T_common``; its trial-seconds are the wall seconds every
trial had run until that report, summed. Each search's reports and times go to
``benchmarks/search_efficiency/results/real/<dataset>-<arm>-<seed>.json``; the check (item 3: the
same ranking of arms, each real time within the replay's 10-90% range) reads them there
(:mod:`benchmarks.search_efficiency.check`).
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common import provenance
from benchmarks.common.harness import commit, machine_line
from benchmarks.search_efficiency import RESULTS, arms, lineup, replay, settings, tables
from benchmarks.search_efficiency import record as recorder
from benchmarks.search_efficiency.portfolio_arm import PORTFOLIO_ARMS, portfolio_start

if TYPE_CHECKING:
    from astune.data.media_encoding import TrainData

REAL = RESULTS / "real"


def trainable(
    config: dict[str, Any],
    *,
    dataset: str,
    search_seed: int,
    data: settings.DatasetSlice,
    encoded: TrainData,
) -> None:
    """One real trial: the grid ``config`` trained by astune's loop on ``encoded``, the
    dataset's slice as the table's runs had it (encoded once by the driver, as a search
    shares it), each evaluation reported to Ray Tune; its seed one of the table's, drawn from
    the search's seed and the trial's id (the replay draws one at random too)."""
    import torch
    from ray import tune

    from astune.checkpoint_policy import SEARCH_DEFAULT
    from astune.config import TrainConfig
    from astune.training import Run

    torch.set_num_threads(settings.THREADS)
    trial_id = tune.get_context().get_trial_id()
    seed = settings.SEEDS[zlib.crc32(f"{search_seed}:{trial_id}".encode()) % len(settings.SEEDS)]
    grid = settings.normalized(config)
    with tempfile.TemporaryDirectory() as out:
        fields = settings.train_fields(dataset, grid, seed, data=data)
        run = Run(
            TrainConfig(**fields, output_dir=out, checkpoint_every=SEARCH_DEFAULT), data=encoded
        )

        def report(record: dict[str, Any], _checkpoint: Path | None) -> None:
            evaluation = int(record["evaluation"]) + 1  # the table counts from 1, the loop 0
            tune.report({
                "objective": float(record["objective"]),
                "train_seconds": float(record["train_seconds"]),
                "final": evaluation >= grid["epochs"],
                "key": settings.config_key(grid),
                "evaluation": evaluation,
                "seed": seed,
            })  # fmt: skip

        run.train(report)


def budget_stopper(
    budget: float, workers: int, *, done: Callable[[], bool] = bool, overhead: float = 0.0
) -> Any:
    """Ray Tune's experiment-wide stopper: every trial stops once the workers have spent the
    budget of trial-seconds (wall seconds since the start, plus ``overhead`` seconds before
    it, times the workers), or once ``done()`` holds; ``spent()`` says how many so far."""
    from ray.tune import Stopper

    class Budget(Stopper):
        def __init__(self) -> None:
            self.start = time.time() - overhead

        def spent(self) -> float:
            return (time.time() - self.start) * workers

        def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
            return self.stop_all()

        def stop_all(self) -> bool:
            return self.spent() >= budget or done()

    return Budget()


@dataclasses.dataclass
class RealSearch:
    """What a real search saw: every report (trial-seconds spent when it arrived, the trial, the
    grid cell, the evaluation, the observed score and the seed) and, per trial id, the
    trial-seconds spent when Ray Tune started it and when it ended (completed, stopped or
    errored; None while it ran at the search's end)."""

    reports: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    trials: dict[str, dict[str, float | None]] = dataclasses.field(default_factory=dict)
    complete: bool = False
    """Whether it ended at the budget or the target, not cut short (Ctrl-C, SIGTERM)."""


def real_search(
    dataset: str,
    arm: Any,
    *,
    seed: int,
    budget: float,
    storage: Path,
    until: Callable[[list[dict[str, Any]]], bool] | None = None,
    overhead: float = 0.0,
) -> RealSearch:
    """Run ``arm``'s searcher and scheduler for real on a local Ray of ``WORKERS`` CPUs (started
    here unless one runs) until the budget is spent or ``until(reports)`` holds (the target
    reached: what comes after it does not change the time to it); its reports and trials.
    ``overhead``: wall seconds before the first trial (a
    warm arm's probe and recommend), counted as the replay counts them: ``WORKERS`` times."""
    import ray

    started = not ray.is_initialized()
    if started:  # the trials import this module: the repository root on their path
        root = str(Path(__file__).resolve().parent.parent)
        runtime_env = {"env_vars": {"PYTHONPATH": root}}
        ray.init(num_cpus=settings.WORKERS, include_dashboard=False, runtime_env=runtime_env)
    try:
        return _search(
            dataset, arm, seed=seed, budget=budget, storage=storage, until=until, overhead=overhead
        )
    finally:
        if started:
            ray.shutdown()


def _search(
    dataset: str,
    arm: Any,
    *,
    seed: int,
    budget: float,
    storage: Path,
    until: Callable[[list[dict[str, Any]]], bool] | None,
    overhead: float,
) -> RealSearch:
    from ray import tune

    encoded = recorder.load_data(dataset)  # before the clock: a search encodes before Ray
    seen = RealSearch()
    reports = seen.reports
    reached = [False]  # until(reports), checked once a report rather than at every stop check
    stopper = budget_stopper(budget, settings.WORKERS, done=lambda: reached[0], overhead=overhead)

    class Keep(tune.Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info):
            reports.append({
                "seconds": stopper.spent(), "trial": trial.trial_id, "key": result["key"],
                "evaluation": result["evaluation"], "val": result["objective"],
                "seed": result["seed"],
            })  # fmt: skip
            reached[0] = reached[0] or (until is not None and until(reports))

        def on_trial_start(self, iteration, trials, trial, **info):
            seen.trials[trial.trial_id] = {"start": stopper.spent(), "end": None}

        def on_trial_complete(self, iteration, trials, trial, **info):
            seen.trials.setdefault(trial.trial_id, {"start": None})["end"] = stopper.spent()

        on_trial_error = on_trial_complete

    tuner = tune.Tuner(
        tune.with_resources(
            tune.with_parameters(
                trainable,
                dataset=dataset,
                search_seed=seed,
                data=settings.DATASETS[dataset],
                encoded=encoded,
            ),
            {"cpu": 1},
        ),
        tune_config=tune.TuneConfig(
            search_alg=arm.searcher(seed),
            scheduler=arm.scheduler(),
            num_samples=-1,
            max_concurrent_trials=settings.WORKERS,
            reuse_actors=arm.reuse_actors,
        ),
        run_config=tune.RunConfig(
            name=f"{dataset}-{arm.name}-{seed}",
            storage_path=str(storage),
            stop=stopper,
            callbacks=[Keep()],
            verbose=0,
        ),
    )
    tuner.fit()
    seen.complete = stopper.stop_all()  # the budget spent or the target reached: not cut short
    return seen


def seconds_to_target(
    reports: list[dict[str, Any]], table: Any, target: float, *, budget: float
) -> tuple[float, bool]:
    """As the replay reads a curve: the trial-seconds of the first report after which the
    incumbent's table seed-mean reaches ``target``; ``(budget, False)`` when none does."""
    best = None
    for r in sorted(reports, key=lambda r: r["seconds"]):
        if best is None or r["val"] > best["val"]:
            best = r
        if table.seed_mean.get((best["key"], best["evaluation"]), float("-inf")) >= target:
            return r["seconds"], True
    return budget, False


def save(dataset: str, arm: str, seed: int, result: dict[str, Any]) -> Path:
    """``REAL/<dataset>-<arm>-<seed>.json``."""
    REAL.mkdir(parents=True, exist_ok=True)
    path = REAL / f"{dataset}-{arm}-{seed}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    inputs = {f"tables/{dataset}": result["table"]}
    provenance.record(path, inputs=inputs, machine=result["machine"], commit=result["commit"])
    return path


def run_search(args: Any) -> None:
    """``real``: one real search of ``--arm`` on ``--dataset`` under the benchmark's budget,
    saved for the replay's check (benchmarks/search_efficiency/real.py)."""
    dataset = settings.check_dataset(args.dataset)
    table = replay.Table(tables.complete_table(dataset, args.tables))
    goal = arms.targets(table, dataset)
    budget = settings.BUDGET_TRIAL_LENGTHS * table.trial_length()
    warm = portfolio = None
    if args.arm in arms.WARM_ARMS:
        from benchmarks.search_efficiency.warm import warm_start

        warm = warm_start(dataset, root=args.tables)
    if args.arm in PORTFOLIO_ARMS:
        if PORTFOLIO_ARMS[args.arm][0] != "prior":
            raise SystemExit(f"arm {args.arm!r}: a real search runs the prior's portfolio arms")
        portfolio = portfolio_start(dataset, root=args.tables)
    starts = {} if portfolio is None else {"prior": portfolio}
    arm = lineup.build_arm(args.arm, dataset, warm=warm, portfolios=starts)
    start = warm or portfolio
    overhead = start.seconds if start is not None else 0.0  # a probe's or a portfolio's build
    code = commit()  # the code that runs the search, not the one at its end
    with tempfile.TemporaryDirectory() as storage:
        folder_path = Path(storage)
        seen = real_search(
            dataset, arm, seed=args.seed, budget=budget, storage=folder_path,
            until=None if args.full_budget else (
                lambda so_far: seconds_to_target(
                    so_far, table, goal["T_common"], budget=budget)[1]),
            overhead=overhead,
        )  # fmt: skip
    if not seen.complete:  # a search cut short would read as one that missed its target
        raise SystemExit(f"{args.arm} seed {args.seed}: stopped before its end; not saved")
    seconds, reached = seconds_to_target(seen.reports, table, goal["T_common"], budget=budget)
    path = save(dataset, args.arm, args.seed, {
        "dataset": dataset, "arm": args.arm, "seed": args.seed, "budget_seconds": budget,
        "target": goal["T_common"], "seconds_to_target": seconds, "reached": reached,
        "overhead_seconds": overhead,
        "stopped_at_target": reached and not args.full_budget,
        "machine": machine_line("cpu", threads=settings.THREADS, libraries=("ray", "optuna")),
        "table": tables.table_digest(tables.table_dir(dataset, args.tables))["sha256"],
        "commit": code, "reports": seen.reports, "trials": seen.trials,
    })  # fmt: skip
    print(f"{args.arm} seed {args.seed}: {seconds:.0f} s to T_common (reached {reached}); {path}")
