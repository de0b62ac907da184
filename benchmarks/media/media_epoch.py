"""Image and audio training on the tests' offline data: accuracy reached and time per epoch.

The data and backbones are those of ``tests/test_media.py`` (made here by ``tests/media_data``):
scikit-learn's digits 0-3 as PNG class folders with a config-only 2-layer ViT (16x16, 4x4
patches), and espeak-ng speech (4 words, 24 voices x 2 speeds, 16 kHz WAV resampled to 8 kHz)
with a config-only 2-layer wav2vec2. For each, one process:

  - trains AS-Softmax (delta 0.3) and softmax with the same seed (``astune.training.fit``) and
    reports best validation / test accuracy and seconds per epoch (``train_seconds / epochs``:
    training only, evaluations excluded);
  - times one pass over the train split's batches through ``collate`` alone (decode + the
    processor, no model), and reports it as a share of an epoch: what per-batch decoding costs.

Usage: ``nice -n 10 python -m benchmarks.media.media_epoch [--out DIR]``; writes media_epoch.png
(validation accuracy per epoch) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

from astune.config import TrainConfig
from astune.data.encoded import load_encoded
from astune.training import fit
from benchmarks.common import provenance
from benchmarks.common.harness import machine_line
from benchmarks.media import RESULTS
from tests import media_data

SETUPS = media_data.TRAINING  # task: epochs, lr, batch size (those of tests/test_media.py)


def make_data(root: Path) -> dict[str, tuple[Path, Path]]:
    return {
        "image": (media_data.write_digits(root / "digits"), media_data.tiny_vit(root / "vit")),
        "audio": (
            media_data.write_speech(root / "speech"),
            media_data.tiny_wav2vec2(root / "wav2vec2"),
        ),
    }


def run(task: str, dataset: Path, backbone: Path, loss: str, out: Path) -> dict:
    epochs = SETUPS[task]["epochs"]
    config = TrainConfig(
        dataset=str(dataset),
        backbone=str(backbone),
        loss=loss,
        delta=0.3,  # used by as_softmax only
        **SETUPS[task],
        weight_decay=0.0,
        seed=0,
        output_dir=str(out / f"{task}-{loss}"),
    ).validate()
    final = fit(config)
    history = [json.loads(x) for x in Path(config.output_dir, "metrics.jsonl").open()]
    data = load_encoded(config)
    start = time.perf_counter()
    for _ in data.batches("train", SETUPS[task]["batch_size"], shuffle=True):
        pass
    decode = time.perf_counter() - start
    per_epoch = final["train_seconds"] / epochs
    return {
        "task": task,
        "loss": loss,
        "n_train": len(data.splits["train"]),
        "epochs": epochs,
        "s_per_epoch": per_epoch,
        "decode_s_per_epoch": decode,
        "decode_share": decode / per_epoch,
        "val_accuracy": final["val_accuracy"],
        "test_accuracy": final["test_accuracy"],
        "curve": [h["val_accuracy"] for h in history],
    }


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, task in zip(axes, SETUPS):
        for r in (r for r in results if r["task"] == task):
            ax.plot(range(1, len(r["curve"]) + 1), r["curve"], marker="o", label=r["loss"])
        ax.axhline(0.25, color="grey", ls=":", label="chance")
        ax.set(title=f"{task} (tiny config-only model)", xlabel="epoch", ylabel="val accuracy")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(RESULTS), help="the folder media_epoch.png goes to")
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)  # the random-initialisation warning
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        setups = make_data(Path(tmp))
        for task, (dataset, backbone) in setups.items():
            for loss in ("softmax", "as_softmax"):
                results.append(run(task, dataset, backbone, loss, Path(tmp)))
                print(f"done {task} {loss}", file=sys.stderr, flush=True)
    header = f"{'task':6} {'loss':10} {'train':>5} {'ep':>3} {'s/epoch':>8} {'decode s':>8} "
    print(header + f"{'decode share':>12} {'val acc':>7} {'test acc':>8}")
    for r in results:
        print(
            f"{r['task']:6} {r['loss']:10} {r['n_train']:5d} {r['epochs']:3d} "
            f"{r['s_per_epoch']:8.2f} {r['decode_s_per_epoch']:8.2f} {r['decode_share']:12.2f} "
            f"{r['val_accuracy']:7.3f} {r['test_accuracy']:8.3f}"
        )
    plot(results, Path(args.out) / "media_epoch.png")
    inputs = provenance.generated_inputs(media_data.TRAINING)  # the tests' data makers' settings
    provenance.record(Path(args.out) / "media_epoch.png", inputs=inputs, machine=machine_line())


if __name__ == "__main__":
    main()
