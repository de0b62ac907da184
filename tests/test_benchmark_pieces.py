"""Long benchmark runs in pieces (benchmarks/common/pieces.py): a run whose deadline has passed
stops right after a checkpoint, never at its last evaluation, and resumes to the result of a run
never paused; a claim is held by one process at a time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from training_runs import EVERY_EVALUATION, LOOP_BASE, read_metrics, sst5_slice
from training_runs import loop_config as config

from astune.training import fit
from astune.training.state import STATE_FILE
from benchmarks.common.pieces import PauseAfter, Paused, claim


@pytest.mark.slow
def test_a_run_past_its_deadline_pauses_at_a_checkpoint_and_resumes_to_the_same_end(
    tmp_path, data_dir
):
    sst5 = sst5_slice(LOOP_BASE, data_dir, n_train=48, n_eval=32)
    expected = fit(config(tmp_path, "whole", data_dir, epochs=2, **EVERY_EVALUATION), data=sst5)

    paused = config(tmp_path, "paused", data_dir, epochs=2, **EVERY_EVALUATION)
    with pytest.raises(Paused):
        fit(paused, data=sst5, hooks=[PauseAfter(time.monotonic())])  # the deadline has passed
    assert [r["evaluation"] for r in read_metrics(paused)] == [0]  # the first of two
    checkpoint = Path(paused.output_dir) / "checkpoint"
    assert (checkpoint / STATE_FILE).exists()

    # still past the deadline: the last evaluation never pauses, so the test split is scored
    resumed = fit(paused, data=sst5, resume_from=checkpoint, hooks=[PauseAfter(time.monotonic())])
    assert [r["evaluation"] for r in read_metrics(paused)] == [0, 1]
    for key in ("val_accuracy", "test_accuracy", "test_loss", "best_evaluation"):
        assert resumed[key] == expected[key], key


def test_a_run_before_its_deadline_is_not_paused(tmp_path, data_dir):
    sst5 = sst5_slice(LOOP_BASE, data_dir, n_train=16, n_eval=16)
    run = config(tmp_path, "run", data_dir, epochs=2, **EVERY_EVALUATION)
    fit(run, data=sst5, hooks=[PauseAfter(time.monotonic() + 3600)])
    assert len(read_metrics(run)) == 2


def test_a_claim_is_held_by_one_holder_until_let_go(tmp_path):
    path = tmp_path / "folder" / "run.claim"
    with claim(path) as first, claim(path) as second:
        assert (first, second) == (True, False)
    with claim(path) as again:
        assert again
