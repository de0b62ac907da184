"""End-to-end searches: real local Ray, real Optuna, real sqlite MLflow, 1-layer MiniLM on SST-5."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
import ray
import torch
import yaml
from aged_pickles import age_experiment, before_issue_60
from mlflow import MlflowClient
from search_processes import (
    SPACES,
    assert_stopped,
    count_finished,
    driver_claims,
    running_trials,
    runs,
    search_argv,
    search_command,
    stop_command,
    write_space,
)
from stores import new_store
from tiny import TINY

import astune
from astune.cli import main
from astune.cli.parser import build_parser
from astune.store.conventions import LOST_TAG
from astune.tuning.lifecycle.resume import experiment_saved
from astune.tuning.runner import SearchSettings, run_search
from astune.tuning.settings import SearchResult, settings_from_args

GPUS = torch.cuda.device_count()


TINY_SEARCH = {
    "seed_points": [
        {"loss": "as_softmax", "delta": 0.3, "as_speed": True, "lam": 1.5, "max_accum_steps": 3},
        {"loss": "softmax"},
        {"loss": "am_softmax", "s": 1.0e38, "m": 0.3},  # overflows: a NaN loss, the trial fails
    ],
    "losses": ["as_softmax", "softmax", "am_softmax"],
    "loss_params": {
        "as_softmax": {
            "delta": {"type": "float", "low": 0.1, "high": 0.5, "step": 0.05},
            "warmup_ratio": 0.0,
        },
        "am_softmax": {"s": {"type": "float", "low": 1.0, "high": 1.0e38, "log": True}, "m": 0.3},
    },
}


@dataclass
class Searched:
    """The module's one finished search (``tiny``, run as ``astune search`` parses it) and the
    folder it ran in."""

    workdir: Path
    space: Path
    argv: list[str]
    summary: SearchResult


@pytest.fixture(scope="module")
def searched(tmp_path_factory, data_dir) -> Searched:
    from astune.cli.parser import build_parser
    from astune.tuning.settings import settings_from_args

    root = tmp_path_factory.mktemp("search")
    new_store(root / "astune-runs")  # where `search` puts it: default_tracking_uri()
    space = write_space(root, **TINY_SEARCH)
    # one trial at a time: one actor, reused (test_tracking and test_cluster run trials side by
    # side)
    argv = search_argv("tiny", space, "--max-concurrent", "1", "--max-length", "48", samples=4)
    argv += ["--epochs", "2", "--data-dir", str(data_dir)]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        summary = run_search(settings_from_args(build_parser().parse_args(argv)))
    return Searched(root, space, argv, summary)


@pytest.mark.ray
@pytest.mark.slow
def test_search_tracks_every_trial_and_runs_the_seed_points_first(searched):
    summary = searched.summary
    client = MlflowClient(summary.tracking_uri)
    (parent,) = runs(client, "tiny", "search")
    children = runs(client, "tiny", "trial")
    assert summary.num_trials == 4 and len(children) == 4
    assert experiment_saved(
        SearchSettings(
            dataset="sst5", name="tiny", storage_path=str(Path(summary.experiment_path).parent)
        )
    )  # what --resume restores
    assert parent.info.status == "FINISHED" and parent.data.tags["astune.dataset"] == "sst5"
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    assert len({c.data.tags["astune.trial_id"] for c in children}) == 4
    starts = [(c.data.params["loss"], c.data.params["delta"]) for c in children[:3]]
    assert sorted(starts) == sorted(
        [("as_softmax", "0.3"), ("softmax", "None"), ("am_softmax", "None")]
    )
    for child in children:
        assert {"loss", "delta", "warmup_ratio", "lam", "max_accum_steps", "lr"} <= set(
            child.data.params
        )
        assert child.data.tags["astune.task"] == "single_label"

    failed = [c for c in children if c.info.status == "FAILED"]
    assert [c.data.params["loss"] for c in failed] == ["am_softmax"]
    assert failed[0].data.tags["astune.error"].startswith("FloatingPointError: loss is inf")
    finished = [c for c in children if c.info.status == "FINISHED"]
    assert len(finished) == 3
    for child in finished:
        history = client.get_metric_history(child.info.run_id, "objective")
        assert [m.step for m in history] == [0, 1]  # one point per epoch, 2 epochs
        for key in (
            "val_accuracy",
            "val_loss",
            "masked_ratio",
            "accum_steps",
            "delta_now",
            "test_accuracy",
        ):
            assert key in child.data.metrics, key
        is_as = child.data.params["loss"] == "as_softmax"  # recommend replays ema on its margins
        assert ("train_margin" in child.data.metrics) == is_as

    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"best_config.yaml", "trials.csv", "objective_vs_delta.png"} <= artifacts
    assert summary.best_objective == pytest.approx(
        max(c.data.metrics["best_objective"] for c in finished)
    )
    assert summary.trial_states == {"TERMINATED": 3, "ERROR": 1}
    # the defaults' places, found again from the folder it ran in (the module's workdir)
    assert summary.resume_command == "python -m astune search --dataset sst5 --name tiny --resume"


RESTARTED = "astune.restarted_from_start"


def truncate_checkpoints(root: Path) -> list[str]:
    """Cut every checkpoint file of each trial under ``root`` to half its size (Ray's saved
    experiment may name an older one than the newest); the ids of those trials."""
    cut = []
    for trial in sorted(root.rglob("trial_*")):
        files = sorted(trial.glob("checkpoint_*/state.pt"))
        for file in files:
            data = file.read_bytes()
            file.write_bytes(data[: len(data) // 2])
        if files:
            cut.append(trial.name.removeprefix("trial_"))
    return cut


@pytest.mark.ray
@pytest.mark.slow
def test_a_multi_objective_search_stopped_by_a_hangup_and_ctrl_c_resumes_to_its_front(workdir):
    """A second driver of the running search's --name is refused; SIGHUP to the driver's
    process group (a closed terminal, a dropped SSH session; it stops as SIGTERM does:
    test_job_stop) once a trial finished and the next evaluated, no process left behind;
    that trial's checkpoints cut short; Ctrl-C twice (a terminal's, to the group) on the
    resumed search once a trial trains again. Each signal stops the search gracefully, the
    trial with the cut checkpoint restarts from its start, and the last resume loses no trial
    and ends with the Pareto front of the trials that finished."""
    space = write_space(
        workdir,
        seed_points=[],
        losses=["as_softmax"],
        params={
            "lr": {"type": "fixed", "value": 1.0e-3},
            "batch_size": 16,
            "epochs": {"type": "fixed", "value": 3},
        },
        objectives=["objective", "train_seconds"],
    )
    db = workdir / "astune-runs" / "mlflow.db"
    command = search_command("killed", space, "--checkpoint-every", "eval", "--progress-every", "1")

    refused: list[str] = []
    viewed: list = []  # `astune status` from this process while the search runs (issue 72)

    def ready() -> bool:  # a second driver of the same --name while the search runs: refused
        # asked as soon as the driver holds the search: the refused one takes seconds to start
        # (more beside busy workers), and the search must outlast it
        if not refused and driver_claims(db) >= 1:
            again = subprocess.run(command, capture_output=True, text=True, timeout=120)
            assert again.returncode == 2, again.stderr[-2000:]
            refused.append(again.stderr.strip().splitlines()[-1])
        if not viewed and running_trials(db) >= 1:
            viewed.append(astune.status("killed", tracking_uri=f"sqlite:///{db}"))
        # one trial finished, the next evaluated twice: Ray's experiment holds its checkpoint
        # (the evaluation MLflow shows may be the one whose checkpoint Ray has not yet noted)
        return bool(refused) and count_finished(db) >= 1 and running_trials(db, 2) >= 1

    # to the driver's process group, as a closing terminal sends it: Ray's processes lead
    # groups of their own, so the driver alone gets it and stops gracefully, Ray's with it
    left: list[int] = []
    code, err, seconds = stop_command(command, [signal.SIGHUP], ready, to="group", left=left)
    assert "search 'killed' is running: its driver " in refused[0], refused
    assert_stopped(db, code, err, seconds, signal.SIGHUP)
    assert left == []  # 30 s after the driver's exit, no process of the search
    # between evaluations each running trial's progress reached MLflow (issue 72 item 2)
    client = MlflowClient(f"sqlite:///{db}")
    shares = [
        [m.value for m in client.get_metric_history(r.info.run_id, "progress")]
        for r in runs(client, "killed", "trial")
    ]
    assert any(shares) and all(0.0 < v <= 1.0 for share in shares for v in share), shares
    assert all(share == sorted(share) for share in shares), shares  # it only grows
    live, after = viewed[0], astune.status("killed", tracking_uri=f"sqlite:///{db}")
    assert live.status == "RUNNING" and not live.stale and live.num_samples == 3
    assert any(t.status == "RUNNING" for t in live.trials), str(live)
    assert after.status == "KILLED" and "resume it with: python -m astune search --dataset " \
        "sst5 --name killed" in str(after)  # fmt: skip
    done = [t.evaluations for t in after.trials if t.status == "FINISHED"]
    assert done and all(n == 3 for n in done), str(after)  # 3 epochs, one evaluation each
    finished = count_finished(db)
    # the unfinished trials' checkpoints cut short, as by an upload that died: each
    # restarts from its start, tagged so, and the search loses none of them
    cut = truncate_checkpoints(workdir)
    assert cut
    resume = search_command("killed", space, "--checkpoint-every", "eval", "--resume")
    code, err, seconds = stop_command(  # Ctrl-C twice in a terminal: to the foreground group
        resume, [signal.SIGINT, signal.SIGINT], lambda: running_trials(db) >= 1, to="group"
    )
    assert_stopped(db, code, err, seconds, signal.SIGINT)
    assert count_finished(db) >= finished

    resumed = subprocess.run(resume, capture_output=True, text=True, env=os.environ, timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    client = MlflowClient(f"sqlite:///{db}")
    parents, trial_runs = runs(client, "killed", "search"), runs(client, "killed", "trial")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    # a graceful stop saves Ray's experiment with every trial: none is lost, none runs twice
    assert not [r for r in trial_runs if LOST_TAG in r.data.tags]
    children = trial_runs
    assert len(children) == 3 and len({c.data.tags["astune.trial_id"] for c in children}) == 3
    assert all(c.info.status == "FINISHED" for c in children)
    restarted = {c.data.tags["astune.trial_id"] for c in children if RESTARTED in c.data.tags}
    assert restarted == set(cut)
    for child in children:  # a trial cut off mid-way continued from its checkpoint: no step twice
        steps = [m.step for m in client.get_metric_history(child.info.run_id, "objective")]
        assert steps == [0, 1, 2]

    # the front: the finished trials that no other beats on both objectives (written here)
    values = {
        c.data.tags["astune.trial_id"]: (
            c.data.metrics["best_objective"],
            c.data.metrics["train_seconds"],
        )
        for c in children
    }
    front = {
        t
        for t, (score, cost) in values.items()
        if not any(s >= score and c <= cost and (s > score or c < cost) for s, c in values.values())
    }
    tagged = {c.data.tags["astune.trial_id"] for c in children if c.data.tags.get("astune.pareto")}
    assert tagged == front
    assert "Pareto front" in resumed.stdout
    shown = resumed.stdout.split("Pareto front", 1)[1].splitlines()[2 : 2 + len(front)]
    assert {line.split()[0] for line in shown} == front


@pytest.mark.ray
def test_resume_refuses_changed_settings_before_ray_starts(searched, capsys, monkeypatch):
    from astune.tuning.runner import prepare_search

    monkeypatch.chdir(searched.workdir)

    def refused(argv: list[str]) -> str:
        code = main([*argv, "--resume"])
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert not ray.is_initialized()  # refused before Ray started
        return err

    def changed(flag: str, old: str, new: str) -> None:
        err = refused([*searched.argv, flag, new])  # the last of a flag given twice counts
        assert f"cannot change {flag}" in err and f"with {old}, now {new};" in err, err
        assert "another --name" in err, err

    err = refused([*searched.argv, "--num-samples", "3"])  # more extend it; fewer cannot be
    assert "cannot lower --num-samples: the search 'tiny' ran with 4, now 3; give 4 or more" in err
    changed("--scheduler", "none", "asha")
    changed("--losses", "as_softmax,softmax,am_softmax", "softmax")
    changed("--max-train-samples", "64", "48")
    changed("--epochs", "2.0", "3.0")

    client = MlflowClient(f"sqlite:///{searched.workdir / 'astune-runs' / 'mlflow.db'}")
    (parent,) = runs(client, "tiny", "search")
    digest = parent.data.params["space_sha256"]
    text = searched.space.read_text()
    edited = yaml.safe_load(text)  # the same file, edited in place
    edited["params"]["lr"]["value"] = 2.0e-3
    searched.space.write_text(yaml.safe_dump(edited))
    try:
        err = refused(searched.argv)
    finally:
        searched.space.write_text(text)
    assert "cannot change the --space contents" in err and f"with {digest}, now " in err, err

    # Flags left out on resume are the search's own, never a change.
    left_out = SearchSettings(
        dataset="sst5", name="tiny", resume=True, given=frozenset({"dataset", "name", "resume"})
    )
    prepared = prepare_search(left_out)
    assert (prepared.settings.backbone, prepared.settings.num_layers) == ("minilm", 1)
    assert (prepared.settings.max_train_samples, prepared.settings.epochs) == (64, 2.0)
    assert prepared.space.num_samples == 4 and prepared.space.scheduler["type"] == "none"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--dataset", "sst6"], "unknown dataset 'sst6'"),
        (  # one GPU more than the machine has: refused on a CPU machine and on a GPU one
            ["--dataset", "sst5", "--gpus-per-trial", str(GPUS + 1)],
            f"--gpus-per-trial {GPUS + 1} asks for more GPUs than this machine has ({GPUS})",
        ),
        (["--dataset", "sst5", "--losses", "softmax,focal"], "unknown loss 'focal'"),
        (["--dataset", "sst5", "--tracking-uri", "http://127.0.0.1:9"], "http://127.0.0.1:9"),
        (["--dataset", "sst5", "--resume", "--name", "never-ran"], "no search 'never-ran'"),
        (["--dataset", "sighan2015"], "no local copy of 'sighan2015'"),  # local files only
        (
            ["--dataset", "sst5", "--max-audio-seconds", "-1"],
            "--max-audio-seconds must be in [0.0, inf), but got -1.0",
        ),
        (
            ["--dataset", "sst5", "--max-length", "2"],
            "--max-length must be an integer in [8, inf), but got 2",
        ),
        (  # else every trial with a text longer than 512 tokens fails in the embeddings
            ["--dataset", "sst5", "--max-length", "1024"],
            "--max-length must be at most 512 (backbone 'minilm' takes 512 tokens), but got 1024",
        ),
    ],
)
def test_bad_search_requests_fail_within_seconds(workdir, capsys, argv, message):
    code = main(["search", "--backbone", "minilm", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not ray.is_initialized()  # refused before Ray started


def test_malformed_space_names_the_file_and_parameter(workdir, capsys):
    bad = workdir / "bad.yaml"
    bad.write_text(
        "extends: default\nloss_params:\n  as_softmax:\n"
        "    delta: {type: float, low: 0.2, high: 1.4}\n"
    )
    code = main(["search", "--dataset", "sst5", "--backbone", "minilm", "--space", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and "bad.yaml" in err and "delta" in err, err
    assert not ray.is_initialized()  # refused before Ray started


def test_asha_max_t_counts_the_reports_trials_make():
    """No ``epochs`` in the space: trials train the dataset's paper epochs (20 for CoNLL-2003)
    and report once per epoch plus a final report; with ``eval_every`` more often."""
    import dataclasses

    from astune.data.registry import get_spec
    from astune.space.space import load_space
    from astune.tuning.runner import max_reports

    space = load_space(SPACES / "tiny.yaml")
    no_epochs = dataclasses.replace(
        space, params={k: v for k, v in space.params.items() if k != "epochs"}
    )
    conll = get_spec("conll2003")
    assert max_reports(no_epochs, {}, spec=conll, n_train=160) == 21
    assert max_reports(no_epochs, {"epochs": 3}, spec=conll, n_train=160) == 4
    assert max_reports(space, {}, spec=conll, n_train=160) == 3  # the space's 2 epochs
    # 160 samples in batches of 16: at most 10 optimizer steps an epoch, an evaluation every
    # 4 of them (2) and one at the epoch's end
    assert max_reports(space, {"eval_every": 4}, spec=conll, n_train=160) == 2 * 3 + 1


def test_summary_prints_the_link_to_the_runs_view():
    from astune.store.uri import mlflow_ui_command
    from astune.tuning.console import format_summary
    from astune.tuning.settings import SearchResult

    summary = SearchResult(
        experiment="tiny",
        tracking_uri="sqlite:////tmp/x/mlflow.db",
        experiment_path="/tmp/x/ray/tiny",
        best_config={"loss": "softmax"},
        best_objective=0.5,
        metric="objective",
        num_trials=1,
        trial_states={"TERMINATED": 1},
        parent_run_id="abc",
        experiment_id="7",
    )
    text = format_summary(summary, mlflow_ui_command(summary.tracking_uri))
    assert "mlflow ui --backend-store-uri sqlite:////tmp/x/mlflow.db" in text
    assert "http://127.0.0.1:5000/#/experiments/7/runs" in text
    served = dataclasses_replace(summary, tracking_uri="http://mlflow.example:5000/")
    assert "http://mlflow.example:5000/#/experiments/7/runs" in format_summary(served, "x")


def dataclasses_replace(obj, **changes):
    import dataclasses

    return dataclasses.replace(obj, **changes)


def test_finished_trials_checkpoints_are_deleted_unless_the_search_keeps_them(tmp_path):
    from astune.cli.parser import build_parser
    from astune.store.writer import SearchTracker
    from astune.tuning.callbacks import DropFinishedCheckpoints
    from astune.tuning.settings import settings_from_args
    from astune.tuning.tuner import callbacks

    tracker = SearchTracker(
        f"sqlite:///{tmp_path / 'mlflow.db'}", "n", dataset="sst5", task="t", search_params={}
    )
    for flags, kept in (([], False), (["--keep-checkpoints"], True)):
        args = build_parser().parse_args(["search", "--dataset", "sst5", *flags])
        settings = settings_from_args(args)
        assert settings.keep_checkpoints is kept
        found = callbacks(settings, tracker, metric="objective", total=1)
        dropping = [c for c in found if isinstance(c, DropFinishedCheckpoints)]
        assert len(dropping) == (0 if kept else 1)


def test_scratch_of_a_killed_trial_is_cleaned_and_a_live_one_kept(tmp_path):
    from astune.tuning.lifecycle.scratch import clean_stale_scratch

    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    dead = tmp_path / f"astune-trial-abc-pid{killed.pid}-x1"
    live = tmp_path / f"astune-trial-def-pid{os.getpid()}-x2"
    other = tmp_path / "astune-trial-old-style-x3"  # no owner in its name: not ours to judge
    for folder in (dead, live, other):
        (folder / "checkpoint").mkdir(parents=True)
    assert clean_stale_scratch(tmp_path) == [dead]
    assert not dead.exists() and live.exists() and other.exists()


# The module paths of a search saved by older astunes, both layouts in one experiment: today's
# path -> the path of the time. The searcher (the one module of it that moved twice) by its flat
# path of before issue 61 (astune/tuning by job), every other module by its path of before issue
# 60 (the packages renamed: astune.search.*); test_moved follows a path through both moves.
MIXED_AGES = {**before_issue_60(), "astune.tuning.searchers.searcher": "astune.tuning.searcher"}


@pytest.mark.ray
@pytest.mark.slow
def test_a_search_saved_by_an_older_layout_resumes(searched, tmp_path, monkeypatch):
    """Ray pickles a search's Tuner, trainable, searcher, callbacks and trials by module path:
    a search started before the fourth layout names ``astune.search.*``, one started before
    ``astune/tuning`` went by job names its modules flat (``astune.tuning.searcher``). It
    resumes to the same best config, and ``astune.search`` stays the API's function."""
    import astune

    root = tmp_path / "old"
    shutil.copytree(searched.workdir, root)
    named = age_experiment(root / "astune-runs" / "ray" / "tiny", MIXED_AGES)
    assert "astune.tuning.searcher" in named, named  # issue 61's alias
    assert any(name.startswith("astune.search.") for name in named), named  # issue 60's
    monkeypatch.chdir(root)
    argv = [*searched.argv, "--resume"]
    with warnings.catch_warnings():  # "astune.tuning.searcher moved to ...", once a process
        warnings.simplefilter("ignore", DeprecationWarning)
        resumed = run_search(settings_from_args(build_parser().parse_args(argv)))
    assert resumed.best_config == searched.summary.best_config
    assert resumed.best_objective == searched.summary.best_objective
    assert astune.search.__module__ == "astune.api._search"


@pytest.mark.ray
@pytest.mark.slow
def test_a_finished_search_goes_on_to_more_trials(searched, tmp_path, monkeypatch, capsys):
    """`--resume --num-samples 5` on the finished 4-trial search (it was refused): one trial
    more, under the same parent run, proposed by the restored searcher (a new one would run
    the space's first seed point again); status counts 5 of 5, and a plain resume keeps 5."""
    root = tmp_path / "more"
    shutil.copytree(searched.workdir, root)
    monkeypatch.chdir(root)
    more = ["--resume", "--num-samples", "5", "--progress-every", "0.5"]  # progress lines
    assert main([*searched.argv, *more]) == 0
    out = capsys.readouterr().out
    assert "--num-samples 5: the search ran with 4; it goes on to 5 trials (1 more)" in out
    counted = re.findall(r"astune search: .+? in, (\d+)/(\d+) finished", out)
    # the 3 that ended stay finished; the failed one (am_softmax) reruns, as a resume reruns it
    assert counted[0] == ("3", "5") and all(total == "5" for _, total in counted), out
    assert "search 'tiny': 5 trials" in out
    uri = f"sqlite:///{root / 'astune-runs' / 'mlflow.db'}"
    client = MlflowClient(uri)
    (parent,) = runs(client, "tiny", "search")
    trials = sorted(runs(client, "tiny", "trial"), key=lambda r: r.info.start_time)
    assert len(trials) == 5 and parent.info.status == "FINISHED"
    before = {
        t.trial_id for t in astune.status("tiny", tracking_uri=searched.summary.tracking_uri).trials
    }
    assert {t.data.tags["astune.trial_id"] for t in trials[:4]} == before
    fifth = {k: v for k, v in trials[4].data.params.items() if k in ("loss", "delta", "lam")}
    first_seed = {"loss": "as_softmax", "delta": "0.3", "lam": "1.5"}
    assert fifth != first_seed, fifth  # the searcher went on from the four it was told
    found = astune.status("tiny", tracking_uri=uri)
    assert (found.num_samples, len(found.trials)) == (5, 5)
    from astune.tuning.runner import prepare_search

    given = frozenset({"dataset", "name", "resume"})  # --num-samples left out: 5, not 4
    again = prepare_search(SearchSettings(dataset="sst5", name="tiny", resume=True, given=given))
    assert again.space.num_samples == 5 and again.more_trials == 0


def test_astunes_pieces_for_a_tuner_of_your_own_are_the_searchs(tmp_path, monkeypatch, data_dir):
    """``compose.prepare`` hands back the search's own space and metric, without Ray; the Tuner
    built from them is compared with ``astune search`` on the installed wheel
    (tests/test_installed.py, docs/python.md's own Tuner)."""
    from astune.tuning import compose

    monkeypatch.chdir(tmp_path)
    space = write_space(tmp_path, **TINY_SEARCH)
    pieces = compose.prepare("sst5", space=str(space), name="own", data_dir=str(data_dir), **TINY)
    assert callable(pieces.define_by_run()) and pieces.metric == "objective"
    assert not ray.is_initialized()
