"""The warm arms of the search-efficiency benchmark (issue 44 items 1 and 4): ``astune-warm``
and ``astune-fast`` search the space `recommend` warms for the held-out dataset.

What they may read of the held-out dataset is its probe (timed, and paid by the arm: the
probe's and recommend's seconds times the workers, who wait for it, open the replay). What they
learn from is a reference file made from the other datasets' tables only
(:func:`held_out_reference`), read by the same ``recommend`` and ``warm_space`` a user runs,
through an empty MLflow store.

The warmed space is the arm's base space (the shipped one plus softmax, with the grid's epochs
as a range and the learning rates times ``LR_SCALE``, as the cold arms have them) warmed by the
recommendation, then laid on the grid: each key keeps the grid values inside its warmed range
(the nearest one where none is), and the seed points are snapped onto the grid.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.search_efficiency import arms, settings

if TYPE_CHECKING:
    from benchmarks.search_efficiency.prior import DifficultyOf


@dataclasses.dataclass(frozen=True)
class WarmStart:
    """What the warm arms of one held-out dataset start from."""

    recommendation: Any  # astune.recommendation.Recommendation; None: nothing to learn from
    seconds: float  # the probe's and recommend's wall seconds on one thread
    reference_datasets: tuple[str, ...]


def held_out_reference(
    dataset: str, folder: Path, *, root: Path | None = None, difficulty: DifficultyOf | None = None
) -> Path:
    """A reference file in ``folder`` made from every other dataset's table (under ``root``);
    ``difficulty`` as :func:`.prior.reference_entries` takes it (None: probed now)."""
    from astune.history.reference import write_reference
    from benchmarks.search_efficiency.prior import difficulty_of, reference_entries

    others = [name for name in settings.DATASETS if name != dataset]
    entries = reference_entries(
        others,
        root=root,
        difficulty=difficulty or difficulty_of,
        log=lambda line: print(f"  reference {line}"),
    )
    return write_reference(folder / f"reference-without-{dataset}.json", entries, held_out=dataset)


def warm_start(dataset: str, *, root: Path | None = None) -> WarmStart:
    """Probe ``dataset`` and recommend for it from the other datasets' tables (timed)."""
    import json

    import torch

    from astune.recommendation import nothing_to_learn, recommend

    torch.set_num_threads(settings.THREADS)
    data = settings.DATASETS[dataset]
    with tempfile.TemporaryDirectory() as folder:
        reference = held_out_reference(dataset, Path(folder), root=root)
        learnt = tuple(e["dataset"] for e in json.loads(reference.read_text())["searches"])
        store = f"sqlite:///{folder}/empty.db"
        start = time.perf_counter()
        task = {
            "backbone": settings.BACKBONE,
            "num_layers": data.num_layers,
            "train_size": data.train,
        }
        rec = None  # nothing to learn from: the cold space, unprobed (as search --warm-start)
        why = nothing_to_learn(dataset, tracking_uri=store, reference=reference, **task)
        if why is None:
            rec = recommend(dataset, tracking_uri=store, reference=reference, **task)
        else:
            print(f"  {dataset}: nothing to learn from ({why}): not probed")
        seconds = time.perf_counter() - start
    return WarmStart(rec, seconds, learnt)


def base_space(dataset: str, *, fast: bool) -> Any:
    """The cold arms' space as a SearchSpace: the shipped space plus softmax (and, ``fast``,
    AS-Skip and its policy searched), the lr range and seed points times ``LR_SCALE``, the
    grid's epochs as a range."""
    from astune.space.space import load_space

    space = load_space(dataset=dataset)
    task = "multi_label" if settings.DATASETS[dataset].multi_label else "single_label"
    space = space.for_task(task)
    plain = settings.DATASETS[dataset].loss_name("softmax")
    space = space.with_losses([*space.losses, plain])
    lr = space.param("lr")
    scale = settings.LR_SCALE
    points = tuple({**p, "lr": p["lr"] * scale} if "lr" in p else p for p in space.points)
    space = dataclasses.replace(space, points=())
    space = space.narrowed("lr", lr.low * scale, lr.high * scale)
    epochs = settings.epochs_of(dataset)
    space = space.narrowed("epochs", min(epochs), max(epochs), step=1.0)
    if fast:
        space = _with_switches(space)
    return dataclasses.replace(space, points=tuple(p for p in points if _fits(space, p)))


def _with_switches(space: Any) -> Any:
    """``space`` searching the fast levers: AS-Skip as a switch and its skip policy (``soft``:
    InfoBatch's pruning too), which history's best trials may set (recommend transfers both)."""
    from astune.config import SKIP_POLICIES
    from astune.space.params import named, parse_param

    specs = {
        "as_skip": {"type": "categorical", "choices": [True, False]},
        "skip_policy": {"type": "categorical", "choices": list(SKIP_POLICIES)},
    }
    with named(space.source):
        levers = {k: parse_param(k, v, f"speed_params.{k}") for k, v in specs.items()}
    return dataclasses.replace(space, speed_params={**space.speed_params, **levers})


def _fits(space: Any, point: dict[str, Any]) -> bool:
    try:
        dataclasses.replace(space, points=(point,))
    except ValueError:
        return False
    return True


def warm_arm(dataset: str, start: WarmStart, *, fast: bool) -> arms.Arm:
    """The ``astune-warm`` (``fast``: ``astune-fast``) arm of ``dataset`` on the grid."""
    from astune.recommendation.warm_space import warm_space

    space = base_space(dataset, fast=fast)
    if start.recommendation is not None:
        space = warm_space(start.recommendation, space)
    return grid_arm("astune-fast" if fast else "astune-warm", dataset, space, fast=fast)


def grid_arm(name: str, dataset: str, space: Any, *, fast: bool) -> arms.Arm:
    """An arm of astune's searcher and scheduler over ``space`` laid on ``dataset``'s grid: each
    key the grid values inside its range (the nearest where none is), the seed points snapped."""
    as_loss = settings.DATASETS[dataset].loss_name("as_softmax")

    def keep(name: str, grid: tuple[Any, ...]) -> tuple[Any, ...]:
        param = space.param(name, as_loss)
        inside = tuple(v for v in grid if arms.in_param(param, v))
        return inside or (arms.snap(arms.mid(param), grid),)

    values = {
        "loss": ("softmax", "as_softmax", *(settings.FAST_LEVERS if fast else ())),
        "lr": keep("lr", settings.LRS),
        "batch_size": keep("batch_size", settings.BATCH_SIZES),
        "lr_warmup_ratio": (0.0,),
        "epochs": keep("epochs", settings.epochs_of(dataset)),
        "delta": keep("delta", settings.DELTAS),
        "warmup_ratio": keep("warmup_ratio", settings.DELTA_WARMUPS),
    }
    plain = settings.DATASETS[dataset].loss_name("softmax")
    points = arms.unique(
        grid_cell(point, values, loss)
        for point in space.points
        if (loss := arms.grid_loss(point, as_loss, plain)) in values["loss"]
    )
    return arms.Arm(
        name,
        values,
        points,
        prune_aware=True,
        grace_period=int(space.scheduler["grace_period"]),
        reduction_factor=int(space.scheduler["reduction_factor"]),
        max_epochs=max(settings.epochs_of(dataset)),
        reuse_actors=arms.astune_reuse_actors(),
    )


def grid_cell(point: dict[str, Any], values: dict[str, tuple], loss: str) -> dict[str, Any]:
    """A seed point of the warmed space (learning rates already scaled) as a grid cell of the
    arm: each value the nearest the arm searches; keys it leaves out at the arm's first."""
    cell = {"loss": loss}
    for key in ("lr", "batch_size", "epochs"):
        cell[key] = arms.snap(point.get(key, values[key][-1]), values[key])
    if loss == "softmax":
        return {**cell, "lr_warmup_ratio": 0.0}
    cell["warmup_ratio"] = arms.snap(point.get("warmup_ratio", 0.0), values["warmup_ratio"])
    if loss == "as_softmax":  # the variants take the grid's one delta
        cell["delta"] = arms.snap(point.get("delta", settings.FAST_DELTA), values["delta"])
    return cell
