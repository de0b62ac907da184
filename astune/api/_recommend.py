"""``astune.recommend``: delta, r and the delta schedule for a task from its measured difficulty
and past searches, and what similar tasks' best trials transfer (``python -m astune
recommend``)."""

from __future__ import annotations

import dataclasses
from os import PathLike
from typing import TYPE_CHECKING

from astune._checks import check_int

if TYPE_CHECKING:
    from astune.recommendation.result import Recommendation


def recommend(
    dataset: str | PathLike[str],
    *,
    tracking_uri: str | None = None,
    data_dir: str | PathLike[str] | None = None,
    validation_fraction: float | None = None,
    write_space: str | PathLike[str] | None = None,
    probe_backbone: str | None = None,
    backbone: str | None = None,
    num_layers: int | None = None,
    max_train_samples: int | None = None,
    max_length: int | None = None,
    reference: str | PathLike[str] | None = None,
) -> Recommendation:
    """Recommend delta (with its range), r and the delta schedule for ``dataset``, as ``python
    -m astune recommend`` does: its difficulty measured by a probe (``probe_backbone``), blended
    with the searches in the MLflow store and the reference trials (``reference``: the packaged
    prior by default, ``"none"`` for none). ``backbone``, ``num_layers``,
    ``max_train_samples`` and ``max_length`` describe the search to come. ``write_space``
    writes the dataset's space warmed by the recommendation (``Recommendation.space_file``;
    search it with ``astune.search(dataset, space=...)``).

    ``astune.format_recommendation(result)`` is what the command prints. Raises ValueError (one
    line) for an unknown dataset, a bad value, or a store or reference file that cannot be read.
    """
    from astune.data.resolve import resolve_dataset

    resolve_dataset(str(dataset))  # an unknown dataset, before torch and MLflow are imported
    sizes = {"num_layers": num_layers, "max_train_samples": max_train_samples,
             "max_length": max_length}  # fmt: skip
    for name, value in sizes.items():
        if value is not None:
            check_int(name, value, 1)
    from mlflow.exceptions import MlflowException

    from astune.history.reference import reference_file
    from astune.recommendation import probe_options
    from astune.recommendation import recommend as recommend_delta
    from astune.recommendation import write_space as write_warm_space

    try:
        rec = recommend_delta(
            str(dataset),
            tracking_uri=tracking_uri,
            data_dir=None if data_dir is None else str(data_dir),
            probe_options=probe_options(
                validation_fraction=validation_fraction, backbone=probe_backbone
            ),
            backbone=backbone,
            num_layers=num_layers,
            train_size=max_train_samples,
            max_length=max_length,
            reference=reference_file(None if reference is None else str(reference)),
        )
        if write_space is None:
            return rec
        return dataclasses.replace(rec, space_file=write_warm_space(rec, str(dataset), write_space))
    except MlflowException as err:  # an unreadable store: bad input, as in the command
        raise ValueError(str(err).splitlines()[0]) from None
