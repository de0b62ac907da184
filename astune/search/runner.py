"""`astune search`: a Ray Tune search over a YAML space with Optuna, ASHA and MLflow.

The flow is DESIGN.md's: validate everything (before Ray starts), tokenize the data once on the
driver, open the MLflow experiment and parent run, run the trials (or resume them), then store
and print the best config.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astune._checks import check_int, check_range
from astune.config import TrainConfig

DEFAULT_STORAGE = "astune-runs/ray"


class SearchError(ValueError):
    """Bad search settings, found before any trial starts."""


@dataclass
class SearchSettings:
    """What `astune search` was asked for (the CLI flags of DESIGN.md)."""

    dataset: str
    space: str | None = None
    num_samples: int | None = None
    max_concurrent: int | None = None
    cpus_per_trial: float = 1.0
    gpus_per_trial: float | None = None
    address: str | None = None
    tracking_uri: str | None = None
    storage_path: str | None = None
    name: str | None = None
    resume: bool = False
    backbone: str = "bert-base-cased"
    num_layers: int | None = None
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    epochs: float | None = None
    data_dir: str | None = None
    validation_fraction: float | None = None
    losses: str | None = None
    scheduler: str | None = None
    seed: int = 0
    max_failures: int = 1
    max_length: int = 128
    reuse_actors: bool = True
    console: bool = True

    def validate(self) -> "SearchSettings":
        for name in (
            "num_samples",
            "max_concurrent",
            "num_layers",
            "max_train_samples",
            "max_eval_samples",
        ):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1)
        check_range("cpus_per_trial", self.cpus_per_trial, 0.0, None, low_open=True)
        if self.gpus_per_trial is not None:
            check_range("gpus_per_trial", self.gpus_per_trial, 0.0)
        if self.epochs is not None:
            check_range("epochs", self.epochs, 0.0, None, low_open=True)
        check_int("seed", self.seed, 0)
        check_int("max_failures", self.max_failures, 0)
        return self

    @property
    def experiment_name(self) -> str:
        if self.name:
            return self.name
        from astune.data.resolve import resolve_dataset

        return f"astune-{resolve_dataset(self.dataset).name}"

    def experiment_path(self) -> str:
        root = self.storage_path or DEFAULT_STORAGE
        if "://" not in root:
            root = str(Path(root).resolve())
        return f"{root.rstrip('/')}/{self.experiment_name}"


@dataclass
class SearchSummary:
    """What a finished search hands back: the best trial, and where everything is."""

    experiment: str
    tracking_uri: str
    experiment_path: str
    best_config: dict[str, Any]
    best_objective: float | None
    metric: str
    num_trials: int
    trial_states: dict[str, int]
    parent_run_id: str


def run_search(settings: SearchSettings) -> SearchSummary:
    """Run (or resume) the search; everything that can be checked is checked before Ray starts."""
    from astune.search.execution import check_local_gpus
    from astune.search.space import load_space
    from astune.store.uri import check_tracking_uri, resolve_tracking_uri

    settings.validate()
    check_local_gpus(settings)
    space = load_space(
        settings.space, dataset=None if settings.space else _registry_name(settings.dataset)
    )
    base = _base_config(settings)
    _check_experiment_path(settings)
    tracking_uri = resolve_tracking_uri(settings.tracking_uri)
    check_tracking_uri(tracking_uri)
    data = _encode(base)
    space = _apply_settings(space, settings, data.spec.task)
    return _run(settings, space, base, data, tracking_uri)


def _registry_name(dataset: str) -> str | None:
    from astune.data.resolve import resolve_dataset

    return resolve_dataset(dataset).registry_name


def _base_config(settings: SearchSettings) -> dict[str, Any]:
    """The config keys every trial shares (validated now, with a typical loss)."""
    data_dir = settings.data_dir or os.environ.get("ASTUNE_DATA_DIR")
    from astune.data.resolve import resolve_dataset

    ref = resolve_dataset(settings.dataset)
    dataset = str(ref.folder) if ref.folder is not None else ref.name
    base = dict(
        dataset=dataset,
        data_dir=str(Path(data_dir).resolve()) if data_dir else None,
        backbone=settings.backbone,
        num_layers=settings.num_layers,
        max_length=settings.max_length,
        max_train_samples=settings.max_train_samples,
        max_eval_samples=settings.max_eval_samples,
        seed=settings.seed,
        device="cuda" if (settings.gpus_per_trial or 0) > 0 else "cpu",
    )
    if settings.validation_fraction is not None:
        base["validation_fraction"] = settings.validation_fraction
    if Path(base["backbone"]).exists():
        base["backbone"] = str(Path(base["backbone"]).resolve())
    TrainConfig.from_dict(base).validate()
    from astune.backbones import resolve_backbone

    resolve_backbone(base["backbone"])  # an unknown alias fails here, before Ray starts
    return base


def _check_experiment_path(settings: SearchSettings) -> None:
    path = settings.experiment_path()
    if "://" in path:
        return
    exists = Path(path).exists()
    if settings.resume and not exists:
        raise SearchError(
            f"--resume: no search {settings.experiment_name!r} at {path}; "
            f"check --name and --storage-path."
        )
    if exists and not settings.resume:
        raise SearchError(
            f"search {settings.experiment_name!r} already exists at {path}; "
            f"pass --resume to continue it or --name NAME to start another."
        )


def _encode(base: dict[str, Any]) -> Any:
    from astune.training import load_encoded

    return load_encoded(TrainConfig.from_dict(base))


def _apply_settings(space: Any, settings: SearchSettings, task: str) -> Any:
    if settings.losses:
        space = space.with_losses(
            [name.strip() for name in settings.losses.split(",") if name.strip()]
        )
    space = space.for_task(task)
    fixed = {"seed": settings.seed}
    if settings.epochs is not None:
        fixed["epochs"] = settings.epochs
    space = space.with_fixed(**fixed)
    return space.with_settings(num_samples=settings.num_samples, scheduler=settings.scheduler)


def _max_evaluations(space: Any) -> int:
    """How many results a trial reports at most: an evaluation per epoch, plus the final one."""
    param = space.params.get("epochs")
    epochs = max(b for b in param.bounds() if isinstance(b, (int, float))) if param else 10
    return int(math.ceil(epochs)) + 1


def _run(
    settings: SearchSettings, space: Any, base: dict, data: Any, tracking_uri: str
) -> SearchSummary:
    import ray

    from astune.search import execution

    started_here = execution.init_ray(settings)
    try:
        execution.check_resources(settings)
        return execution.tune_search(
            settings, space, base, data, tracking_uri, _max_evaluations(space)
        )
    finally:
        if started_here:
            ray.shutdown()


def settings_from_args(args: Any) -> SearchSettings:
    """The CLI namespace as settings: flags the user left out keep the defaults."""
    fields = {f.name for f in dataclasses.fields(SearchSettings)}
    values = {k: v for k, v in vars(args).items() if k in fields and v is not None}
    return SearchSettings(**values)
