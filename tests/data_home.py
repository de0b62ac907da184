"""The folder of real data the tests read, and making it when there is none (tests/conftest.py).

The first of these that holds the four test datasets (astune.data.prepare.DEFAULT_DATASETS),
each as ``<name>/{train,validation,test}.jsonl`` and ``dataset.json``:

1. ``$ASTUNE_DATA_DIR``;
2. ``../shared/data`` beside the repository (this project's machines and CI);
3. the cache: ``$ASTUNE_TEST_DATA``, else ``astune prepare data``'s default folder
   (``$XDG_CACHE_HOME/astune/data``, else ``~/.cache/astune/data``).

When none does, the session writes the cache once from the datasets' hub sources with the code
of ``python -m astune prepare data`` (under its file lock: sessions and workers that come at
once wait, then find it). Offline, it stops at once with one line naming what is missing and
the command that prepares it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from astune.data.errors import DataError
from astune.data.loading import ENV_DATA_DIR
from astune.data.prepare import (
    DEFAULT_DATASETS,
    default_out,
    hub_unreachable_reason,
    missing,
    prepare_data,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
TEST_DATA_ENV = "ASTUNE_TEST_DATA"


class NoTestData(Exception):
    """No folder holds the test data and the hub cannot be read: one line, what to run."""


def cache_folder() -> Path:
    """Where the session prepares the data: ``$ASTUNE_TEST_DATA`` or the command's default."""
    return Path(os.environ.get(TEST_DATA_ENV) or default_out()).expanduser().resolve()


def places() -> list[tuple[str, Path | None]]:
    """The folders looked at, in order, each with the name a user knows it by."""
    given = os.environ.get(ENV_DATA_DIR)
    return [
        (ENV_DATA_DIR, Path(given).expanduser() if given else None),
        ("../shared/data", SHARED_DATA),
        ("the cache", cache_folder()),
    ]


def find_data() -> Path | None:
    """The first folder of :func:`places` that holds every test dataset, or None."""
    for _, folder in places():
        if folder is not None and not missing(folder, DEFAULT_DATASETS):
            return folder
    return None


def ensure_data(progress: Callable[[str], None]) -> Path:
    """:func:`find_data`, else the cache prepared from the hub (``progress`` gets its lines);
    NoTestData when the hub cannot be read."""
    found = find_data()
    if found is not None:
        return found
    folder = cache_folder()
    reason = hub_unreachable_reason()
    if reason is not None:
        raise NoTestData(no_data_line(reason))
    progress(f"no test data found; preparing it once into {folder} (ASTUNE_TEST_DATA moves it)")
    try:
        prepare_data(DEFAULT_DATASETS, folder, progress=progress)
    except DataError as err:  # the hub went away, a repository changed
        raise NoTestData(
            f"no test data: preparing it into {folder} failed: {err}; retry with: "
            f"python -m astune prepare data --out {folder}"
        ) from None
    return folder


def no_data_line(reason: str) -> str:
    """One line: where the data was looked for, what the cache lacks, why it cannot be made
    now, and the command that makes it."""
    looked = " nor ".join(
        f"{name} ({folder if folder is not None else 'unset'})" for name, folder in places()[:2]
    )
    cache = cache_folder()
    lacking = ", ".join(missing(cache, DEFAULT_DATASETS))
    return (
        f"no test data: neither {looked} holds {', '.join(DEFAULT_DATASETS)}, the cache {cache} "
        f"lacks {lacking}, and {reason}; prepare it where the hub is reachable with: "
        f"python -m astune prepare data --out {cache}"
    )
