"""A synthetic spelling-correction set from any sentences (the tests and
benchmarks/loss_kernels/csc_speed.py use SST-5's): each sentence as lower-case letters, each
letter of a look-alike pair swapped for its partner at a known rate, converted by `astune prepare
sighan`'s own code (:mod:`astune.data.sighan`) from the CSC JSON layout. A model that learns it
fixes the look-alikes from their context; copying the input scores a correction F1 of 0."""

from __future__ import annotations

import json
import random
from pathlib import Path

from astune.data.sighan import prepare_sighan

LOOK_ALIKES = {"c": "e", "e": "c", "i": "l", "l": "i", "m": "n", "n": "m", "u": "v", "v": "u"}
"""Letter -> the letter it is mistyped as (both ways)."""
RATE = 0.15
"""The chance that a letter with a look-alike is swapped."""
MAX_CHARS = 30


def letters(text: str) -> str:
    """The first :data:`MAX_CHARS` letters a-z of ``text``, lower-cased."""
    return "".join(c for c in text.lower() if "a" <= c <= "z")[:MAX_CHARS]


def corrupt(clean: str, rng: random.Random, rate: float = RATE) -> str:
    """``clean`` with each letter of :data:`LOOK_ALIKES` swapped with chance ``rate``."""
    return "".join(LOOK_ALIKES[c] if c in LOOK_ALIKES and rng.random() < rate else c for c in clean)


def synthetic_csc(
    out: Path, text_folder: Path, *, n_train: int = 256, n_test: int = 64, seed: int = 0
) -> Path:
    """Write the set to ``out`` (validation carved from train by `prepare`) from the ``text``
    field of ``text_folder``'s ``train.jsonl`` and ``test.jsonl`` (SST-5's layout); returns
    ``out``. The JSON sources go beside ``out``."""
    rng = random.Random(seed)
    sources = {}
    for split, n in (("train", n_train), ("test", n_test)):
        lines = (text_folder / f"{split}.jsonl").read_text().splitlines()
        texts = [letters(json.loads(line)["text"]) for line in lines]
        records = [
            {"original_text": corrupt(t, rng), "correct_text": t} for t in texts if len(t) >= 8
        ][:n]
        path = out.parent / f"{out.name}-{split}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(records))
        sources[split] = str(path)
    prepare_sighan([sources["train"]], test=sources["test"], out=out, validation_fraction=0.25)
    return out
