"""Trials' scratch folders in the node's temp folder, and the cleaning of those left behind.

A trial removes its own folder when it ends; one killed with SIGKILL (out of memory, a lost
node) cannot, and a run folder weighs hundreds of MB. The folder's name carries the owning
process id, so the next trial on the node (and the driver at search end) removes the folders
whose process is gone.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

PREFIX = "astune-trial-"
_OWNER = re.compile(rf"^{PREFIX}.*-pid(\d+)-")


def make_scratch(trial_id: str) -> str:
    """A fresh scratch folder for ``trial_id``, named after this process."""
    return tempfile.mkdtemp(prefix=f"{PREFIX}{trial_id}-pid{os.getpid()}-")


def clean_stale_scratch(root: str | Path | None = None) -> list[Path]:
    """Remove the scratch folders in ``root`` (the temp folder) whose process is gone."""
    removed = []
    for folder in Path(root or tempfile.gettempdir()).glob(f"{PREFIX}*"):
        match = _OWNER.match(folder.name)
        if match and folder.is_dir() and not _alive(int(match.group(1))):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive, and not ours to clean
        return True
    return True
