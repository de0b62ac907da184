"""The trials of a restored search as Ray recorded them, for :mod:`astune.store.backfill`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from astune.store.backfill import TrialRecord
from astune.store.values import trial_run_name

if TYPE_CHECKING:
    from ray import tune
    from ray.tune import Result

RESULT_FILE = "result.json"  # Ray Tune's record of a trial's results, one JSON object a line


def trial_records(tuner: tune.Tuner, statuses: dict[str, str]) -> list[TrialRecord]:
    """Each trial of the restored ``tuner`` that reported something, with every result it
    reported; ``statuses``: trial id -> Ray status (``TERMINATED``: completed)."""
    records = []
    for result in tuner.get_results():
        trial_id = (result.metrics or {}).get("trial_id")
        if not trial_id:
            continue  # never reported: nothing to write
        config = result.config or {}
        records.append(
            TrialRecord(
                trial_id=trial_id,
                config=config,
                name=trial_run_name(trial_id, config),
                results=reported(result),
                completed=statuses.get(trial_id) == "TERMINATED",
            )
        )
    return records


def reported(result: Result) -> list[dict[str, Any]]:
    """The results in the trial folder's ``result.json``, in order ([] when there is none)."""
    from pyarrow import fs

    path = f"{result.path}/{RESULT_FILE}"
    if result.filesystem.get_file_info(path).type != fs.FileType.File:
        return []
    with result.filesystem.open_input_stream(path) as stream:
        text = stream.read().decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]
