"""What a dataset is: :class:`DatasetSpec` (task, columns, hub source, the paper's settings and
results) and the names it accepts. The entries themselves are in :mod:`astune.data.registry`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from astune._checks import check_choice, check_int
from astune.losses.catalogue import TASKS

METRICS = ("accuracy", "f1", "micro_f1", "macro_f1", "matthews", "correction_f1")
SPLITS = ("train", "validation", "test")
DEFAULT_METRIC = {
    "single_label": "accuracy",
    "pair": "accuracy",
    "token": "f1",
    "multi_label": "micro_f1",
    "image": "accuracy",
    "audio": "accuracy",
}
TASK_METRICS = {
    "single_label": ("accuracy", "matthews"),
    "pair": ("accuracy", "matthews"),
    "token": ("f1", "accuracy", "correction_f1"),
    "multi_label": ("micro_f1", "macro_f1"),
    "image": ("accuracy", "matthews"),
    "audio": ("accuracy", "matthews"),
}
"""The primary metrics each task's evaluation computes (``astune.metrics.compute_metrics``);
``correction_f1`` is spelling correction's, a token task over candidate characters."""
_STANDARD_SPLITS = {"train": "train", "validation": "validation", "test": "test"}


def column_keys(task: str) -> tuple[str, ...]:
    """The DatasetSpec fields (and dataset.json keys) naming ``task``'s input and label columns."""
    inputs = {
        "single_label": ("text_column",),
        "pair": ("text_column", "text_pair_column"),
        "token": ("tokens_column",),
        "multi_label": ("text_column",),
        "image": ("image_column",),
        "audio": ("audio_column",),
    }[task]
    return (*inputs, "label_column")


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset: task, columns, source and the paper's settings.

    ``metric`` is the primary metric; the training loop logs it as ``val_<metric>``.
    ``split_names`` maps train/validation/test to the hub's split names; a split mapped to None
    is carved out of the hub's train split (a fraction ``holdout_fraction``, fixed seed).
    ``paper_results`` maps a method (the loss registry's spelling; ``as_speed`` is AS-Softmax
    with AS-Speed) to ``{metric: value}``; ``baseline_params`` maps a loss name to its parameters.
    """

    name: str
    task: str
    num_labels: int
    hub_id: str | None = None
    hub_config: str | None = None  # ``load_dataset``'s ``name``
    hub_revision: str | None = None  # a branch, tag or commit; None: the repository's main
    hub_data_dir: str | None = None  # ``load_dataset``'s ``data_dir``: a folder of the revision
    # Why the hub source is taken to load with datasets >= 4 (a repository of data files, or the
    # parquet export of a script repository) and as of when; None: not known to load, so the
    # entry is local-only and astune never asks the hub for it.
    hub_status: str | None = None
    data_source: str = ""  # where the data is published, for users who bring it locally
    text_column: str | None = None
    text_pair_column: str | None = None
    tokens_column: str | None = None
    image_column: str | None = None
    audio_column: str | None = None
    label_column: str = "label"
    label_names: tuple[str, ...] | None = None
    metric: str = ""
    metrics: tuple[str, ...] = ()
    split_names: Mapping[str, str | None] = field(default_factory=lambda: dict(_STANDARD_SPLITS))
    holdout_fraction: float = 0.1
    hub_transform: str | None = None
    epochs: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    delta: float | None = None
    warmup_ratio: float | None = None
    lam: float | None = None
    max_accum_steps: int | None = None
    softmax: float | None = None
    as_softmax: float | None = None
    paper_results: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    baseline_params: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    paper_sizes: tuple[int, int, int] | None = None
    paper_backbone: str | None = None
    difficulty_hint: str | None = None
    notes: str = ""

    def __post_init__(self) -> None:
        check_choice("task", self.task, TASKS)
        check_int("num_labels", self.num_labels, 1)
        metric = self.metric or DEFAULT_METRIC[self.task]
        object.__setattr__(self, "metric", check_choice("metric", metric, METRICS))
        if metric not in TASK_METRICS[self.task]:
            raise ValueError(
                f"dataset {self.name!r}: metric {metric!r} is not computed for task "
                f"{self.task!r}; accepted: {', '.join(TASK_METRICS[self.task])}."
            )
        for m in self.metrics:
            check_choice("metrics", m, METRICS)
        if self.metric not in self.metrics:
            object.__setattr__(self, "metrics", (self.metric, *self.metrics))
        for column in self.required_columns():
            if not column:
                raise ValueError(f"dataset {self.name!r} ({self.task}) needs {self.column_keys()}.")
        if self.label_names is not None:
            object.__setattr__(self, "label_names", tuple(self.label_names))
            if len(self.label_names) != self.num_labels:
                raise ValueError(
                    f"dataset {self.name!r}: label_names has {len(self.label_names)} names but "
                    f"num_labels is {self.num_labels}; they must match."
                )
        for method in ("softmax", "as_softmax"):  # the primary metric's paper result
            if getattr(self, method) is None and method in self.paper_results:
                object.__setattr__(self, method, self.paper_results[method].get(self.metric))

    def __hash__(self) -> int:  # dict fields are unhashable; the name identifies a spec
        return hash((self.name, self.task, self.hub_id, self.num_labels))

    @property
    def hub_source(self) -> str | None:
        """``repo[config]@revision/data_dir`` (the parts given), or None without a hub id."""
        if self.hub_id is None:
            return None
        text = self.hub_id + (f"[{self.hub_config}]" if self.hub_config else "")
        if self.hub_revision:
            text += f"@{self.hub_revision}"
        return text + (f"/{self.hub_data_dir}" if self.hub_data_dir else "")

    @property
    def local_only(self) -> bool:
        """Whether the data must be brought as local files (no hub source known to load)."""
        return self.hub_id is None or self.hub_status is None

    def column_keys(self) -> tuple[str, ...]:
        """The dataset.json keys that name this task's input and label columns."""
        return column_keys(self.task)

    def required_columns(self) -> tuple[str, ...]:
        """The column names this task reads from each row, inputs first, label last."""
        return tuple(getattr(self, key) for key in self.column_keys())

    @property
    def paper_hparams(self) -> dict[str, Any]:
        """The paper's universal and AS parameters for this dataset (None where not given)."""
        keys = ("epochs", "batch_size", "lr", "delta", "warmup_ratio", "lam", "max_accum_steps")
        return {k: getattr(self, k) for k in keys}
