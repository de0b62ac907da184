"""How config values and trial results become MLflow params and metrics (limits, names, steps)."""

from __future__ import annotations

import numbers
import re
import time
from collections.abc import Mapping
from typing import Any

from astune.store.conventions import CONVENTION_PARAMS, NOT_APPLICABLE, RAY_RESULT_KEYS

_MAX_PARAM_LENGTH = 6000
_BAD_METRIC_CHARS = re.compile(r"[^\w\-. /:]")  # MLflow rejects a batch with other characters


def param_value(value: Any) -> str:
    return str(value)[:_MAX_PARAM_LENGTH]


def flat_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """MLflow params of a (possibly nested) mapping: nested keys joined with ``/``."""
    params: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            params.update(flat_params(value, f"{name}/"))
        else:
            params[name] = param_value(value)
    return params


def trial_params(config: Mapping[str, Any]) -> dict[str, str]:
    """The params of a trial run: its config, and every convention param ("None" if absent)."""
    params = {key: NOT_APPLICABLE for key in CONVENTION_PARAMS}
    params.update(flat_params(config))
    return params


def trial_run_name(trial_id: str, config: Mapping[str, Any] | None) -> str:
    """The name of a trial's run: ``<loss>-<trial id>``, the trial id alone without a loss."""
    loss = config.get("loss") if isinstance(config, Mapping) else None
    return f"{loss}-{trial_id}" if loss else trial_id


def result_metrics(result: Mapping[str, Any]) -> tuple[dict[str, float], int]:
    """The metrics of one Tune result and their step (``evaluation``, else iteration - 1)."""
    metrics = {
        _BAD_METRIC_CHARS.sub("_", str(key)): float(value)
        for key, value in result.items()
        if key not in RAY_RESULT_KEYS
        and isinstance(value, numbers.Real)
        and not isinstance(value, bool)
    }
    step = result.get("evaluation")
    if not isinstance(step, numbers.Integral) or isinstance(step, bool):
        step = int(result.get("training_iteration") or 1) - 1
    return metrics, int(step)


def now_ms() -> int:
    return int(time.time() * 1000)
