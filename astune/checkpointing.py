"""Checkpoint files of a training run: everything needed to resume it exactly.

A checkpoint folder holds ``state.pt`` (model, optimizer, AS-Speed, position, RNG states, best
metric) and ``best_model.pt`` (the weights of the best evaluation so far). Files are written to
a temporary name and renamed, so an interrupted write leaves the previous checkpoint whole.
Both hold only tensors and plain Python values (RNG states included), so they are read with
``torch.load(weights_only=True)``: a file planted in a shared storage path cannot run code.
"""

from __future__ import annotations

import os
import pickle
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

STATE_FILE = "state.pt"
BEST_MODEL_FILE = "best_model.pt"


def rng_state() -> dict[str, Any]:
    """Every random state a training step draws from, as tensors and plain values."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_atomic(obj: Any, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def write_checkpoint(folder: Path, state: dict[str, Any], best_model: dict | None) -> Path:
    """Write ``state`` (and ``best_model`` weights when they changed) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    if best_model is not None:
        save_atomic(best_model, folder / BEST_MODEL_FILE)
    save_atomic(state, folder / STATE_FILE)
    return folder


def read_checkpoint(folder: str | Path) -> dict[str, Any]:
    """The state saved in ``folder``; ValueError naming the folder if it holds none, or holds
    anything but tensors and plain values (which would run code when unpickled)."""
    path = Path(folder) / STATE_FILE
    if not path.is_file():
        raise ValueError(f"no checkpoint in {folder}: {STATE_FILE} is missing.")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        reason = str(err).strip().splitlines()[0]
        raise ValueError(
            f"{path} is not a checkpoint astune wrote (it holds more than tensors and plain "
            f"values); refusing to load it: {reason}"
        ) from None


def adopt_best_model(source: str | Path, folder: Path) -> None:
    """Copy the best weights of a checkpoint being resumed into this run's checkpoint folder."""
    src = Path(source) / BEST_MODEL_FILE
    dst = folder / BEST_MODEL_FILE
    if src.is_file() and src.resolve() != dst.resolve():
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)


def load_best_model(folder: Path) -> dict[str, torch.Tensor]:
    return torch.load(folder / BEST_MODEL_FILE, map_location="cpu", weights_only=True)
