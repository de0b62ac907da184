"""``astune prepare data``: registry datasets read from their hub sources through astune's own
loaders (:func:`astune.data.loading.load_hub_splits`) and written in the layout of the shared
data folder, ``<out>/<name>/{train,validation,test}.jsonl`` and ``<out>/<name>/dataset.json``.

The files hold the dataset's own columns (``text``/``label``/``label_text`` for sst5, ``intent``
for clinc_oos, ``tokens``/``ner_tags`` for conll2003, ``labels`` for go_emotions), label ids
as the registry's: a folder written here loads as ``--data-dir <out>`` or ``ASTUNE_DATA_DIR``,
and the tests use it when ``../shared/data`` is absent (tests/data_home.py).

Each dataset is written into a temporary folder beside its place and renamed into it, so a run
that is stopped or killed leaves no half dataset; a dataset already complete is kept (unless
``force``). One run at a time per ``out``: a file lock in ``out`` makes a second one wait.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astune.data.cache import astune_cache
from astune.data.errors import DataError
from astune.data.hub import HUB_MIRROR_ENV
from astune.data.loading import load_hub_splits
from astune.data.registry import REGISTRY
from astune.data.spec import SPLITS, DatasetSpec
from astune.losses.catalogue import MEDIA_TASKS

DEFAULT_DATASETS = ("sst5", "clinc_oos", "conll2003", "go_emotions")
"""What the tests read (tests/data_home.py), and what the command prepares by default."""
LOCK_NAME = ".prepare.lock"
_PARTIAL = ".partial-"  # the prefix of a folder being written: never a dataset
# The licences as the shared copies' dataset.json state them; another entry points at its card.
LICENCES = {
    "sst5": "research use (SST release terms)",
    "clinc_oos": "CC BY 3.0",
    "conll2003": "research use only (Reuters RCV1 terms); never redistribute",
    "go_emotions": "Apache 2.0",
}
# Columns the hub's files carry beside the label id: the label's name, written back as such.
LABEL_TEXT_COLUMNS = {"sst5": "label_text"}
# The canonical row key (astune.data.rows) of each dataset.json column key.
_CANONICAL = {
    "text_column": "text",
    "text_pair_column": "text_pair",
    "tokens_column": "tokens",
    "label_column": "label",
}

Progress = Callable[[str], None]


def default_out() -> Path:
    """``$XDG_CACHE_HOME/astune/data``, else ``~/.cache/astune/data``."""
    return astune_cache() / "data"


def preparable() -> tuple[str, ...]:
    """The registry entries this command can write: a hub source known to load, text or
    tokens (image and audio rows name files, which this layout does not carry)."""
    return tuple(
        name
        for name, spec in REGISTRY.items()
        if not spec.local_only and spec.task not in MEDIA_TASKS
    )


def check_request(datasets: str | Iterable[str], out: str | os.PathLike) -> tuple[list[str], Path]:
    """The dataset names (a comma-separated string or names) and the folder, checked without
    the hub or any heavy import: DataError in one line naming the bad value and what is
    accepted. Creates ``out`` (and its parents) when missing, to know it is writable."""
    names = datasets.split(",") if isinstance(datasets, str) else list(datasets)
    names = [name.strip() for name in names]
    accepted = preparable()
    if not names:
        raise DataError(f"--datasets: no dataset named; accepted: {', '.join(accepted)}")
    for name in names:
        if name not in accepted:
            raise DataError(
                f"--datasets: cannot prepare {name!r}; accepted (comma-separated): "
                f"{', '.join(accepted)}"
            )
    folder = Path(out).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        raise DataError(
            f"--out {str(folder)!r} is not a writable folder ({err.strerror or err}); "
            "give a folder you can write"
        ) from None
    return list(dict.fromkeys(names)), folder.resolve()


def hub_unreachable_reason() -> str | None:
    """Why the hub sources cannot be read now (offline, no connection), in words; None when
    the hub answers or ``$ASTUNE_HUB_MIRROR`` names a local mirror to read instead."""
    if os.environ.get(HUB_MIRROR_ENV):
        return None
    from huggingface_hub import constants

    from astune.data.hub_check import hub_unreachable

    if os.environ.get("HF_DATASETS_OFFLINE", "").upper() in constants.ENV_VARS_TRUE_VALUES:
        reason: str | None = "HF_DATASETS_OFFLINE is set, so the hub is not asked"
    else:
        reason = hub_unreachable(constants.ENDPOINT, offline=constants.HF_HUB_OFFLINE)
    return None if reason is None else f"the hub ({constants.ENDPOINT}) is unreachable: {reason}"


def is_prepared(folder: Path) -> bool:
    """Whether ``folder`` holds a dataset in this layout: its three splits and dataset.json."""
    files = [f"{split}.jsonl" for split in SPLITS] + ["dataset.json"]
    return all((folder / name).is_file() for name in files)


def missing(root: Path, names: Iterable[str] = DEFAULT_DATASETS) -> list[str]:
    """Those of ``names`` that ``root`` does not hold complete."""
    return [name for name in names if not is_prepared(root / name)]


@dataclass
class PreparedData:
    """What :func:`prepare_data` did: the rows written per dataset and split, and the datasets
    it kept as they were."""

    out: Path
    written: dict[str, dict[str, int]] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [
            f"{name} ({' / '.join(str(n) for n in sizes.values())})"
            for name, sizes in self.written.items()
        ]
        text = f"prepared {', '.join(parts) or 'nothing'} in {self.out}"
        if self.kept:
            text += f"; kept {', '.join(self.kept)} (complete already; --force writes them anew)"
        return text


def prepare_data(
    datasets: str | Iterable[str] = DEFAULT_DATASETS,
    out: str | os.PathLike | None = None,
    *,
    force: bool = False,
    progress: Progress | None = None,
) -> PreparedData:
    """Write each of ``datasets`` from its hub source into ``out/<name>`` (module docstring);
    ``out`` defaults to :func:`default_out`. ``progress`` gets one line per step (default:
    stderr). DataError in one line for bad input or a source that cannot be read."""
    names, folder = check_request(datasets, default_out() if out is None else out)
    say = progress or _to_stderr
    done = PreparedData(folder)
    with _locked(folder, say):
        for number, name in enumerate(names, 1):
            target = folder / name
            if is_prepared(target) and not force:
                done.kept.append(name)
                say(f"[{number}/{len(names)}] {name}: complete in {target}, kept")
                continue
            done.written[name] = _prepare_one(REGISTRY[name], target, say, f"{number}/{len(names)}")
    return done


def _prepare_one(spec: DatasetSpec, target: Path, say: Progress, step: str) -> dict[str, int]:
    start = time.monotonic()
    say(f"[{step}] {spec.name}: reading hub:{spec.hub_source} ...")
    loaded = load_hub_splits(spec)
    files = {split: layout_rows(loaded.spec, rows) for split, rows in loaded.splits.items()}
    sizes = {split: len(rows) for split, rows in files.items()}
    write_dataset(target, files, dataset_json(loaded.spec, sizes))
    counts = " / ".join(f"{n:,} {split}" for split, n in sizes.items())
    say(f"[{step}] {spec.name}: wrote {counts} rows to {target} ({time.monotonic() - start:.0f} s)")
    return sizes


def layout_rows(spec: DatasetSpec, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Canonical rows (``text``, ``tokens``, ``label`` ...) under ``spec``'s own column names,
    inputs first, then the label and (sst5) the label's name."""
    columns = {getattr(spec, key): _CANONICAL[key] for key in spec.column_keys()}
    text_column = LABEL_TEXT_COLUMNS.get(spec.name)
    out = []
    for row in rows:
        item = {column: row[key] for column, key in columns.items()}
        if text_column is not None and spec.label_names is not None:
            item[text_column] = spec.label_names[row["label"]]
        out.append(item)
    return out


def dataset_json(spec: DatasetSpec, sizes: dict[str, int]) -> dict[str, Any]:
    """The folder's description, with the keys of the shared copies' dataset.json."""
    meta: dict[str, Any] = {"task": spec.task}
    meta.update({key: getattr(spec, key) for key in spec.column_keys()})
    if spec.label_names is not None:
        meta["label_names"] = list(spec.label_names)
    else:
        meta["num_labels"] = spec.num_labels
    meta["source"] = f"hub:{spec.hub_source}, written by `python -m astune prepare data`"
    meta["hub_equivalent"] = spec.hub_source
    meta["licence"] = LICENCES.get(spec.name, f"as the hub's card of {spec.hub_id} states")
    meta["splits"] = sizes
    return meta


def write_dataset(target: Path, files: dict[str, list[dict]], meta: dict[str, Any]) -> None:
    """``files`` (split -> rows) as JSON lines and ``meta`` as dataset.json in ``target``,
    written into a temporary folder beside it and renamed into place: ``target`` is either
    the old folder or the whole new one, never a part (an old one is replaced)."""
    partial = target.parent / f"{_PARTIAL}{target.name}-{os.getpid()}"
    partial.mkdir()  # as the umask says (mkdtemp's folders are the owner's alone)
    try:
        for split, rows in files.items():
            with (partial / f"{split}.jsonl").open("w", encoding="utf-8") as handle:
                for row in rows:
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        text = json.dumps(meta, ensure_ascii=False, indent=2) + "\n"
        (partial / "dataset.json").write_text(text, encoding="utf-8")
        if target.exists():  # rename cannot replace a folder that has files
            old = target.parent / f"{_PARTIAL}old-{target.name}-{os.getpid()}"
            target.rename(old)
            partial.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            partial.rename(target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)  # gone already when renamed


@contextmanager
def _locked(folder: Path, say: Progress) -> Iterator[None]:
    """An exclusive ``fcntl.flock`` on ``folder``'s lock file for the block (POSIX, as the
    MLflow store's lock in astune.store.uri); then the folders a killed run left half written
    go, since no other run is writing now."""
    import fcntl

    with open(folder / LOCK_NAME, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another `astune prepare data` writing in {folder} ...")
            fcntl.flock(handle, fcntl.LOCK_EX)
        for stale in folder.glob(f"{_PARTIAL}*"):
            shutil.rmtree(stale, ignore_errors=True)
        yield  # closing the file releases the lock


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
