"""Where astune keeps files it can rebuild (prepared datasets, decoded media): the XDG cache."""

from __future__ import annotations

import os
from pathlib import Path


def astune_cache() -> Path:
    """``$XDG_CACHE_HOME/astune``, else ``~/.cache/astune``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "astune"
