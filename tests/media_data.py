"""Small real image and audio datasets made offline, and tiny config-only ViT / wav2vec2 folders.

Images: scikit-learn's handwritten digits (8x8, 0-16 grey levels) written as PNG files in the
class-folder layout. Audio: words spoken by espeak-ng (Debian) in several voices, speeds and
pitches, converted to 16 kHz mono WAV by sox, listed in JSONL splits with a path column.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

DIGITS = (0, 1, 2, 3)
WORDS = ("yes", "no", "stop", "seven")
VOICES = ("en-gb", "en-us", "en-gb-scotland", "en-gb-x-rp", "en-029", "en-us-nyc")
VARIANTS = ("", "+m3", "+f2", "+f4")
SPEEDS = (130, 175)
FILE_RATE = 16_000
EXTRACTOR_RATE = 8_000
# What the tiny models learn these data with: the tests and benchmarks/media/media_epoch.py.
TRAINING = {
    "image": {"epochs": 8, "lr": 3e-3, "batch_size": 8},
    "audio": {"epochs": 6, "lr": 5e-3, "batch_size": 16},
}
SPLIT_SHARES = (("train", 0.7), ("validation", 0.15), ("test", 0.15))


def write_digits(folder: Path, per_class: int = 90) -> Path:
    """``folder/{train,validation,test}/<digit>/<n>.png`` for the digits 0-3 and a dataset.json.

    ``per_class`` images of each digit, split 70/15/15 in load_digits' order.
    """
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    for digit in DIGITS:
        images = digits.images[digits.target == digit][:per_class]
        for split, (start, stop) in _split_ranges(len(images)).items():
            out = folder / split / str(digit)
            out.mkdir(parents=True, exist_ok=True)
            for n in range(start, stop):
                pixels = (images[n] * (255 / 16)).round().astype(np.uint8)
                Image.fromarray(pixels, mode="L").save(out / f"{n}.png")
    meta = {"task": "image", "label_names": [str(d) for d in DIGITS]}
    (folder / "dataset.json").write_text(json.dumps(meta))
    return folder


def write_speech(folder: Path) -> Path:
    """``folder/wav/*.wav`` (16 kHz mono) of :data:`WORDS` in every voice, variant and speed,
    with ``{train,validation,test}.jsonl`` rows ``{"file": "wav/...", "word": "<word>"}`` split
    70/15/15 per word (seeded) and a dataset.json."""
    if shutil.which("espeak-ng") is None or shutil.which("sox") is None:
        raise FileNotFoundError("espeak-ng and sox are needed: apt-get install espeak-ng sox")
    (folder / "wav").mkdir(parents=True, exist_ok=True)
    jobs = [
        (word, voice + variant, speed)
        for word in WORDS
        for voice in VOICES
        for variant in VARIANTS
        for speed in SPEEDS
    ]
    with ThreadPoolExecutor(4) as pool:
        names = list(pool.map(lambda job: _speak(folder / "wav", *job), jobs))
    rows = {split: [] for split, _ in SPLIT_SHARES}
    for word in WORDS:
        mine = [name for name, job in zip(names, jobs) if job[0] == word]
        random.Random(word).shuffle(mine)
        for split, (start, stop) in _split_ranges(len(mine)).items():
            rows[split] += [{"file": f"wav/{name}", "word": word} for name in mine[start:stop]]
    for split, items in rows.items():
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in items))
    meta = {
        "task": "audio",
        "audio_column": "file",
        "label_column": "word",
        "label_names": list(WORDS),
    }
    (folder / "dataset.json").write_text(json.dumps(meta))
    return folder


def _speak(out: Path, word: str, voice: str, speed: int) -> str:
    name = f"{word}_{voice.replace('+', '_')}_{speed}.wav"
    raw = out / f"raw_{name}"
    subprocess.run(
        ["espeak-ng", "-v", voice, "-s", str(speed), "-w", str(raw), word],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["sox", str(raw), "-r", str(FILE_RATE), "-c", "1", "-b", "16", str(out / name)],
        check=True,
        capture_output=True,
    )
    raw.unlink()
    return name


def _split_ranges(n: int) -> dict[str, tuple[int, int]]:
    out, start = {}, 0
    for i, (split, share) in enumerate(SPLIT_SHARES):
        stop = n if i == len(SPLIT_SHARES) - 1 else start + round(share * n)
        out[split], start = (start, stop), stop
    return out


def tiny_vit(folder: Path) -> Path:
    """A config-only ViT: 16x16 input, 4x4 patches, 2 layers of width 32 (random weights)."""
    from transformers import ViTConfig, ViTImageProcessor

    ViTConfig(
        image_size=16,
        patch_size=4,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
    ).save_pretrained(folder)
    ViTImageProcessor(size={"height": 16, "width": 16}).save_pretrained(folder)
    return folder


def tiny_wav2vec2(folder: Path) -> Path:
    """A config-only wav2vec2 whose extractor works at 8 kHz (the 16 kHz files get resampled):
    3 conv layers (stride 128, 16 ms frames), 2 layers of width 32, layer norm and attention
    masks (the wav2vec2-large convention)."""
    from transformers import Wav2Vec2Config, Wav2Vec2FeatureExtractor

    Wav2Vec2Config(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        conv_dim=(16, 32, 32),
        conv_stride=(8, 4, 4),
        conv_kernel=(8, 4, 4),
        feat_extract_norm="layer",
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4,
        mask_time_prob=0.0,
        classifier_proj_size=32,
    ).save_pretrained(folder)
    Wav2Vec2FeatureExtractor(
        sampling_rate=EXTRACTOR_RATE, return_attention_mask=True
    ).save_pretrained(folder)
    return folder
