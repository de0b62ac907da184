"""The training loop with the fused kernel (``--loss-kernel triton``): under triton's
interpreter on the CPU, a short AS-Softmax run with AS-Skip, single- and multi-label, follows
the torch function's run step for step (the loop asks the kernel to overwrite the logits and
logs the kernel's own margins); without the interpreter the flag is refused in one line
before anything trains."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from astune.cli import main

ROOT = Path(__file__).resolve().parents[1]
COMPARED = ("train_loss", "objective", "masked_ratio", "train_margin", "skipped_ratio")

SCRIPT = """
import json, sys, tempfile
import torch
from astune.config import TrainConfig
from astune.training import Run
torch.set_num_threads(1)
out = {}
for kernel in ("torch", "triton"):
    with tempfile.TemporaryDirectory() as folder:
        config = TrainConfig(
            dataset=sys.argv[2], data_dir=sys.argv[1], backbone="minilm", num_layers=1,
            max_length=32, max_train_samples=48, max_eval_samples=16, epochs=3, batch_size=16,
            lr=float(sys.argv[5]), loss=sys.argv[3], delta=float(sys.argv[4]), as_skip=True,
            skip_keep=0.5, seed=0, device="cpu", loss_kernel=kernel, output_dir=folder,
            checkpoint_every="end",
        )
        run = Run(config)
        out[kernel] = {"overwrite": run.loss_fn.overwrite_logits, "history": []}
        run.train(lambda record, _ckpt: out[kernel]["history"].append(record))
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "dataset, loss, delta, lr",
    # 28 classes: a smaller delta and a faster rate, so 3 tiny epochs mask and skip rows
    [("sst5", "as_softmax", 0.3, 1e-3), ("go_emotions", "multilabel_as_softmax", 0.1, 3e-3)],
)
def test_the_fused_kernel_trains_as_the_torch_function(data_dir, dataset, loss, delta, lr):
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(data_dir), dataset, loss, str(delta), str(lr)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    runs = json.loads(done.stdout.strip().splitlines()[-1])
    assert runs["triton"]["overwrite"] and runs["torch"]["overwrite"]
    torch_history, triton_history = runs["torch"]["history"], runs["triton"]["history"]
    assert len(torch_history) == len(triton_history) == 3
    assert any(r["masked_ratio"] > 0 for r in torch_history), "AS-Softmax masked nothing"
    assert any(r.get("skipped_ratio", 0) > 0 for r in torch_history), "AS-Skip skipped nothing"
    for ours, theirs in zip(triton_history, torch_history):
        for key in COMPARED:
            if key in theirs:
                assert ours[key] == pytest.approx(theirs[key], rel=1e-4, abs=1e-6), key


def test_triton_on_the_cpu_without_the_interpreter_is_refused_in_one_line(tmp_path, capsys):
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.fail("run this test without TRITON_INTERPRET=1: it checks the refusal")
    argv = ["train", "--dataset", "sst5", "--device", "cpu", "--loss-kernel", "triton"]
    argv += ["--backbone", "minilm", "--num-layers", "1", "--max-train-samples", "16"]
    assert main([*argv, "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "kernel='triton' needs CUDA tensors" in err, err
    assert not (tmp_path / "metrics.jsonl").exists()
