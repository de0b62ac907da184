"""Trial runs read back as Optuna trials: what the report's importances and the search's Optuna
storage share. Distributions are inferred from the values the runs logged (Ray-free)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from astune.store.reader import parse_value

if TYPE_CHECKING:
    import optuna

# Settings every trial of a search shares, or that do not shape a trial's score.
NOT_SEARCHED = frozenset(
    {"seed", "dataset", "data_dir", "backbone", "device", "output_dir", "precision"}
)


def logged_value(params: dict[str, str], key: str) -> Any:
    """A logged param as Python (by the config schema), booleans as text (a category); None
    for a missing or not-applicable param."""
    value = parse_value(params.get(key), key)
    return str(value) if isinstance(value, bool) else value


def distributions(
    all_params: list[dict[str, str]],
) -> dict[str, "optuna.distributions.BaseDistribution"]:
    """A distribution per param that takes more than one value over the runs: an int or float
    range spanning them (log-scaled when it spans a decade, as a learning rate does), else the
    categories seen."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    keys = {k for params in all_params for k in params if k not in NOT_SEARCHED}
    out: dict[str, Any] = {}
    for key in sorted(keys):
        seen = sorted({v for p in all_params if (v := logged_value(p, key)) is not None}, key=str)
        if len(seen) < 2:
            continue
        if not all(isinstance(v, (int, float)) for v in seen):
            out[key] = CategoricalDistribution([str(v) for v in seen])
        elif all(isinstance(v, int) for v in seen):
            out[key] = IntDistribution(int(min(seen)), int(max(seen)))
        else:
            low, high = float(min(seen)), float(max(seen))
            out[key] = FloatDistribution(low, high, log=low > 0 and high / low >= 10)
    return out


def frozen_trial(
    params: dict[str, str],
    dists: dict[str, "optuna.distributions.BaseDistribution"],
    value: float | list[float] | None,
    state: str = "COMPLETE",
) -> "optuna.trial.FrozenTrial":
    """An Optuna trial of a run's logged ``params`` (those ``dists`` has), its ``value`` (one
    per objective: a list for a multi-objective study) and ``state`` (an
    ``optuna.trial.TrialState`` name)."""
    import optuna

    present = {k: v for k in dists if (v := logged_value(params, k)) is not None}
    if state != "COMPLETE":
        value = None  # Optuna keeps values for complete trials only
    values = value if isinstance(value, list) else None
    return optuna.trial.create_trial(
        params={
            k: str(v) if isinstance(dists[k], _categorical()) else v for k, v in present.items()
        },
        distributions={k: dists[k] for k in present},
        value=None if values is not None else value,
        values=values,
        state=optuna.trial.TrialState[state],
    )


def _categorical() -> type:
    from optuna.distributions import CategoricalDistribution

    return CategoricalDistribution
