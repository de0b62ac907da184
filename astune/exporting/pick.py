"""Which trial `export` takes from a multi-objective search: a point on its Pareto front.

``--pick best`` (the default) takes the best metric, as for any search. ``--pick fastest`` takes
the cheapest front trial by the first cost; ``--within PTS`` the cheapest front trial whose
metric is at most ``PTS`` percentage points worse than the best finished trial's (``0.5`` on
accuracy: at most 0.005 lower). Without a pick, after ``astune confirm --front``, the front
trial that confirm found faster at equal accuracy (the fastest of them) comes first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from astune._checks import check_choice, check_range
from astune.confirmation.table import summarize
from astune.store.confirmed import ConfirmedConfig
from astune.store.conventions import CONFIRM_FRONT_TAG
from astune.store.pareto import FrontPoint, search_front

if TYPE_CHECKING:
    from mlflow.entities import Run

PICKS = ("best", "fastest")


@dataclass(frozen=True, kw_only=True)
class Pick:
    """``kind`` one of :data:`PICKS`; ``within`` (percentage points, >= 0) picks the cheapest
    front trial that close to the best metric, and needs ``kind="best"`` left as it is."""

    kind: str = "best"
    within: float | None = None

    def __post_init__(self) -> None:
        check_choice("pick", self.kind, PICKS)
        if self.within is not None:
            check_range("within", self.within, 0.0, None)
            if self.kind != "best":
                raise ValueError(f"give --within or --pick {self.kind}, not both.")

    @property
    def on_front(self) -> bool:
        """Whether the trial comes from the Pareto front (not the best metric alone)."""
        return self.kind == "fastest" or self.within is not None


def pick_from_front(parent: Run, runs: list[Run], pick: Pick) -> tuple[str, str]:
    """The run id of the front trial ``pick`` names among ``runs`` (the search's trial runs),
    and why, in words. ValueError (one line) when the search had one objective."""
    found = search_front(parent, runs, needed_by="--pick fastest and --within need")
    objectives, mode, points, front = found.objectives, found.mode, found.points, found.front
    metric, cost = objectives[0], objectives[1]
    best = (max if mode == "max" else min)(p.values[metric] for p in points)
    if pick.kind == "fastest":
        chosen = front[0]
        why = f"the cheapest Pareto-front trial by {cost}"
    else:
        chosen = next(p for p in front if _gap(p, metric, best, mode) <= pick.within / 100 + 1e-12)
        why = (
            f"the cheapest Pareto-front trial by {cost} whose {metric} is within "
            f"{pick.within:g} points of the best ({best:.6g})"
        )
    return chosen.run_id, f"{why}: {_values(chosen, objectives)}"


def _gap(point: FrontPoint, metric: str, best: float, mode: str) -> float:
    """How much worse than ``best`` the point's metric is (>= 0)."""
    value = point.values[metric]
    return best - value if mode == "max" else value - best


def _values(point: FrontPoint, objectives: tuple[str, ...]) -> str:
    return ", ".join(f"{name} = {point.values[name]:.6g}" for name in objectives)


def confirmed_front_point(
    configs: list[ConfirmedConfig], parent: Run, trials: list[Run]
) -> tuple[ConfirmedConfig, str] | None:
    """After ``astune confirm --front`` (the latest confirm of the search ``parent``): of the
    front trials among ``configs``, the one with the lowest mean training time that was
    confirmed faster at equal accuracy, and why, in words. None when the latest confirm was
    not of the front, or none of its trials was confirmed faster at equal accuracy."""
    within = parent.data.tags.get(CONFIRM_FRONT_TAG)
    if within is None:
        return None
    found = search_front(parent, trials, needed_by="confirm --front needs")
    on_front = {p.run_id for p in found.front}
    kept = [c for c in configs if c.is_baseline or c.confirms in on_front]
    rows = summarize(kept, within=float(within), mode=found.mode)
    faster = [row for row in rows if row.faster_at_equal]
    if not faster:
        return None
    row = min(faster, key=lambda r: r.train_seconds.mean)
    time, metric = row.time_difference.interval, row.difference.interval
    why = (
        f"confirmed faster at equal accuracy by `astune confirm --front` over "
        f"{row.objective.n} seeds (within {float(within):g} points): paired difference to the "
        f"baseline {time.mean:+.1f} s [{time.low:+.1f}, {time.high:+.1f}] of training, "
        f"{metric.mean:+.4g} [{metric.low:+.4g}, {metric.high:+.4g}] {found.objectives[0]}"
    )
    return row.config, why
