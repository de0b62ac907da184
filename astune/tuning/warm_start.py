"""`astune search --warm-start` (deprecated: :data:`WARM_START_DEPRECATED`): the search's space
warmed by `astune recommend` (the store's history and the packaged prior), written beside the
search so that ``--resume`` reads it again rather than recommending anew."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from astune._moved import REMOVED_IN
from astune.tuning.settings import SearchSettings

if TYPE_CHECKING:
    from astune.data.resolve import DatasetRef

WARM_START_DEPRECATED = (
    f"--warm-start is deprecated and will be removed in astune {REMOVED_IN}: a search starts "
    "from the portfolio by default, and `recommend --write-space` writes that space with the "
    "delta advice (search it with --space)"
)
"""The one line a ``--warm-start`` search warns with (issue 70: one way from history into a
search)."""
WARM_FOLDER = Path("astune-runs") / "warm-start"
"""Where a search kept on remote storage (s3://, gs://) keeps its warmed space."""


def warm_space_path(settings: SearchSettings) -> Path:
    """``<storage>/<name>.warm-start.yaml`` beside a local search's Ray folder, else under
    :data:`WARM_FOLDER` (a YAML the search's params name, read on ``--resume``)."""
    return space_beside(settings, "warm-start", remote_name=f"{settings.experiment_name}.yaml")


def space_beside(settings: SearchSettings, kind: str, *, remote_name: str | None = None) -> Path:
    """``<storage>/<name>.<kind>.yaml`` beside a local search's Ray folder, else (remote
    storage) ``remote_name`` (default ``<name>.<kind>.yaml``) under :data:`WARM_FOLDER`: the
    space a search chose at its start, which its params name and ``--resume`` reads."""
    name = f"{settings.experiment_name}.{kind}.yaml"
    path = settings.experiment_path()
    if "://" in path:
        return (WARM_FOLDER / (remote_name or name)).resolve()
    return Path(path).parent / name


def warm_start(settings: SearchSettings, ref: "DatasetRef") -> tuple[SearchSettings, list[str]]:
    """``settings`` searching the warmed space (``space`` set to its file), and the report's
    lines; the space it starts from is ``--space`` or the dataset's shipped one. With nothing
    to learn from (:func:`astune.recommendation.nothing_to_learn`: no finished trials in the store,
    no reference trials that could weigh) the dataset is not probed and the space is searched
    as given."""
    from astune.history.reference import reference_file
    from astune.history.transfer import describe
    from astune.recommendation import nothing_to_learn, probe_options, recommend
    from astune.recommendation.warm_space import warm_space
    from astune.space.space import load_space

    base = load_space(settings.space, dataset=None if settings.space else ref.registry_name)
    path = warm_space_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    reference = reference_file(settings.reference)
    search = {  # the store, the reference and the search to come, as both calls take them
        "tracking_uri": settings.tracking_uri,
        "reference": reference,
        "data_dir": settings.data_dir,
        "backbone": settings.backbone,
        "num_layers": settings.num_layers,
        "train_size": settings.max_train_samples,
    }
    why = nothing_to_learn(settings.dataset, **search)
    if why is not None:
        base.dump(path)
        lines = [
            f"warm start: nothing to learn from ({why}): the space as given, the dataset "
            "not probed",
            f"warm start: searching {path}",
        ]
        return dataclasses.replace(settings, space=str(path)), lines
    options = probe_options(
        validation_fraction=settings.validation_fraction, backbone=settings.probe_backbone
    )
    rec = recommend(settings.dataset, probe_options=options, **search)
    if rec.difficulty.task is not None:
        base = base.for_task(rec.difficulty.task)
    warmed = warm_space(rec, base)
    warmed.dump(path)
    first = warmed.points[0] if warmed.points else {}
    lines = [
        f"warm start: difficulty {rec.difficulty.describe()}; first point delta "
        f"{first.get('delta', '-')}, r {first.get('warmup_ratio', '-')} (recommended "
        f"{rec.delta:.2f}, r {rec.warmup_ratio:.2f}; history's weight {rec.history_weight:.2f})",
        *(describe(rec.transfer) if rec.transfer is not None else []),
        f"warm start: searching {path}",
    ]
    return dataclasses.replace(settings, space=str(path)), lines


def warmed_before(
    settings: SearchSettings, before: Mapping[str, str]
) -> tuple[SearchSettings, list[str]]:
    """A resumed warm-started search: ``settings`` searching the space it warmed when it began
    (its ``space`` param), whatever ``--space`` says now."""
    path = before.get("space")
    if before.get("warm_start") != "True" or not path:
        from astune.tuning.settings import SearchError

        raise SearchError(
            f"--warm-start: the search {settings.experiment_name!r} did not start warm; "
            "resume it without --warm-start"
        )
    return dataclasses.replace(settings, space=path), [f"warm start: resuming on {path}"]
