"""What a search optimises: the primary metric, alone or with costs, and the Pareto front.

A multi-objective search maximises (or minimises, where the dataset says so) its primary
metric, logged by every trial as ``objective``, and minimises one or more costs, each a figure
of the run that every evaluation and the final report carry:

- ``train_seconds``: training wall time in seconds, evaluations and checkpoint writes excluded;
- ``samples_computed``: samples that went through forward and backward (AS-Skip leaves some
  out);
- ``optimizer_steps``: optimizer updates (AS-Speed's accumulation makes fewer).

A trial is on the front when no other trial is at least as good on every objective and better
on one (Optuna's ``study.best_trials`` by the same rule: equal trials are both on it). NSGA-II's
order of points (non-dominated sorting, then crowding distance within a front) ranks the trials
at a rung of the multi-objective successive halving (``astune/tuning/searchers/mo_halving.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

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


MODES = ("min", "max")
"""The directions an objective is optimised in (Ray Tune's and Optuna's ``mode``)."""


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


# ------------------------------------------------------------------ NSGA-II's order of points
def _larger_is_better(points: Sequence[Sequence[float]], directions: Sequence[str]) -> Any:
    """``points`` as an ``(n, m)`` float array in which larger is better on every objective
    (``min`` objectives negated); a NaN is the worst value there is."""
    import numpy as np

    table = np.asarray(points, dtype=float).reshape(len(points), len(directions))
    signs = np.array([1.0 if d == "max" else -1.0 for d in directions])
    return np.nan_to_num(table * signs, nan=-np.inf)


def nondominated_fronts(
    points: Sequence[Sequence[float]], directions: Sequence[str]
) -> list[list[int]]:
    """Non-dominated sorting (NSGA-II's): the indices of ``points`` (each one value per
    objective; ``directions`` ``"max"`` or ``"min"`` per objective) by front, best first. The
    first front is :func:`front`; each next one holds the points dominated only by points of
    earlier fronts. Indices ascend within a front. ``O(n^2 m)`` time and ``O(n^2)`` memory."""
    import numpy as np

    better = _larger_is_better(points, directions)
    no_worse = (better[:, None, :] >= better[None, :, :]).all(axis=-1)
    strictly = (better[:, None, :] > better[None, :, :]).any(axis=-1)
    beats = no_worse & strictly  # beats[i, j]: point i dominates point j
    left = np.ones(len(better), dtype=bool)
    fronts = []
    while left.any():
        beaten = beats[np.ix_(left, left)].any(axis=0)
        chosen = np.flatnonzero(left)[~beaten]
        fronts.append(chosen.tolist())
        left[chosen] = False
    return fronts


def crowding_distances(points: Sequence[Sequence[float]]) -> list[float]:
    """NSGA-II's crowding distance of each of ``points`` (one front): the sum over objectives
    of the gap between a point's two neighbours along that objective, divided by the front's
    range on it; the first and last point along an objective get infinity. An objective on
    which the front has no finite range adds nothing but the infinities. Points with equal
    values are ordered by index, so the result depends on nothing else."""
    import numpy as np

    if not points:
        return []
    table = np.asarray(points, dtype=float).reshape(len(points), -1)
    distance = np.zeros(len(table))
    for values in table.T:
        order = np.argsort(values, kind="stable")
        distance[order[[0, -1]]] = np.inf
        span = values[order[-1]] - values[order[0]]
        if len(table) < 3 or not np.isfinite(span) or span == 0:
            continue
        gaps = (values[order[2:]] - values[order[:-2]]) / span
        distance[order[1:-1]] += gaps
    return distance.tolist()


def nsga2_keys(
    points: Sequence[Sequence[float]], directions: Sequence[str]
) -> list[tuple[int, float]]:
    """Each point's place in NSGA-II's order, as ``(front number, -crowding distance)``:
    a smaller key is the better point (an earlier front, then a less crowded point of it)."""
    keys: list[tuple[int, float]] = [(0, 0.0)] * len(points)
    for number, members in enumerate(nondominated_fronts(points, directions)):
        crowding = crowding_distances([points[i] for i in members])
        for i, distance in zip(members, crowding):
            keys[i] = (number, -distance)
    return keys
