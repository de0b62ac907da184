"""`astune train` told to stop (astune/training/stop.py), as a user's Ctrl-C or Slurm's SIGTERM
reaches it: a real command on a slice of SST-5, sent the signal once it has evaluated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from astune.cli import main
from astune.cli.parser import build_parser
from astune.cli.train import train_config
from astune.training import LoopHooks, fit
from astune.training.state import read_checkpoint
from astune.training.stop import TrainingStopped, stop_after_step


def metrics(folder: Path) -> list[dict]:
    path = folder / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return [json.loads(line) for line in lines if line.endswith("}")]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_run_sent_sigterm_ends_after_its_step_with_one_line_and_keeps_its_records(
    sig, tmp_path, data_dir
):
    """SIGTERM (Slurm, `timeout`) or SIGHUP (a closed terminal, a dropped SSH session) to the
    run's process group: the same graceful stop, exit 128 + the signal."""
    out = tmp_path / "run"
    command = [sys.executable, "-m", "astune", "train", "--dataset", "sst5"]
    command += ["--data-dir", str(data_dir), "--backbone", "minilm", "--num-layers", "1"]
    command += ["--max-train-samples", "32", "--max-eval-samples", "16", "--epochs", "200"]
    command += ["--batch-size", "8", "--max-length", "32", "--checkpoint-every", "eval"]
    command += ["--device", "cpu", "--output-dir", str(out)]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    run = subprocess.Popen(  # a job of its own: SIGTERM goes to its whole process group, as
        # Slurm, `timeout` and `kill -- -PGID` send it (train starts no process: the run alone)
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not metrics(out) and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert run.poll() is None, "the run ended before it could be stopped"
        os.killpg(run.pid, sig)
        _, err = run.communicate(timeout=60)
    finally:
        run.kill()
        run.wait()
    assert run.returncode == 128 + sig, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"astune train: stopped by {sig.name} after optimizer step "), last
    assert last.endswith(
        f"{out} keeps metrics.jsonl and the checkpoints written so far (--resume goes on from "
        "the last)"
    ), last
    records = metrics(out)
    assert records and len(records) < 200  # whole records, the run cut short
    assert len((out / "metrics.jsonl").read_text().splitlines()) == len(records)
    assert not (out / "final.json").exists()
    assert read_checkpoint(out / "checkpoint")  # the last evaluation's, whole


def test_ctrl_c_stops_after_the_step_and_a_second_one_at_once(tmp_path):
    run = SimpleNamespace(pos=SimpleNamespace(steps=7, epoch=1, samples=56), out=tmp_path)
    with stop_after_step() as stop:
        stop.on_optimizer_step_end(run)  # no signal yet: the run goes on
        os.kill(os.getpid(), signal.SIGINT)  # noted, no KeyboardInterrupt mid-step
        with pytest.raises(TrainingStopped) as stopped:
            stop.on_optimizer_step_end(run)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)  # asked twice: at once
    assert stopped.value.exit_code == 130
    assert str(stopped.value) == (
        f"stopped by SIGINT after optimizer step 7 (epoch 2, 56 samples seen); {tmp_path} keeps "
        "metrics.jsonl and the checkpoints written so far (--resume goes on from the last)"
    )


class StopAt(LoopHooks):
    """Stops the run as ``astune train``'s signal hook does, after optimizer step ``step``."""

    def __init__(self, step: int):
        self.step = step

    def on_optimizer_step_end(self, run) -> None:
        if run.pos.steps == self.step:
            raise TrainingStopped("stopped", exit_code=143)


def test_train_resume_continues_a_stopped_run_to_the_uninterrupted_runs_end(
    tmp_path, data_dir, capsys, monkeypatch
):
    flags = ["train", "--dataset", "sst5", "--data-dir", str(data_dir), "--backbone", "minilm"]
    flags += ["--num-layers", "1", "--max-train-samples", "32", "--max-eval-samples", "16"]
    flags += ["--epochs", "3", "--batch-size", "8", "--max-length", "32", "--device", "cpu"]
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    assert main([*flags, "--output-dir", str(whole)]) == 0
    # stopped mid-way through its second epoch: 4 steps an epoch, a checkpoint at each epoch's end
    config = train_config(build_parser().parse_args([*flags, "--output-dir", str(stopped)]))
    with pytest.raises(TrainingStopped):
        fit(config, hooks=[StopAt(6)])
    assert len(metrics(stopped)) == 1 and not (stopped / "final.json").exists()

    changed = main([*flags, "--output-dir", str(stopped), "--resume", "--lr", "0.5"])
    assert changed == 2 and "--resume: cannot change --lr (the run was started with " in (
        capsys.readouterr().err
    )
    # as the run folder's line says, plus where it reads its data, which may change (another
    # mount): given relative to another folder here; the rest is the run's own
    monkeypatch.chdir(data_dir.parent)
    moved = ["train", "--output-dir", str(stopped), "--resume", "--data-dir", data_dir.name]
    assert main(moved) == 0
    ends = [json.loads((folder / "final.json").read_text()) for folder in (whole, stopped)]
    assert ends[1]["optimizer_steps"] == ends[0]["optimizer_steps"] == 12
    for key, value in ends[0].items():
        if key.startswith(("val_", "test_")):
            assert ends[1][key] == pytest.approx(value, abs=1e-6), key
    assert [r["objective"] for r in metrics(stopped)] == pytest.approx(
        [r["objective"] for r in metrics(whole)], abs=1e-6
    )


def test_train_resume_without_a_checkpoint_is_refused_in_one_line(tmp_path, data_dir, capsys):
    argv = ["train", "--dataset", "sst5", "--data-dir", str(data_dir), "--resume"]
    assert main([*argv, "--output-dir", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"astune train: error: --resume: no checkpoint in {tmp_path / 'none' / 'checkpoint'}; "
        "give the --output-dir of a run that wrote one (each evaluation writes one unless "
        "--checkpoint-every says otherwise)"
    )
