"""The arms of the search-efficiency benchmark (issue 44 item 1) as subsets of a table's grid,
each with the real Ray Tune searcher and scheduler a search of that arm builds.

- ``by-hand``: softmax over default.yaml's ranges (lr, batch, lr warm-up) and the grid's
  epochs; Ray's plain ``OptunaSearch`` (TPE, seeded), which tells Optuna an ASHA-stopped trial
  as COMPLETE with its truncated score, as a user's script does; ``ASHAScheduler`` with grace
  period 1 and reduction factor 2; the paper's settings first.
- ``astune``: the dataset's shipped space (losses and ranges) plus softmax and the epochs;
  astune's ``PruneAwareOptunaSearch``; ASHA with the space's grace period and reduction factor;
  the shipped seed points snapped to the grid.
- ``astune-fast-cold``: ``astune`` plus the fast levers (AS-Skip, alone or with InfoBatch's
  pruning, grouped by length; a diagnostic: the fast arm without the recommendation).
- ``astune-warm`` and ``astune-fast``: benchmarks/search_efficiency/warm.py.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from benchmarks.search_efficiency import settings

ARMS = ("by-hand", "astune", "astune-fast-cold")
SCHEDULES = ("asha", "hyperband", "fifo")
"""The schedulers an arm may stop trials with (issue 62 item 3): ASHA (Ray Tune's
``ASHAScheduler``: asynchronous successive halving, one bracket), asynchronous Hyperband (its
``AsyncHyperBandScheduler`` with every bracket) and FIFO (none stopped)."""
WARM_ARMS = ("astune-warm", "astune-fast")
"""Arms that start from ``recommend`` on the held-out dataset
(benchmarks/search_efficiency/warm.py)."""


@dataclasses.dataclass(frozen=True)
class Arm:
    """One arm: the grid values it searches, its seed points, its searcher and scheduler."""

    name: str
    values: dict[str, tuple[Any, ...]]
    """Per config key, the values searched (loss names are grid loss names)."""
    seed_points: tuple[dict[str, Any], ...]
    prune_aware: bool
    grace_period: int
    reduction_factor: int
    max_epochs: int
    """ASHA's ``max_t``: the most epochs of the dataset's grid, whatever this arm searches."""
    reuse_actors: bool
    """Whether Ray Tune starts a trial on the actor of one that ended (astune's search does;
    Ray Tune's default, and so by-hand's, does not)."""
    schedule: str = "asha"
    """Which of :data:`SCHEDULES` stops trials early."""
    startup_trials: int | None = None
    """TPE's ``n_startup_trials``: the trials, seed points included, before it models (None:
    Optuna's default, 10)."""
    neighbour_trials: int = 0
    """Trials after the seed points that run a neighbour of the best so far
    (:class:`astune.tuning.searchers.neighbours.NeighbourSampler`) before TPE alone."""

    def define_by_run(self, trial: Any) -> dict[str, Any]:
        """Ray's define-by-run space over this arm's grid cells (conditional on the loss); the
        fast levers take the grid's one delta and length window, returned as constants."""
        loss = trial.suggest_categorical("loss", list(self.values["loss"]))
        names = ["lr", "batch_size", "epochs"]
        names += ["lr_warmup_ratio"] if loss == "softmax" else ["warmup_ratio"]
        names += ["delta"] if loss == "as_softmax" else []
        for name in names:
            trial.suggest_categorical(name, list(self.values[name]))
        if loss not in settings.FAST_LEVERS:
            return {}
        return {"delta": settings.FAST_DELTA, "length_window": settings.FAST_LENGTH_WINDOW}

    def contains(self, config: dict[str, Any]) -> bool:
        """Whether a grid config lies in this arm's space."""
        config = settings.normalized(config)
        if config["loss"] not in self.values["loss"]:
            return False
        keys = ["lr", "batch_size", "epochs"]
        keys += ["lr_warmup_ratio"] if config["loss"] == "softmax" else ["warmup_ratio"]
        if config["loss"] == "as_softmax":
            keys.append("delta")
        return all(config[k] in self.values[k] for k in keys)

    def searcher(self, seed: int) -> Any:
        """A fresh Ray Tune searcher of this arm, its TPE sampler seeded by ``seed``."""
        from ray.tune.search.optuna import OptunaSearch

        from astune.tuning.searchers.searcher import PruneAwareOptunaSearch

        kind = PruneAwareOptunaSearch if self.prune_aware else OptunaSearch
        return kind(
            space=self.define_by_run,
            metric="objective",
            mode="max",
            points_to_evaluate=[dict(p) for p in self.seed_points],
            sampler=self.sampler(seed),
        )

    def sampler(self, seed: int) -> Any:
        """This arm's TPE sampler, seeded by ``seed``."""
        import optuna

        from astune.tuning.searchers.neighbours import NeighbourSampler

        startup = {} if self.startup_trials is None else {"n_startup_trials": self.startup_trials}
        tpe = optuna.samplers.TPESampler(seed=seed, **startup)
        if not self.neighbour_trials:
            return tpe
        return NeighbourSampler(tpe, trials=self.neighbour_trials, seed=seed)

    def scheduler(self) -> Any:
        """A fresh scheduler of :attr:`schedule` over evaluations (``training_iteration``)."""
        from ray.tune.schedulers import AsyncHyperBandScheduler, FIFOScheduler

        if self.schedule == "fifo":
            return FIFOScheduler()
        return AsyncHyperBandScheduler(
            time_attr="training_iteration",
            metric="objective",
            mode="max",
            max_t=self.max_epochs,
            grace_period=self.grace_period,
            reduction_factor=self.reduction_factor,
            brackets=self.brackets(),
        )

    def brackets(self) -> int:
        """ASHA's one bracket, or asynchronous Hyperband's every bracket: one a rung from the
        grace period to ``max_t`` (``log_rf(max_t / grace) + 1``; 3 for 4 epochs, grace 1,
        factor 2)."""
        if self.schedule == "asha":
            return 1
        rungs = math.log(self.max_epochs / self.grace_period, self.reduction_factor)
        return max(1, int(math.floor(rungs + 1e-9)) + 1)


def in_param(param: Any, value: Any) -> bool:
    if param.kind in ("float", "int"):
        return param.low - 1e-12 <= value <= param.high + 1e-12
    return value in (param.choices if param.kind == "categorical" else (param.value,))


def snap(value: float, grid: tuple[float, ...]) -> float:
    """The grid value nearest ``value`` (in log space for learning rates)."""
    scale: Callable[[float], float] = math.log if all(v > 0 for v in grid) and value > 0 else float
    return min(grid, key=lambda g: abs(scale(g) - scale(value)))


def by_hand(dataset: str) -> Arm:
    """The user's Ray Tune + OptunaSearch + ASHA over softmax (default.yaml's ranges)."""
    from astune.space import load_space

    default = load_space("default")
    lrs = tuple(v for v in settings.LRS if in_param(default.param("lr"), v / settings.LR_SCALE))
    batches = tuple(v for v in settings.BATCH_SIZES if in_param(default.param("batch_size"), v))
    paper = _paper_point(dataset)
    epochs = settings.epochs_of(dataset)
    seed = {
        "loss": "softmax",
        "lr": snap(paper["lr"] * settings.LR_SCALE, lrs),
        "lr_warmup_ratio": 0.0,
        "batch_size": snap(paper["batch_size"], batches),
        "epochs": max(epochs),
    }
    return Arm(
        "by-hand",
        {
            "loss": ("softmax",),
            "lr": lrs,
            "batch_size": batches,
            "lr_warmup_ratio": settings.LR_WARMUPS,
            "epochs": epochs,
        },
        (seed,),
        prune_aware=False,
        grace_period=1,
        reduction_factor=2,
        max_epochs=max(epochs),
        reuse_actors=ray_default_reuse_actors(),
    )


def _paper_point(dataset: str) -> dict[str, Any]:
    """The shipped space's first softmax seed point (the paper's lr and batch size)."""
    from astune.space import load_space

    space = load_space(dataset=dataset)
    plain = settings.DATASETS[dataset].loss_name("softmax")
    return next(p for p in space.points if p["loss"] == plain)


def astune_arm(dataset: str, *, fast: bool = False) -> Arm:
    """The shipped space of ``dataset`` plus softmax and the epochs (``fast``: plus the
    fast levers), on the grid."""
    from astune.space import load_space

    space = load_space(dataset=dataset)
    as_loss = settings.DATASETS[dataset].loss_name("as_softmax")

    def keep(name: str, grid: tuple[Any, ...], loss: str = as_loss) -> tuple[Any, ...]:
        scale = settings.LR_SCALE if name == "lr" else 1.0
        inside = tuple(v for v in grid if in_param(space.param(name, loss), v / scale))
        return inside or (snap(mid(space.param(name, loss)) * scale, grid),)

    values = {
        "loss": ("softmax", "as_softmax", *(settings.FAST_LEVERS if fast else ())),
        "lr": keep("lr", settings.LRS),
        "batch_size": keep("batch_size", settings.BATCH_SIZES),
        "lr_warmup_ratio": (0.0,),
        "epochs": settings.epochs_of(dataset),
        "delta": keep("delta", settings.DELTAS),
        "warmup_ratio": keep("warmup_ratio", settings.DELTA_WARMUPS),
    }
    plain = settings.DATASETS[dataset].loss_name("softmax")
    points = unique(
        _snapped_point(p, values, loss)
        for p in space.points
        if (loss := grid_loss(p, as_loss, plain)) in values["loss"]
    )
    return Arm(
        "astune-fast-cold" if fast else "astune",
        values,
        points,
        prune_aware=True,
        grace_period=int(space.scheduler["grace_period"]),
        reduction_factor=int(space.scheduler["reduction_factor"]),
        max_epochs=max(values["epochs"]),
        reuse_actors=astune_reuse_actors(),
    )


def ray_default_reuse_actors() -> bool:
    """Ray Tune's own default for ``TuneConfig.reuse_actors`` (what a user's script gets)."""
    from ray.tune import TuneConfig

    return bool(TuneConfig().reuse_actors)


def astune_reuse_actors() -> bool:
    """``astune search``'s default for ``reuse_actors``."""
    from astune.tuning.settings import SearchSettings

    return bool(SearchSettings.reuse_actors)


def mid(param: Any) -> float:
    if param.kind in ("float", "int"):
        return (param.low + param.high) / 2
    return (param.choices or (param.value,))[0]


def unique(points: Any) -> tuple[dict[str, Any], ...]:
    """``points`` in their order, each once (two shipped points may snap to one cell)."""
    out: list[dict[str, Any]] = []
    for point in points:
        if point not in out:
            out.append(point)
    return tuple(out)


def grid_loss(point: dict[str, Any], as_loss: str, plain: str) -> str | None:
    """The grid loss of a seed point (None: a loss the grid lacks): an AS-Softmax point with
    AS-Skip on is a lever's variant, by its skip policy (AS-Speed, not in the grid, is
    dropped)."""
    if point.get("infobatch"):  # InfoBatch is in the grid only as AS-Skip's soft policy
        return None
    if point["loss"] == plain:
        return "softmax"
    if point["loss"] != as_loss:
        return None
    if not point.get("as_skip"):
        return "as_softmax"
    return "as_skip_soft" if point.get("skip_policy") == "soft" else "as_skip"


def _snapped_point(point: dict[str, Any], values: dict[str, tuple], loss: str) -> dict:
    """A shipped seed point as a grid cell of the arm (``loss`` a grid loss), at the arm's
    most epochs: each value the grid's nearest."""
    cell = {
        "loss": loss,
        "lr": snap(point["lr"] * settings.LR_SCALE, values["lr"]),
        "batch_size": snap(point["batch_size"], values["batch_size"]),
        "epochs": max(values["epochs"]),
    }
    if loss == "softmax":
        return {**cell, "lr_warmup_ratio": 0.0}
    cell["warmup_ratio"] = snap(point.get("warmup_ratio", 0.0), values["warmup_ratio"])
    if loss == "as_softmax":  # the variants take the grid's one delta (define_by_run)
        cell["delta"] = snap(point["delta"], values["delta"])
    return cell


def targets(table: Any, dataset: str) -> dict[str, float]:
    """``T_common`` (by-hand's space), ``T_all`` (the grid), ``T_se`` (issue 62 item 4: by-hand's
    best cell minus the larger of the margin and the standard error of that cell's seed mean,
    a target the seeds' noise cannot decide) and the best seed-mean score on a recorded table
    (a :class:`replay.Table`)."""
    hand = by_hand(dataset)
    best = table.best_mean()
    common = table.best_cell(hand.contains)
    se = table.seed_se[common]
    return {
        "T_common": table.seed_mean[common] - settings.TARGET_MARGIN,
        "T_all": best - settings.TARGET_MARGIN,
        "T_se": table.seed_mean[common] - max(settings.TARGET_MARGIN, se),
        "best": best,
        "best_common_se": se,
    }
