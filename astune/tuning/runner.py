"""`astune search`: a Ray Tune search over a YAML space with Optuna, successive halving and MLflow.

The flow is docs/architecture.md's: validate everything (before Ray starts), tokenize the data
once on the driver, open the MLflow experiment and parent run, run the trials (or resume them),
then store and print the best config.
"""

from __future__ import annotations

import dataclasses
import math
import os
import warnings
from pathlib import Path
from typing import Any

from astune._text import value_text
from astune.config import TrainConfig
from astune.data.resolve import DatasetRef, default_backbone
from astune.data.spec import DatasetSpec
from astune.space.files import parse_losses
from astune.space.params import Invalid
from astune.space.space import SearchSpace
from astune.tuning.searchers.samplers import check_sampler
from astune.tuning.searchers.scheduler_checks import check_scheduler
from astune.tuning.settings import (
    PreparedSearch,
    SearchError,
    SearchResult,
    SearchSettings,
    settings_from_args,
)

__all__ = ["SearchError", "SearchSettings", "SearchResult", "run_search", "settings_from_args"]


def run_search(settings: SearchSettings) -> SearchResult:
    """Run (or resume) the search; everything that can be checked is checked before Ray starts."""
    return execute_search(prepare_search(settings))


def prepare_search(settings: SearchSettings) -> PreparedSearch:
    """Validate the settings, the space, the data and the store (ValueError: bad input)."""
    from astune.data.resolve import resolve_dataset
    from astune.metrics.scores import check_metric_computed
    from astune.plugins import load_plugins
    from astune.space.space import load_space
    from astune.store.uri import check_tracking_uri, resolve_tracking_uri
    from astune.tuning.execution import check_local_gpus
    from astune.tuning.lifecycle.resume import (
        as_before,
        check_not_running,
        check_unchanged,
        more_trials,
        more_trials_note,
        parent_params,
    )

    load_plugins(settings.plugin_list)  # their losses are names the space and flags may use
    settings.validate()
    ref = resolve_dataset(settings.dataset)  # once: every step below takes it from here
    if settings.name is None:  # the experiment is named after the resolved dataset
        settings = dataclasses.replace(settings, name=f"astune-{ref.name}")
    # an image or audio entry left at the text backbone: its paper backbone (logged as such)
    settings = dataclasses.replace(settings, backbone=default_backbone(settings.backbone, ref.spec))
    if ref.spec is not None:  # a registry dataset: checked before its data is read
        check_metric_computed(ref.spec.name, ref.spec.metric)
    tracking_uri = resolve_tracking_uri(settings.tracking_uri)
    check_tracking_uri(tracking_uri)
    check_not_running(settings, tracking_uri)  # before "already exists": say why it does
    _check_experiment_path(settings)
    before = parent_params(settings, tracking_uri)  # {} unless --resume
    settings = as_before(settings, before).validate()
    check_local_gpus(settings)
    notes: list[str] = []
    portfolio_points = 0
    if settings.warm_start:  # a resumed search reads the file it warmed, not --space
        from astune.tuning.warm_start import WARM_START_DEPRECATED, warm_start, warmed_before

        warnings.warn(WARM_START_DEPRECATED, FutureWarning, stacklevel=2)

        if settings.resume:
            settings, notes = warmed_before(settings, before)
        else:
            settings, notes = warm_start(settings, ref)
        notes.insert(0, WARM_START_DEPRECATED)
    space = load_space(settings.space, dataset=None if settings.space else ref.registry_name)
    base = base_config(settings, ref)
    train_base = TrainConfig.from_dict(base).validate()
    if ref.spec is not None:  # a registry dataset's task is known: --losses checked before torch
        space, said = _apply_settings(space, settings, ref.spec.task)
        notes += said
    if train_base.num_layers is not None:  # else each trial would fail building its model
        from astune.backbones.models import check_num_layers

        check_num_layers(train_base.backbone, train_base.num_layers)
    from astune.data.encoded import load_encoded  # torch: only once the input is known good

    data = load_encoded(train_base, ref=ref)
    import torch

    from astune.training.compute import check_loss_kernel

    check_loss_kernel(settings.loss_kernel, torch.device(train_base.device))  # not in a trial
    if ref.spec is None:  # a user folder: its own metric and task, known once it is read
        check_metric_computed(data.spec.name, data.spec.metric)
        space, said = _apply_settings(space, settings, data.spec.task)
        notes += said
    if settings.portfolio and not settings.resume:  # a resume reads the space it recorded
        from astune.tuning.portfolio_start import portfolio_start

        start = portfolio_start(settings, space, data, tracking_uri=tracking_uri)
        settings, space, portfolio_points = start.settings, start.space, start.points
        notes += start.lines
    check_sampler(settings.sampler, objectives=len(space.objectives))  # now that they are known
    check_scheduler(settings.scheduler, objectives=len(space.objectives), metric=space.metric)
    check_unchanged(settings, space, before)
    extra = more_trials(space, before)
    notes += more_trials_note(space, before, extra)
    return PreparedSearch(
        settings=settings,
        space=space,
        base=base,
        train_base=train_base,
        data=data,
        tracking_uri=tracking_uri,
        notes=tuple(notes),
        portfolio_points=portfolio_points,
        more_trials=extra,
    )


def execute_search(prepared: PreparedSearch) -> SearchResult:
    """Start (or join) Ray and run the trials; a failure here is a failed search, not bad input."""
    return _run(prepared)


def base_config(settings: SearchSettings, ref: DatasetRef) -> dict[str, Any]:
    """The config keys every trial shares (validated now, with a typical loss); ``ref``: the
    settings' dataset, resolved."""
    data_dir = settings.data_dir or os.environ.get("ASTUNE_DATA_DIR")
    dataset = str(ref.folder) if ref.folder is not None else ref.name
    base = dict(
        dataset=dataset,
        data_dir=str(Path(data_dir).resolve()) if data_dir else None,
        backbone=settings.backbone,
        num_layers=settings.num_layers,
        max_length=settings.max_length,
        loss_kernel=settings.loss_kernel,
        compile=settings.compile,
        plugins=settings.plugin_list,
        max_train_samples=settings.max_train_samples,
        max_eval_samples=settings.max_eval_samples,
        seed=settings.seed,
        checkpoint_every=settings.checkpoint_every,
        device="cuda" if (settings.gpus_per_trial or 0) > 0 else "cpu",
    )
    if settings.validation_fraction is not None:
        base["validation_fraction"] = settings.validation_fraction
    if settings.max_audio_seconds is not None:
        base["max_audio_seconds"] = settings.max_audio_seconds
    if Path(base["backbone"]).exists():
        base["backbone"] = str(Path(base["backbone"]).resolve())
    from astune.backbones.registry import resolve_backbone

    resolve_backbone(base["backbone"])  # an unknown alias fails here, before Ray starts
    return base


def _check_experiment_path(settings: SearchSettings) -> None:
    path = settings.experiment_path()
    if "://" in path:
        return
    storage = Path(path).parent
    try:  # Ray would fail on it after starting; say it now
        storage.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SearchError(
            f"--storage-path {storage}: cannot create it ({err.strerror or err}); give a "
            "writable folder, or an s3:// or gs:// URI"
        ) from None
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


def _apply_settings(
    space: SearchSpace, settings: SearchSettings, task: str
) -> tuple[SearchSpace, list[str]]:
    """The space with the flags' losses, task, fixed values and search settings, and a line
    for each loss whose parameters stay at their registered defaults."""
    notes: list[str] = []
    if settings.losses:
        try:  # the flag's bad name is the flag's, not the space file's
            wanted = parse_losses(settings.losses, where="--losses")
        except Invalid as exc:
            raise SearchError(f"{exc.where}: {exc.problem}") from None
        notes = [_defaults_note(n, v) for n, v in space.undefined_losses(wanted).items()]
        space = space.with_losses(wanted)
    space = space.for_task(task)
    fixed = {"seed": settings.seed}
    if settings.epochs is not None:
        fixed["epochs"] = settings.epochs
    space = space.with_fixed(**fixed)
    searched = space.with_settings(
        num_samples=settings.num_samples,
        scheduler=None if settings.scheduler_object is not None else settings.scheduler,
        objectives=settings.parsed_objectives(space.metric),  # a bad name is the flag's
    )
    return searched, notes


def _defaults_note(loss: str, values: dict[str, Any]) -> str:
    """What a search of ``loss`` without ``loss_params`` of its own runs, and how to search it."""
    fixed = ", ".join(f"{k}={value_text(v)}" for k, v in values.items())
    return (
        f"{loss}: its parameters stay at their registered defaults ({fixed}): neither the space "
        f"nor default.yaml gives loss_params.{loss}; search them from a --space file that does "
        "(docs/extending.md)"
    )


def _numbers(space: SearchSpace, name: str) -> list[float]:
    param = space.params.get(name)
    return [b for b in param.bounds() if isinstance(b, (int, float))] if param else []


def max_reports(
    space: SearchSpace, base: dict[str, Any], *, spec: DatasetSpec, n_train: int
) -> int:
    """How many results a trial reports at most (the scheduler's ``max_t``): its evaluations
    (one per epoch, or every ``eval_every`` optimizer steps and at each epoch's end), plus the
    final one.
    Epochs are the space's largest, else ``--epochs``, else the dataset's paper value."""
    epochs = max(_numbers(space, "epochs") or [base.get("epochs") or spec.epochs or 1])
    per_epoch = 1
    if base.get("eval_every"):
        batch = min(_numbers(space, "batch_size") or [spec.batch_size or 1])
        steps = math.ceil(n_train / max(1, int(batch)))  # at most one step per batch
        per_epoch = steps // base["eval_every"] + 1
    return int(math.ceil(epochs)) * per_epoch + 1


def _run(prepared: PreparedSearch) -> SearchResult:
    from astune.tuning import execution
    from astune.tuning.lifecycle.stop import stop_on_signals
    from astune.tuning.notices import library_notices

    settings, data = prepared.settings, prepared.data
    max_t = max_reports(
        prepared.space, prepared.base, spec=data.spec, n_train=len(data.splits["train"])
    )
    with (
        library_notices(settings.verbose),
        stop_on_signals() as stop,
        execution.ray_for(settings, stop, tracking_uri=prepared.tracking_uri),
    ):
        return execution.tune_search(prepared, max_t, stop=stop)
