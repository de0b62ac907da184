"""Time to a good config (issue 44): what a search buys, per arm, on recorded tables.

    python -m benchmarks.search_efficiency settings                 # the header and CPU-hours
    python -m benchmarks.search_efficiency record --dataset sst5 --hours 2 [--part 0/2]
    python -m benchmarks.search_efficiency replay --datasets sst5 [--arms by-hand,astune]
    python -m benchmarks.search_efficiency pareto --datasets sst5   # item 5's hypervolume
    python -m benchmarks.search_efficiency real --dataset sst5 --arm by-hand --seed 0
    python -m benchmarks.search_efficiency check   # the saved replay against the real searches
    python -m benchmarks.search_efficiency transfer --datasets sst5,conll2003  # configs across
    python -m benchmarks.search_efficiency prune --dataset sst5     # after a grid change

``replay`` writes ``benchmarks/search_efficiency/results/search_efficiency.json`` and, per dataset,
the anytime
curves as ``search_efficiency_<dataset>.png`` (``pareto``: ``search_efficiency_pareto.json`` and
``search_efficiency_pareto_<dataset>.png``; ``transfer``: ``search_efficiency_transfer.json``,
how each dataset's best configs score on the others', see benchmarks/search_efficiency/transfer.py);
per held-out dataset and arm,
``seconds_to_target`` (``T_common``), ``seconds_to_target_all`` (``T_all``) and
``seconds_to_target_se`` (``T_se``, issue 62) as ``{median, low, high, per_repetition,
reached}``, ``final_regret`` as ``{median, low, high}`` (percentage points), ``final_cells`` (the
cells the repetitions end on), ``repetitions``,
``budget_seconds`` and the anytime curves (medians over repetitions of the incumbent's
seed-mean validation and test scores at 50 budget fractions, and after each number of trials
started);
per dataset the targets, the metric, the workers and the slice; and the machine, the commit,
the tables' digests, how intervals are computed and the replay-against-real check. The
settings are fixed in :mod:`benchmarks.search_efficiency.settings`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import provenance
from benchmarks.common.harness import commit, machine_line
from benchmarks.search_efficiency import (
    RESULTS,
    budget,
    check,
    lineup,
    plots,
    real,
    replay,
    settings,
    tables,
)
from benchmarks.search_efficiency import record as recorder
from benchmarks.search_efficiency.history_store import write_history
from benchmarks.search_efficiency.portfolio_arm import STORE_ARM, portfolio_start
from benchmarks.search_efficiency.replay_runs import replay_dataset

OUTPUT = RESULTS / "search_efficiency.json"
PARETO_OUTPUT = RESULTS / "search_efficiency_pareto.json"
TRANSFER_OUTPUT = RESULTS / "search_efficiency_transfer.json"


def pareto(args: Any) -> None:
    """``pareto``: issue 44 item 5's hypervolume replay on each dataset's table."""
    from benchmarks.search_efficiency.pareto import mo_default, replay_pareto

    result: dict[str, Any] = {
        "machine": machine_line("cpu", threads=settings.THREADS, libraries=("ray", "optuna")),
        "commit": commit(),
        "intervals": settings.INTERVAL,
        "datasets": {},
    }
    for dataset in args.datasets.split(","):
        folder = tables.table_dir(settings.check_dataset(dataset), args.tables)
        table = replay.Table(tables.complete_table(dataset, args.tables))
        budget = settings.BUDGET_TRIAL_LENGTHS * table.trial_length()
        start = portfolio_start(dataset, root=args.tables)
        entry = replay_pareto(
            table, dataset, budget=budget, repetitions=args.repetitions, portfolio=start
        )
        entry["table"] = tables.table_digest(folder)["sha256"]
        result["datasets"][dataset] = entry
    result["mo_default"] = mo_default(result["datasets"])
    print(f"several objectives, behind the portfolio: {result['mo_default']}")
    save(args, result, plots.plot_pareto)


def transfer(args: Any) -> None:
    """``transfer``: each dataset's best configs read on every other one's table."""
    from benchmarks.search_efficiency.transfer import markdown
    from benchmarks.search_efficiency.transfer import transfer as read_across

    names = [settings.check_dataset(d) for d in args.datasets.split(",") if d]
    if len(set(names)) < 2:
        raise SystemExit(f"--datasets needs two datasets or more, got {args.datasets!r}")
    loaded = {d: replay.Table(tables.complete_table(d, args.tables)) for d in names}
    result = {
        "commit": commit(),
        "tables": {
            d: tables.table_digest(tables.table_dir(d, args.tables))["sha256"] for d in loaded
        },
        "datasets": {
            held: read_across(held, loaded[held], {s: t for s, t in loaded.items() if s != held})
            for held in names
        },
    }
    print(markdown(result["datasets"]))
    save(args, result)


def build_parser() -> argparse.ArgumentParser:
    """The benchmark's subcommands and their flags."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.search_efficiency", description=__doc__.splitlines()[0]
    )
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("settings", help="print the header and the CPU-hours the tables need")
    recorder.add_arguments(sub.add_parser("record", help="record a piece of a table (resumes)"))
    pru = sub.add_parser("prune", help="drop a table's runs of configs outside the grid")
    pru.add_argument("--dataset", required=True, help=", ".join(settings.DATASETS))
    rep = sub.add_parser("replay", help="replay the arms on recorded tables")
    _add_datasets(rep, "sst5")
    rep.add_argument(
        "--arms",
        default=",".join(lineup.NAMES),
        help="comma-separated arms (default: %(default)s)",
    )
    _add_repetitions(rep)
    rep.add_argument(
        "--budget-trial-lengths",
        type=float,
        default=settings.BUDGET_TRIAL_LENGTHS,
        help="each search's budget, in trial-lengths (default: %(default)s, the header's; "
        "another answers whether a larger budget makes a dataset count, item 2)",
    )
    _add_output(rep, OUTPUT, "the JSON (a PNG a dataset beside it)")
    _add_tables(rep)
    rul = sub.add_parser("rules", help="the scheduler and portfolio size, left-one-source-out")
    _add_datasets(rul, ",".join(settings.DATASETS))
    _add_repetitions(rul)
    _add_output(rul, OUTPUT.with_name("rules.json"), "the JSON")
    _add_tables(rul)
    rul.add_argument(
        "--criterion", choices=("area", "no-worse"), default="area",
        help="how the sources choose a rule (rules.py's docstring; default: %(default)s)",
    )  # fmt: skip
    rul.add_argument(
        "--candidates", choices=("schedulers", "handover", "neighbours"), default="schedulers",
        help="the rules to choose among (rules.py's CANDIDATES; default: %(default)s)",
    )  # fmt: skip
    one = sub.add_parser("real", help="one real search of an arm (the replay's check)")
    one.add_argument("--dataset", default="sst5", help="the dataset (default: %(default)s)")
    one.add_argument("--arm", required=True, help=", ".join(lineup.NAMES))
    one.add_argument("--seed", type=int, default=0, help="the search's seed (default: %(default)s)")
    one.add_argument(
        "--full-budget",
        action="store_true",
        help="search the whole budget (default: stop once T_common is reached)",
    )
    _add_tables(one)
    chk = sub.add_parser("check", help="the replay against the real searches saved since")
    _add_output(chk, OUTPUT, "the replay's JSON, the check written into it")
    chk.add_argument(
        "--real",
        type=Path,
        default=None,
        help=f"the real searches' folder (default: {real.REAL})",
    )
    par = sub.add_parser("pareto", help="hypervolume with and without MO successive halving")
    _add_datasets(par, "sst5")
    _add_repetitions(par)
    _add_output(par, PARETO_OUTPUT, "the JSON (a PNG a dataset beside it)")
    _add_tables(par)
    tra = sub.add_parser("transfer", help="each dataset's best configs on the others' tables")
    _add_datasets(tra, "sst5,conll2003")
    _add_output(tra, TRANSFER_OUTPUT, "the JSON")
    _add_tables(tra)
    return p


def _add_datasets(parser: argparse.ArgumentParser, default: str) -> None:
    names = ", ".join(settings.DATASETS)
    parser.add_argument(
        "--datasets", default=default, help=f"comma-separated, of {names} (default: %(default)s)"
    )


def _add_repetitions(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repetitions",
        type=int,
        default=settings.REPETITIONS,
        help="replayed searches an arm, repetition i seeded i (default: %(default)s)",
    )


def _add_output(parser: argparse.ArgumentParser, default: Path, what: str) -> None:
    parser.add_argument(
        "--output", type=Path, default=default, help=f"{what} (default: %(default)s)"
    )


def _add_tables(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tables",
        type=Path,
        default=tables.TABLES,
        help="the tables' folder (default: %(default)s)",
    )


def replay_all(args: Any) -> None:
    """``replay``: every arm on each dataset's table, into the JSON and a PNG a dataset."""
    names = [n for n in args.arms.split(",") if n]
    for name in names:
        lineup.check_arm(name)
    for dataset in (datasets := args.datasets.split(",")):
        settings.check_dataset(dataset)
    code = commit()  # the code that runs, before minutes of replay in which the tree may change
    with tempfile.TemporaryDirectory() as folder:
        histories = []
        if STORE_ARM in names:  # mode b: a store a repetition; each held-out excludes its own
            for i in range(args.repetitions):
                histories.append(f"sqlite:///{folder}/history-{i}.db")
                written = write_history(histories[-1], list(settings.DATASETS), root=args.tables,
                                        seed=i)  # fmt: skip
                print(f"history store {i + 1}/{args.repetitions}: {written} trial runs", flush=True)
        result = {"commit": code, **replay_datasets(args, names, datasets, histories)}
    result["replay_check"] = check.replay_checks(result)
    save(args, result, plots.plot_replay)


def choose_rules(args: Any) -> None:
    """``rules``: issue 70 item 2's study (:mod:`.rules`) into its JSON."""
    from benchmarks.search_efficiency import rules

    datasets = [settings.check_dataset(d) for d in args.datasets.split(",")]
    code = commit()
    found = rules.study(
        datasets, root=args.tables, repetitions=args.repetitions, criterion=args.criterion,
        rules=rules.CANDIDATES[args.candidates],
    )  # fmt: skip
    machine = machine_line("cpu", threads=settings.THREADS, libraries=("ray", "optuna"))
    result = {"commit": code, "machine": machine, "datasets": found.pop("held_out"), **found}
    save(args, result)


def replay_datasets(
    args: Any, names: list[str], datasets: list[str], histories: list[str]
) -> dict[str, Any]:
    """The replay's JSON of ``names`` on ``datasets`` (``histories``: mode b's stores), its
    commit apart."""
    return {
        "machine": machine_line("cpu", threads=settings.THREADS, libraries=("ray", "optuna")),
        "intervals": settings.INTERVAL,
        "datasets": {
            d: replay_dataset(
                d,
                names,
                repetitions=args.repetitions,
                root=args.tables,
                budget_lengths=args.budget_trial_lengths,
                histories=histories,
            )
            for d in datasets
        },
    }


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if getattr(args, "repetitions", 1) < 1:
        raise SystemExit(f"--repetitions must be >= 1, got {args.repetitions}")
    if not getattr(args, "budget_trial_lengths", 1) > 0:
        raise SystemExit(f"--budget-trial-lengths must be > 0, got {args.budget_trial_lengths}")
    commands = {
        "settings": lambda _args: budget.main([]),
        "record": recorder.run,
        "prune": lambda args: tables.prune(settings.check_dataset(args.dataset)),
        "real": real.run_search,
        "check": check.check,
        "transfer": transfer,
        "pareto": pareto,
        "replay": replay_all,
        "rules": choose_rules,
    }
    commands[args.command](args)


def save(args: Any, result: dict[str, Any], plot: Any = None) -> None:
    """``result`` written to ``--output`` with, given ``plot``, one PNG a dataset beside it,
    each entered in its folder's manifest."""
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}")
    pngs = []
    for dataset, entry in result["datasets"].items() if plot is not None else ():
        pngs.append(plot(entry, dataset, plot_path(args.output, dataset)))
        print(f"wrote {pngs[-1]}")
    record_outputs([args.output, *pngs], result, args.tables)


def record_outputs(paths: list[Path], result: dict[str, Any], root: Path | None) -> None:
    """Enter what a command wrote in its folder's manifest: the tables it read are its inputs."""
    digests = {
        f"tables/{d}": tables.table_digest(tables.table_dir(d, root))["sha256"]
        for d in result.get("datasets", {})
    }
    machine = result.get("machine") or machine_line("cpu", threads=settings.THREADS)
    provenance.record_each(paths, inputs=digests, machine=machine, commit=result.get("commit"))


def plot_path(output: Path, dataset: str) -> Path:
    """The PNG beside ``output`` for ``dataset``: ``<output stem>_<dataset>.png``."""
    return output.with_name(f"{output.stem}_{dataset}.png")


if __name__ == "__main__":
    main()
