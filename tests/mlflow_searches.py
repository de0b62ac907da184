"""Real short searches shared by test_export.py and test_recommend.py: run once per session.

Two searches in one SQLite MLflow store, minilm with 1 layer and 64 training examples, 2 trials
each (the space's seed points): ``sst5-tiny`` (AS-Softmax only: its best trial is an AS one) and
``conll-tiny`` (AS-Softmax and softmax: a softmax baseline for the difficulty).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SPACE = Path(__file__).parent / "spaces" / "warmup.yaml"
_DONE: dict[str, "Searches"] = {}


@dataclass
class Searches:
    root: Path
    tracking_uri: str
    summaries: dict[str, Any]  # experiment name -> SearchSummary


def tiny_searches(tmp_path_factory: Any, data_dir: Path) -> Searches:
    """The searches, run on the first call of the session."""
    if "searches" not in _DONE:
        _DONE["searches"] = _run(tmp_path_factory.mktemp("searches"), data_dir)
    return _DONE["searches"]


def _run(root: Path, data_dir: Path) -> Searches:
    from astune.search.runner import SearchSettings, run_search

    uri = f"sqlite:///{root / 'mlflow.db'}"
    common = dict(
        space=str(SPACE),
        backbone="minilm",
        num_layers=1,
        max_train_samples=64,
        max_eval_samples=32,
        max_concurrent=2,
        tracking_uri=uri,
        storage_path=str(root / "ray"),
        data_dir=str(data_dir),
        console=False,
    )
    cwd = os.getcwd()
    os.chdir(root)  # Ray and MLflow write next to the working directory
    try:
        sst5 = SearchSettings(dataset="sst5", name="sst5-tiny", losses="as_softmax", **common)
        conll = SearchSettings(dataset="conll2003", name="conll-tiny", **common)
        summaries = {"sst5-tiny": run_search(sst5), "conll-tiny": run_search(conll)}
    finally:
        os.chdir(cwd)
    return Searches(root, uri, summaries)
