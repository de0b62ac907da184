"""The console of `astune search` at 80 columns: the live table's headers whole, the closing
lines within the width (commands kept whole, to paste). No Ray is started."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from rich.console import Console

from astune.store.pareto import FrontPoint
from astune.store.uri import mlflow_ui_command
from astune.tuning.console import TABLE_COLUMNS, ConsoleCallback, format_summary
from astune.tuning.settings import SearchResult

AS = dict(loss="as_softmax", delta=0.3, warmup_ratio=0.0, as_speed=True, lam=1.5)
ROWS = {  # a search as it looks midway: several losses, long floats, a failed trial
    "1bd7975c": dict(
        status="DONE",
        evals=2,
        best=0.453125,
        masked=0.12345678,
        test=0.4411764705882353,
        config={**AS, "max_accum_steps": 3, "lr": 0.0012345678},
    ),
    "cde546ae": dict(
        status="RUNNING",
        done="37%",
        left="4 min",
        evals=1,
        best=0.25,
        masked=0.0,
        test=None,
        config=dict(loss="softmax", as_speed=False, lr=2.3456789e-05),
    ),
    "59c20b23": dict(
        status="FAILED",
        evals=0,
        best=None,
        masked=None,
        test=None,
        config=dict(loss="am_softmax", s=1.0e38, m=0.3, lr=0.001),
    ),
    "a0b1c2d3": dict(
        status="STOPPED",
        evals=1,
        best=0.21875,
        masked=0.5,
        test=None,
        config=dict(loss="label_smoothing", epsilon=0.1, lr=0.0003),
    ),
}


def rendered(width: int) -> list[str]:
    callback = ConsoleCallback("objective", 12, live=False)
    callback.rows = ROWS
    console = Console(width=width, record=True, color_system=None)
    console.print(callback.view())
    return console.export_text().splitlines()


def test_the_live_table_at_80_columns_shows_every_header_whole():
    lines = rendered(80)
    assert lines[0] == "astune search: 4/12 trials, best objective 0.453"
    assert max(len(line) for line in lines) <= 80, lines
    headers = lines[1].split()
    # a running trial's progress (issue 72) ranks above the config's columns
    headers_seen = ["trial", "status", "loss", "delta", "lr", "done", "left", "evals", "best"]
    assert headers == headers_seen
    assert "…" not in "\n".join(lines)  # no header, trial id or value cut
    body = {line.split()[0]: line.split() for line in lines[3:]}
    assert set(body) == set(ROWS)
    assert body["59c20b23"][:3] == ["59c20b23", "FAILED", "am_softmax"]
    assert body["1bd7975c"] == [
        *("1bd7975c", "DONE", "as_softmax", "0.3", "0.00123", "-", "-", "2", "0.453"),
    ]
    assert body["cde546ae"][3:8] == ["-", "2.35e-05", "37%", "4", "min"]


@pytest.mark.parametrize("width", [60, 100, 140])
def test_the_live_table_takes_the_columns_that_fit(width):
    lines = rendered(width)
    assert max(len(line) for line in lines) <= width, lines
    headers = lines[1].split()
    assert {"trial", "status", "loss", "evals", "best"} <= set(headers)
    if width >= 140:  # every column with something to show
        assert headers == [c.header for c in TABLE_COLUMNS]
    else:
        assert "warmup" not in headers  # what matters least goes first
    assert "…" not in "\n".join(lines)


def summary(**changes) -> SearchResult:
    values = dict(
        experiment="astune-sst5",
        tracking_uri="sqlite:////home/user/work/astune-runs/mlflow.db",
        experiment_path="/home/user/work/astune-runs/ray/astune-sst5",
        best_config=dict(
            dataset="sst5",
            data_dir="/home/user/work/shared/data",
            backbone="minilm",
            num_layers=1,
            max_length=128,
            max_train_samples=64,
            seed=0,
            checkpoint_every="10m",
            device="cpu",
            loss="as_softmax",
            delta=0.3,
            warmup_ratio=0.0,
            as_speed=True,
            lam=1.5,
            max_accum_steps=3,
            lr=0.0012345678,
            batch_size=16,
            epochs=2,
            validation_fraction=None,
        ),
        best_objective=0.453125,
        metric="objective",
        num_trials=4,
        trial_states={"TERMINATED": 3, "ERROR": 1},
        parent_run_id="abc",
        experiment_id="1",
    )
    return SearchResult(**{**values, **changes})


COMMANDS = ("review:", "export:", "resume:", "optuna:")


def closing_lines(found: SearchResult) -> list[str]:
    return format_summary(found, mlflow_ui_command(found.tracking_uri)).splitlines()


def test_the_closing_lines_fit_80_columns_and_the_commands_stay_whole():
    lines = closing_lines(summary())
    prose = [line for line in lines if not line.startswith(COMMANDS)]
    assert max(len(line) for line in prose) <= 80, prose
    start = lines.index("best objective: 0.4531") + 1
    config = lines[start : lines.index(next(x for x in lines if x.startswith("review:")))]
    assert len(config) >= 3 and config[0].startswith("best config: loss=as_softmax, delta=0.3")
    assert all(line.startswith("  ") for line in config[1:])
    items = " ".join(config).removeprefix("best config:").replace(",", " ").split()
    assert "data_dir=/home/user/work/shared/data" in items and "lr=0.00123" in items
    assert "validation_fraction=None" not in items and len(items) == 18
    export = [line for line in lines if line.startswith("export:")]
    assert export == [
        "export:  python -m astune export --experiment astune-sst5 --tracking-uri "
        "sqlite:////home/user/work/astune-runs/mlflow.db --format yaml -o best.yaml"
    ]
    review = (
        "review:  mlflow ui --backend-store-uri sqlite:////home/user/work/astune-runs/mlflow.db"
    )
    assert review in lines


def test_the_pareto_front_fits_80_columns_with_every_cost():
    costs = ("train_seconds", "samples_computed", "optimizer_steps")
    objectives = ("objective", *costs)
    front = [
        FrontPoint(
            run_id=f"run{i}",
            trial_id=trial_id,
            values={"objective": 0.4 + i / 100, "train_seconds": 12.345678 * (i + 1),
                    "samples_computed": 64000.0 * (i + 1), "optimizer_steps": 40.0 * (i + 1)},
            params={"loss": "as_softmax", "as_speed": "True", "as_skip": "False"},
        )
        for i, trial_id in enumerate(("1bd7975c", "cde546ae"))
    ]  # fmt: skip
    lines = closing_lines(summary(objectives=objectives, front=front, best_config={}))
    prose = [line for line in lines if not line.startswith(COMMANDS)]
    assert max(len(line) for line in prose) <= 80, prose
    head = " ".join(line.strip() for line in lines[1:3])
    assert head.startswith(f"Pareto front: 2 trials, objective against {', '.join(costs)}")
    table = lines[3:6]
    assert table[0].split() == ["trial", "loss", "speed", "skip", "objective", "seconds",
                                "samples", "steps"]  # fmt: skip
    assert table[1].split()[:5] == ["1bd7975c", "as_softmax", "on", "off", "0.4"]


def test_mlflow_info_lines_and_rays_console_engine_off_unless_verbose(tmp_path, capfd, monkeypatch):
    """A new MLflow store says "Creating initial MLflow database tables..." at INFO: off within
    the block, on with ``verbose``; Ray Tune's quiet console engine only within the block."""
    from mlflow import MlflowClient

    from astune.tuning.notices import RAY_TUNE_OUTPUT, RAY_TUNE_TRIAL_ERRORS, library_notices

    monkeypatch.delenv("MLFLOW_LOGGING_LEVEL", raising=False)
    for name in (RAY_TUNE_OUTPUT, RAY_TUNE_TRIAL_ERRORS):
        monkeypatch.delenv(name, raising=False)
    for verbose in (False, True):
        capfd.readouterr()
        with library_notices(verbose):
            engine = [os.environ.get(RAY_TUNE_OUTPUT), os.environ.get(RAY_TUNE_TRIAL_ERRORS)]
            MlflowClient(f"sqlite:///{tmp_path / f'{verbose}.db'}").search_experiments()
        err = capfd.readouterr().err
        assert ("Creating initial MLflow database tables" in err) is verbose, err
        assert engine == ([None, None] if verbose else ["0", "0"])
        assert RAY_TUNE_OUTPUT not in os.environ and RAY_TUNE_TRIAL_ERRORS not in os.environ


def test_verbose_is_a_flag_of_search_and_confirm_that_does_not_shape_the_search():
    from astune.cli.parser import build_parser
    from astune.space.space import load_space
    from astune.tuning.confirmation.confirm import ConfirmSettings, search_settings
    from astune.tuning.lifecycle.resume import check_unchanged, search_params
    from astune.tuning.settings import settings_from_args
    from astune.tuning.tuner import tune_verbosity

    parse = build_parser().parse_args
    quiet = settings_from_args(parse(["search", "--dataset", "sst5"]))
    loud = settings_from_args(parse(["search", "--dataset", "sst5", "--verbose"]))
    assert (quiet.verbose, loud.verbose) == (False, True)
    assert (tune_verbosity(quiet), tune_verbosity(loud)) == (0, 1)
    space = load_space(Path(__file__).parent / "spaces" / "tiny.yaml")
    params = search_params(quiet, space)
    assert "verbose" not in params
    check_unchanged(loud, space, {k: str(v) for k, v in params.items()})  # --resume may add it
    assert parse(["confirm", "--experiment", "x", "--verbose"]).verbose is True
    confirm = ConfirmSettings("x", verbose=True)
    assert search_settings(confirm, {"dataset": "sst5"}).verbose is True


def test_a_confirms_table_says_so_and_a_search_pickled_before_says_search():
    import pickle

    callback = ConsoleCallback("objective", 4, live=False, command="confirm")
    callback.rows = ROWS
    assert callback.view().title() == "astune confirm: 4/4 runs, best objective 0.453"
    state = pickle.loads(pickle.dumps(ConsoleCallback("objective", 4, live=False))).__dict__
    state.pop("command")  # a callback pickled before the table knew its command
    old = ConsoleCallback.__new__(ConsoleCallback)
    old.__dict__.update(state, rows=ROWS)
    assert old.view().title().startswith("astune search: 4/4 trials")


def test_a_running_trials_progress_and_what_is_left_of_the_search():
    """Issue 72 item 2, by its definition: a running trial's share and time left from what it
    published; the search's remaining time from the running trials' and the mean length of a
    trial times those not started, at the concurrency seen; the heartbeat line says it."""
    from astune.store.estimate import search_seconds_left
    from astune.tuning.progress import SearchProgress, TrialProgress

    half = TrialProgress(samples=500, total=1000, rate=10.0, at=0.0)
    assert (half.fraction, half.seconds_left()) == (0.5, 50.0)
    # one finished in 100 s; one running 40 s at 40% (100 s in all): (60 + 2 * 100) / 2
    left = search_seconds_left(
        running=[(40.0, 0.4)],
        finished_seconds=[100.0],
        pending=2,
        concurrency=2,
    )
    assert left == 130.0
    assert search_seconds_left(running=[(5.0, None)], finished_seconds=[], pending=3,
                               concurrency=1) is None  # fmt: skip
    progress = SearchProgress(total=4)
    progress.started["t1"] = time.monotonic() - 40  # 40 s at 50%: 80 s a trial
    progress.latest["t1"] = half
    assert progress.of("t1") == ("50%", "50 s")
    line = progress.line()
    assert line.startswith("astune search: 0 s in, 0/4 finished, 1 running (t1 50% 10 samples/s")
    assert line.endswith("~50 s left); about 5 min left if none stops early")  # (40 + 3 * 80) s
    callback = ConsoleCallback("objective", 4, live=False)
    callback.progress = progress
    callback.rows = {"t1": dict(ROWS["cde546ae"])}
    console = Console(width=100, record=True, color_system=None)
    console.print(callback.view())
    lines = console.export_text().splitlines()
    assert lines[1] == "0 s in, about 5 min left if none stops early"


def test_the_closing_lines_count_one_trial_as_one():
    failed = summary(num_trials=1, trial_states={"ERROR": 1}, best_objective=None)
    assert closing_lines(failed)[0] == "search 'astune-sst5': 1 trial (1 error)"
    assert closing_lines(summary())[0] == "search 'astune-sst5': 4 trials (1 error, 3 terminated)"


def test_a_resumed_searchs_progress_counts_the_trials_that_ended_before():
    """`--resume` of a 4-trial search on to 6: the line counts 4 of 6 finished (it said 0 of 4),
    and estimates the 2 left from the 4 ended ones' seconds."""
    from astune.tuning.progress import SearchProgress

    progress = SearchProgress(total=6)
    progress.ran_before({f"t{i}": 30.0 for i in range(4)})
    assert progress.line() == (
        "astune search: 0 s in, 4/6 finished; about 60 s left if none stops early"
    )
