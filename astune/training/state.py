"""Checkpoint files of a training run: everything needed to resume it exactly.

A checkpoint folder holds ``state.pt`` (model, optimizer, AS-Speed, position, RNG states, best
metric, and where the weights of the best evaluation so far are: see :class:`BestWeights`).
Files are written to a temporary name and renamed, so an interrupted write leaves the previous
checkpoint whole. Both kinds of file hold only tensors and plain Python values (RNG states
included), so they are read with ``torch.load(weights_only=True)``: a file planted in a shared
storage path cannot run code.
"""

from __future__ import annotations

import io
import os
import pickle
import random
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np
import torch

STATE_FILE = "state.pt"
KEPT_CHECKPOINTS = 2
"""Checkpoints a search keeps per trial (Ray's ``num_to_keep``), and the best-weights files
kept with them. Not 1: Ray deletes the previous checkpoint as a new one registers, while the
experiment snapshot naming the new one may still be on its way to storage; a driver that dies
then resumes from a snapshot naming a deleted checkpoint (seen in tests/test_cluster.py)."""


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


def write_checkpoint(folder: Path, state: dict[str, Any]) -> Path:
    """Write ``state`` (the resume state, naming where its best weights are) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    save_atomic(state, folder / STATE_FILE)
    return folder


class CheckpointUnreadable(ValueError):
    """A checkpoint file that cannot be read back: missing or cut short (a copy or upload
    interrupted), or damaged. The message names the file."""


def read_checkpoint(folder: str | Path) -> dict[str, Any]:
    """The state saved in ``folder``; ValueError naming the folder if it holds anything but
    tensors and plain values (which would run code when unpickled); CheckpointUnreadable when
    its state file is missing (a copy or upload that never finished), truncated or damaged."""
    path = Path(folder) / STATE_FILE
    if not path.is_file():
        raise CheckpointUnreadable(f"no checkpoint in {folder}: {STATE_FILE} is missing.")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (EOFError, RuntimeError) as err:  # torch's zip reader on a file cut short
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise CheckpointUnreadable(
            f"{path} is unreadable ({path.stat().st_size} bytes; truncated or damaged): "
            f"{reason[:120]}"
        ) from None
    except pickle.UnpicklingError as err:
        reason = str(err).strip().splitlines()[0]
        raise ValueError(
            f"{path} is not a checkpoint astune wrote (it holds more than tensors and plain "
            f"values); refusing to load it: {reason}"
        ) from None


class BestWeights:
    """Where a run keeps the weights of its best evaluation while they differ from the current
    weights, one file per best evaluation (``best_model_e<N>.pt``), written once.

    A checkpoint names them (:data:`BEST_IS_CURRENT` when the best evaluation is the one just
    made: its weights are the state's model, so nothing more is written). In a search the
    files live in the trial's storage folder, outside the checkpoint folder that Ray copies at
    every report, so unchanged best weights are never uploaded again. ``filesystem`` is a
    ``pyarrow.fs.FileSystem`` (a local folder, or s3 in a cluster); ``root`` a path on it.
    """

    def __init__(self, filesystem: Any, root: str):
        self.filesystem, self.root = filesystem, root.rstrip("/")
        self.written: list[str] = []  # names put by this process, in order (for tests, logs)
        self.last_bytes = 0  # the size of the last file put

    @classmethod
    def local(cls, folder: str | Path) -> "BestWeights":
        from pyarrow import fs

        return cls(fs.LocalFileSystem(), str(Path(folder).resolve()))

    def _path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def put(self, weights: dict[str, torch.Tensor], evaluation: int) -> str:
        """Store the weights of ``evaluation``; returns the name a checkpoint records."""
        name = f"best_model_e{evaluation}.pt"
        buffer = io.BytesIO()
        torch.save(weights, buffer)
        self.filesystem.create_dir(self.root, recursive=True)
        tmp = self._path(name + ".tmp")
        with self.filesystem.open_output_stream(tmp) as out:
            out.write(buffer.getbuffer())
        self.filesystem.move(tmp, self._path(name))
        self.written.append(name)
        self.last_bytes = buffer.getbuffer().nbytes
        return name

    def get(self, name: str) -> dict[str, torch.Tensor]:
        """The weights stored as ``name`` (read as tensors only, like every checkpoint file)."""
        with self.filesystem.open_input_file(self._path(name)) as src:
            data = src.read()
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)

    def has(self, name: str) -> bool:
        from pyarrow import fs

        return self.filesystem.get_file_info(self._path(name)).type == fs.FileType.File

    def keep_only(self, names: Collection[str]) -> None:
        """Delete every stored best but ``names`` (those the kept checkpoints name)."""
        from pyarrow import fs

        found = self.filesystem.get_file_info(fs.FileSelector(self.root, allow_not_found=True))
        for info in found:
            if info.base_name.startswith("best_model_e") and info.base_name not in names:
                self.filesystem.delete_file(info.path)


BEST_IS_CURRENT = "current"
"""A checkpoint's ``best_weights`` when the best evaluation is the one it was written at."""


def best_weights_of(state: dict[str, Any], store: BestWeights, folder: Path) -> dict | None:
    """The best weights a checkpoint ``state`` names: its own model, the ``store``'s file, or a
    file beside the checkpoint (``folder``, a local run resumed from another folder)."""
    ref = state.get("best_weights")
    if ref is None:
        return None
    if ref == BEST_IS_CURRENT:
        return state["model"]
    return (store if store.has(ref) else BestWeights.local(folder)).get(ref)


def cpu_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached CPU copy of ``model``'s state dict (the best weights, a checkpoint's model)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
