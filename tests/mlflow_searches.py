"""Real short searches shared by test_export.py, test_recommend.py and test_confirm.py (which
confirms on a copy of the store, ``stores.copy_store``): run once per test run,
also when the two modules run on different pytest-xdist workers (the first makes them under a
file lock in the run's shared temporary folder, the other waits and reads them).

Two searches in one SQLite MLflow store, minilm with 1 layer and 64 training examples, 2 trials
each (the space's seed points): ``sst5-tiny`` (AS-Softmax only: its best trial is an AS one) and
``conll-tiny`` (AS-Softmax and softmax: a softmax baseline for the difficulty); and in a store of
its own ``csc``, two trials of the paper's SIGHAN2015 space (its AS-Softmax seed points, one
epoch) on a synthetic spelling-correction set (test_csc.py).
"""

from __future__ import annotations

import fcntl
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiny import one_ray, tiny_settings

from astune.data.synthetic_csc import synthetic_csc

SPACE = Path(__file__).parent / "spaces" / "warmup.yaml"
SIGHAN_SPACE = Path(__file__).parents[1] / "search_spaces" / "sighan2015.yaml"
_DONE: dict[str, "Searches"] = {}


@dataclass
class Searches:
    root: Path
    tracking_uri: str
    summaries: dict[str, Any]  # experiment name -> SearchResult
    csc: CscSearch  # in a store of its own: the history of `recommend` is the two above


@dataclass
class CscSearch:
    """Two trials on a synthetic spelling-correction set (astune/data/synthetic_csc.py)."""

    folder: Path
    tracking_uri: str
    summary: Any


def tiny_searches(tmp_path_factory: Any, data_dir: Path) -> Searches:
    """The searches, run on the first call of the test run."""
    if "searches" not in _DONE:
        _DONE["searches"] = _shared(tmp_path_factory, data_dir)
    return _DONE["searches"]


def _shared(tmp_path_factory: Any, data_dir: Path) -> Searches:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return _run(tmp_path_factory.mktemp("searches"), data_dir)
    run_temp = tmp_path_factory.getbasetemp().parent  # the workers' common folder of this run
    root, done = run_temp / "searches", run_temp / "searches.pickle"
    with open(run_temp / "searches.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            root.mkdir()
            done.write_bytes(pickle.dumps(_run(root, data_dir)))
        return pickle.loads(done.read_bytes())


def _run(root: Path, data_dir: Path) -> Searches:
    from astune.tuning.runner import run_search

    # one trial at a time: one actor (its imports cost ~8 CPU-s), reused by the next trial;
    # test_tracking and test_cluster run trials side by side
    common = dict(space=str(SPACE), max_concurrent=1, root=root, data_dir=data_dir)
    cwd = os.getcwd()
    os.chdir(root)  # Ray and MLflow write next to the working directory
    try:
        sst5 = tiny_settings("sst5", name="sst5-tiny", losses="as_softmax", **common)
        conll = tiny_settings("conll2003", name="conll-tiny", **common)
        folder = synthetic_csc(root / "csc-data" / "letters", data_dir / "sst5")
        csc = tiny_settings(
            str(folder), name="csc", root=root / "csc", space=str(SIGHAN_SPACE), num_samples=2,
            max_concurrent=1, epochs=1, max_length=34,  # one actor, reused: one import
        )  # fmt: skip
        with one_ray():  # the searches join one Ray
            summaries = {"sst5-tiny": run_search(sst5), "conll-tiny": run_search(conll)}
            csc_summary = run_search(csc)
    finally:
        os.chdir(cwd)
    uri = sst5.tracking_uri
    return Searches(root, uri, summaries, CscSearch(folder, csc.tracking_uri, csc_summary))
