"""`astune confirm` on a real small search (real Ray, Optuna, MLflow, 1-layer MiniLM): its runs,
seeds and artifacts, its intervals and paired test against scipy on the logged values, resuming,
bad input, and `export` preferring the confirmed winner."""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow_searches import tiny_searches
from scipy import stats
from search_processes import stop_command
from stores import copy_store

from astune.cli import main
from astune.tuning.confirmation.confirm import CONFIRM_AGAIN

pytestmark = [pytest.mark.ray, pytest.mark.slow]

EXPERIMENT = "sst5-tiny"  # the shared search confirmed here, on a copy of its store
EXP = ["--experiment", EXPERIMENT]


@dataclass
class Confirmed:
    root: Path  # the copy of the search's store that the confirms write to
    searched: Path  # where the search itself wrote (read only here)
    uri: str
    out: str  # what `astune confirm` printed
    client: MlflowClient


def _run_main(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue()


@pytest.fixture(scope="module")
def confirmed(tmp_path_factory, data_dir, shared_ray) -> Confirmed:
    """`confirm --top 1 --seeds 2` of a copy of the shared 2-trial AS-Softmax search
    (``tests/mlflow_searches.py``, which the export tests read as it is); every confirm of the
    module joins the module's one Ray."""
    searches = tiny_searches(tmp_path_factory, data_dir)
    root = tmp_path_factory.mktemp("confirm")
    uri = copy_store(searches.root, root)
    args = ["confirm", "--experiment", EXPERIMENT, "--top", "1", "--seeds", "2"]
    code, out = _run_main([*args, "--tracking-uri", uri, "--storage-path", str(root / "ray")])
    assert code == 0, out
    return Confirmed(root, searches.root, uri, out, MlflowClient(tracking_uri=uri))


def _parent(client: MlflowClient, name: str = EXPERIMENT):
    experiment = client.get_experiment_by_name(name)
    (parent,) = client.search_runs(
        [experiment.experiment_id], filter_string="tags.`astune.role` = 'search'"
    )
    return parent


def _children(client: MlflowClient, role: str, name: str = EXPERIMENT) -> list:
    experiment = client.get_experiment_by_name(name)
    return client.search_runs(
        [experiment.experiment_id], filter_string=f"tags.`astune.role` = '{role}'"
    )


def test_confirm_runs_the_best_trial_and_the_baseline_over_the_same_seeds(confirmed):
    client = confirmed.client
    parent = _parent(client)
    trials = [t for t in _children(client, "trial") if t.info.status == "FINISHED"]
    top = max(t.data.metrics["best_objective"] for t in trials)
    runs = _children(client, "confirm")
    assert len(runs) == 4 and {r.info.status for r in runs} == {"FINISHED"}
    by_config: dict[str, list] = {}
    for run in runs:
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        by_config.setdefault(run.data.tags["astune.confirms"], []).append(run)
    (confirms,) = set(by_config) - {"baseline"}
    (best,) = [t for t in trials if t.info.run_id == confirms]
    assert best.data.metrics["best_objective"] == top and "baseline" in by_config
    # named by its trial id, as the live table and the run name name it (issue 60)
    trial_id = best.data.tags["astune.trial_id"]
    assert f"(trial {trial_id})" in confirmed.out and best.info.run_name.endswith(f"-{trial_id}")
    for group in by_config.values():  # seeds: not the search's (0), the same for both configs
        assert sorted(int(r.data.params["seed"]) for r in group) == [1, 2]
    trial_run = by_config[best.info.run_id][0]
    for key in ("loss", "delta", "as_speed", "lam", "max_accum_steps", "lr", "batch_size"):
        assert trial_run.data.params[key] == best.data.params[key]
    baseline = by_config["baseline"][0]
    assert baseline.data.params["loss"] == "softmax"
    assert baseline.data.params["delta"] == "None"  # the baseline has no AS parameters
    for key in ("lr", "batch_size", "epochs"):  # read back as numbers: "2" and "2.0" agree
        assert float(baseline.data.params[key]) == float(best.data.params[key])
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"confirm.csv", "confirm.md", "confirm.png"} <= artifacts
    assert parent.info.status == "FINISHED"  # the search's run keeps its status


def _logged(client: MlflowClient) -> dict[str, dict[int, tuple[float, float]]]:
    """confirms -> seed -> (best_objective, train_seconds), as logged."""
    out: dict[str, dict[int, tuple[float, float]]] = {}
    for run in _children(client, "confirm"):
        metrics = run.data.metrics
        values = (metrics["best_objective"], metrics["train_seconds"])
        out.setdefault(run.data.tags["astune.confirms"], {})[int(run.data.params["seed"])] = values
    return out


def _scipy_interval(values: list[float]) -> tuple[float, float, float]:
    """scipy's 95% t interval; for values without spread (scipy: nan) the point itself."""
    n = len(values)
    mean = sum(values) / n
    if stats.sem(values) == 0:
        return mean, mean, mean
    low, high = stats.t.interval(0.95, n - 1, loc=mean, scale=stats.sem(values))
    return mean, low, high


def test_intervals_and_paired_test_equal_scipy_on_the_logged_values(confirmed):
    client = confirmed.client
    logged = _logged(client)
    path = client.download_artifacts(_parent(client).info.run_id, "confirm.csv", confirmed.root)
    rows = {row["confirms"]: row for row in csv.DictReader(open(path))}
    assert set(rows) == set(logged)
    base = logged["baseline"]
    for confirms, by_seed in logged.items():
        row, seeds = rows[confirms], sorted(by_seed)
        for i, column in enumerate(("objective", "train_seconds")):
            values = [by_seed[s][i] for s in seeds]
            mean, low, high = _scipy_interval(values)
            got = [float(row[f"{column}_{k}"]) for k in ("mean", "low", "high")]
            assert got == pytest.approx([mean, low, high], rel=1e-9, abs=1e-12)
            printed = f"{mean:.{4 if i == 0 else 1}f} +- {(high - low) / 2:.{4 if i == 0 else 1}f}"
            assert printed in confirmed.out
        if confirms == "baseline":
            assert row["p_value"] == row["diff_mean"] == ""  # nothing to compare it with
            continue
        ours = [by_seed[s][0] for s in seeds]
        theirs = [base[s][0] for s in seeds]
        diffs = [a - b for a, b in zip(ours, theirs)]
        mean, low, high = _scipy_interval(diffs)
        got = [float(row[k]) for k in ("diff_mean", "diff_low", "diff_high")]
        assert got == pytest.approx([mean, low, high], rel=1e-9, abs=1e-12)
        p_value = stats.ttest_rel(ours, theirs).pvalue
        expected = 1.0 if all(d == 0 for d in diffs) else p_value  # scipy: nan for no spread
        assert float(row["p_value"]) == pytest.approx(expected, rel=1e-9, nan_ok=True)
        assert f"p={expected:.3g}" in confirmed.out


def test_export_names_the_confirmed_winner(confirmed):
    from astune.exporting import find_best_trial

    logged = _logged(confirmed.client)
    means = {k: sum(v[0] for v in by_seed.values()) / 2 for k, by_seed in logged.items()}
    winner = max(means, key=lambda k: (means[k], k != "baseline"))
    best = find_best_trial(EXPERIMENT, confirmed.uri)
    assert best.confirmed_seeds == 2
    assert best.objective == pytest.approx(means[winner])
    assert "confirmed winner" in best.describe() and "confirmed winner" in best.source
    if winner != "baseline":
        assert best.run_id == winner
        trial_id = confirmed.client.get_run(winner).data.tags["astune.trial_id"]
        assert best.trial_id == trial_id and f"trial {trial_id} (MLflow run" in best.describe()
    assert best.config["seed"] == 0  # the search's seed, not a confirm seed


def test_a_confirm_stopped_by_sigterm_ends_its_runs_and_the_same_command_finishes_it(confirmed):
    client = confirmed.client
    parent = _parent(client)
    stale = client.create_run(  # what an interrupted confirm leaves: a RUNNING run of seed 3
        parent.info.experiment_id,
        tags={
            "astune.role": "confirm",
            "astune.confirms": "baseline",
            "mlflow.parentRunId": parent.info.run_id,
        },
    )
    client.log_param(stale.info.run_id, "seed", "3")
    args = ["confirm", "--experiment", EXPERIMENT, "--top", "1", "--seeds", "3"]
    args += ["--storage-path", str(confirmed.root / "ray"), "--tracking-uri", confirmed.uri]

    # SIGTERM (Slurm, Kubernetes) once the seed-3 runs started: Tune's graceful stop, the
    # unfinished runs KILLED with a note, one line, exit 143
    code, out, err = _stopped_by_sigterm(args, lambda: _started_seed_3(client, stale))
    assert code == 143 and "Traceback" not in err, (out, err)
    seed_3 = [r for r in _children(client, "confirm") if r.data.params["seed"] == "3"]
    finished = [r for r in seed_3 if r.info.status == "FINISHED"]
    killed = [r for r in seed_3 if r.info.status != "FINISHED"]
    assert err.strip().splitlines()[-1] == (
        f"astune confirm: confirm of search '{EXPERIMENT}' stopped by SIGTERM ({len(finished)} of "
        f"2 runs finished, the others KILLED in MLflow); {CONFIRM_AGAIN}"
    )
    assert client.get_run(stale.info.run_id).info.lifecycle_stage == "deleted"  # run anew
    assert killed and {r.info.status for r in killed} == {"KILLED"}
    for run in killed:
        assert run.data.tags["astune.stopped_by"] == "SIGTERM"
        assert run.data.tags["mlflow.note.content"].endswith(f"; {CONFIRM_AGAIN}.")

    code, out = _run_main(args)  # the same command: the finished runs kept, the others anew
    assert code == 0, out
    assert f"{2 - len(finished)} runs now, {4 + len(finished)} reused" in out
    runs = _children(client, "confirm")
    assert len(runs) == 6 and {r.info.status for r in runs} == {"FINISHED"}
    assert not {r.info.run_id for r in killed} & {r.info.run_id for r in runs}


def _started_seed_3(client: MlflowClient, stale) -> bool:
    """A seed-3 confirm run other than the ``stale`` one exists (its trial started)."""
    runs = _children(client, "confirm")
    return any(
        r.data.params.get("seed") == "3" and r.info.run_id != stale.info.run_id for r in runs
    )


def _stopped_by_sigterm(argv: list[str], ready) -> tuple[int, str, str]:
    """``main(argv)`` in this process, sent SIGTERM by a thread once ``ready()``: its exit code,
    stdout and stderr. A SIGTERM after the command's end would meet a handler that notes it, and
    fail the test, instead of ending the test process."""
    late: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: late.append(signum))
    done = threading.Event()

    def send() -> None:
        while not done.is_set() and not ready():
            time.sleep(0.2)
        if not done.is_set():
            os.kill(os.getpid(), signal.SIGTERM)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()) as err:
            code = main(argv)
    finally:
        done.set()
        sender.join()
        signal.signal(signal.SIGTERM, previous)
    assert not late, "the command ended before SIGTERM came"
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--experiment", "nope"], "no experiment 'nope'"),
        ([*EXP, "--seeds", "1"], "--seeds must be an integer in [2, inf), but got 1"),
        ([*EXP, "--baseline", "as_softmax"], "baseline must be a loss that is not"),
        ([*EXP, "--baseline", "nope"], "loss must be one of"),
    ],
)
def test_bad_confirm_requests_fail_in_one_line_before_ray_starts(
    confirmed, capsys, monkeypatch, extra, message
):
    from astune.tuning import execution

    joined: list[object] = []  # the module's Ray is up: refused before the command joins it
    monkeypatch.setattr(execution, "init_ray", joined.append)
    assert main(["confirm", *extra, "--tracking-uri", confirmed.uri]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not joined


def test_the_search_study_is_in_an_optuna_storage_beside_the_mlflow_store(confirmed):
    import optuna

    parent = _parent(confirmed.client)
    url = parent.data.tags["astune.optuna_storage"]
    assert url == f"sqlite:///{confirmed.searched / 'optuna.db'}"  # beside the search's store
    study = optuna.load_study(study_name=parent.data.tags["astune.optuna_study"], storage=url)
    trials = sorted(_children(confirmed.client, "trial"), key=lambda r: r.info.start_time)
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * len(trials)
    for run, trial in zip(trials, study.trials):
        assert trial.value == pytest.approx(run.data.metrics["best_objective"])
        for key, value in trial.params.items():  # the params the trials varied, as logged
            logged = run.data.params[key]
            assert str(value) == logged or float(value) == pytest.approx(float(logged))


def test_report_shows_the_confirm_table_of_the_parent_run(confirmed, tmp_path):
    from astune.analysis.report import write_report

    report = write_report(
        EXPERIMENT, output_dir=tmp_path, tracking_uri=confirmed.uri, log_to_parent=False
    )
    section = report.path.read_text().split("## Confirmed over seeds")[1].split("\n## ")[0]
    client = confirmed.client
    path = client.download_artifacts(_parent(client).info.run_id, "confirm.md", tmp_path)

    def rows(text: str) -> list[str]:  # the table's body: one row per config
        return [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][
            1:
        ]

    assert rows(section) == rows(Path(path).read_text())
    assert len(rows(section)) == 2 and "(baseline)" in rows(section)[1]


def test_a_confirm_stopped_with_every_process_of_its_job_ends_its_runs_in_one_line(
    confirmed, monkeypatch
):
    """SIGTERM to the confirm's driver and to every Ray process it started, at once (Slurm's
    scancel, a cgroup-wide stop): the GCS and raylet hold it off, the driver stops the runs
    through Tune; the unfinished runs end KILLED, one line, exit 143 within 30 s, and its claim
    on the search is given up."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)  # its own Ray, not the module's
    client = confirmed.client
    args = ["confirm", "--experiment", EXPERIMENT, "--top", "1", "--seeds", "4"]
    args += ["--storage-path", str(confirmed.root / "ray"), "--tracking-uri", confirmed.uri]
    command = [sys.executable, "-m", "astune", *args]

    def seed_4() -> list:
        return [r for r in _children(client, "confirm") if r.data.params.get("seed") == "4"]

    code, err, seconds = stop_command(command, [signal.SIGTERM], lambda: bool(seed_4()), to="job")
    assert code == 143 and seconds < 30 and "Traceback" not in err, (code, seconds, err[-2000:])
    line = err.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"astune confirm: confirm of search '{EXPERIMENT}' stopped by SIGTERM \(\d+ of \d+ runs "
        rf"finished, the others KILLED in MLflow\); {re.escape(CONFIRM_AGAIN)}",
        line,
    ), line
    killed = [r for r in seed_4() if r.info.status != "FINISHED"]
    assert killed and {r.info.status for r in killed} == {"KILLED"}
    assert {r.data.tags["astune.stopped_by"] for r in killed} == {"SIGTERM"}

    # the claim given up (as the graceful stop does: the same command then runs the KILLED
    # runs anew, test_a_confirm_stopped_by_sigterm_... above)
    claim = _parent(client).data.tags["astune.confirm_driver.heartbeat"]
    assert claim == "0"
