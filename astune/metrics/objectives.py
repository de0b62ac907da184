"""What a search optimises: the primary metric, alone or with costs, and the Pareto front.

A multi-objective search maximises (or minimises, where the dataset says so) its primary
metric, logged by every trial as ``objective``, and minimises one or more costs, each a figure
of the run that every evaluation and the final report carry:

- ``train_seconds``: training wall time in seconds, evaluations and checkpoint writes excluded;
- ``samples_computed``: samples that went through forward and backward (AS-Skip leaves some
  out);
- ``optimizer_steps``: optimizer updates (AS-Speed's accumulation makes fewer).

A trial is on the front when no other trial is at least as good on every objective and better
on one (Optuna's ``study.best_trials`` by the same rule: equal trials are both on it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

PRIMARY = "objective"
COSTS: dict[str, str] = {
    "train_seconds": "training wall time, evaluation excluded",
    "samples_computed": "samples through forward and backward",
    "optimizer_steps": "optimizer updates",
}


def _accepted(metric: str) -> str:
    return f"{metric!r} (the primary metric) and costs {', '.join(map(repr, COSTS))}"


def parse_objectives(value: str | Iterable[str], *, metric: str = PRIMARY) -> tuple[str, ...]:
    """``"objective,train_seconds"`` (or a list) as names, the primary ``metric`` first and the
    costs in the order given. ValueError (one line) on an unknown or repeated name, or costs
    without the metric."""
    names = value.split(",") if isinstance(value, str) else list(value)
    names = [n.strip() if isinstance(n, str) else n for n in names]
    if not names or any(not n for n in names):
        raise ValueError(
            f"objectives must list names, but got {value!r}; accepted: {_accepted(metric)}"
        )
    for name in names:
        if name != metric and name not in COSTS:
            raise ValueError(
                f"unknown objective {name!r} in {value!r}; accepted: {_accepted(metric)}"
            )
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"objective {repeated[0]!r} is given twice in {value!r}; name each once")
    if metric not in names:
        raise ValueError(
            f"objectives {value!r} leave out the primary metric {metric!r}: a cost alone is "
            f"minimised by stopping at once; accepted: {_accepted(metric)}"
        )
    return (metric, *[n for n in names if n != metric])


def modes(objectives: Sequence[str], metric_mode: str) -> list[str]:
    """Ray Tune's modes of ``objectives``: the primary metric's ``metric_mode``, then ``min``
    for each cost."""
    return [metric_mode] + ["min"] * (len(objectives) - 1)


def dominates(a: Sequence[float], b: Sequence[float], directions: Sequence[str]) -> bool:
    """Whether ``a`` is at least as good as ``b`` on every objective and better on one
    (``directions``: ``"max"`` or ``"min"`` per objective)."""
    signed = [(x, y) if d == "max" else (-x, -y) for x, y, d in zip(a, b, directions)]
    return all(x >= y for x, y in signed) and any(x > y for x, y in signed)


def front(points: Sequence[Sequence[float]], directions: Sequence[str]) -> list[int]:
    """The indices of the non-dominated ``points`` (each one value per objective), in order."""
    return [
        i
        for i, p in enumerate(points)
        if not any(dominates(q, p, directions) for j, q in enumerate(points) if j != i)
    ]
