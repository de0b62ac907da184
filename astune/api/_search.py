"""``astune.search``: a Ray Tune + Optuna search tracked in MLflow (``python -m astune search``)."""

from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from typing import TYPE_CHECKING, Any

from astune.api._options import call_arguments
from astune.backbones.registry import DEFAULT_BACKBONE
from astune.checkpoint_policy import SEARCH_DEFAULT
from astune.store.storage_retry import DEFAULT_STORAGE_TIMEOUT
from astune.tuning.settings import SearchSettings

if TYPE_CHECKING:
    import optuna

    from astune.tuning.settings import SearchResult

NOT_OPTIONS = ("dataset", "progress")  # search()'s parameters that are no SearchSettings field


def search(
    dataset: str | PathLike[str],
    *,
    space: str | PathLike[str] | None = None,
    num_samples: int | None = None,
    max_concurrent: int | None = None,
    cpus_per_trial: float = 1.0,
    gpus_per_trial: float | None = None,
    address: str | None = None,
    tracking_uri: str | None = None,
    storage_path: str | None = None,
    storage_timeout: float = DEFAULT_STORAGE_TIMEOUT,
    name: str | None = None,
    resume: bool = False,
    backbone: str = DEFAULT_BACKBONE,
    num_layers: int | None = None,
    max_train_samples: int | None = None,
    max_eval_samples: int | None = None,
    epochs: float | None = None,
    max_length: int = 128,
    max_audio_seconds: float | None = None,
    validation_fraction: float | None = None,
    seed: int = 0,
    data_dir: str | PathLike[str] | None = None,
    losses: str | Sequence[str] | None = None,
    scheduler: str | Any = None,  # a name, or a ray.tune.schedulers.TrialScheduler
    checkpoint_every: str = SEARCH_DEFAULT,
    keep_checkpoints: bool = False,
    objectives: str | Sequence[str] | None = None,
    sampler: str | optuna.samplers.BaseSampler = "tpe",
    loss_kernel: str = "auto",
    compile: bool = False,
    plugins: str | Sequence[str | PathLike[str]] | None = None,
    warm_start: bool = False,
    portfolio: bool = True,
    reference: str | PathLike[str] | None = None,
    probe_backbone: str | None = None,
    verbose: bool = False,
    progress: bool = True,
    progress_every: float = 60.0,
) -> SearchResult:
    """Search ``dataset`` (a registry name or a folder) as ``python -m astune search`` does, with
    its flags as keywords (docs/contract.md); ``losses``, ``objectives`` and ``plugins`` (modules
    that register losses: docs/extending.md) also take lists, and ``sampler`` an Optuna sampler
    object as well as a name (``tpe``, ``random``, ``qmc``, ``cmaes``, ``gp``, ``nsgaii``,
    ``nsgaiii``), and ``scheduler`` a Ray Tune scheduler object (one objective) as well as a
    name (``asha``, ``hyperband``, ``none``).

    ``progress``: the live trial table (one line per evaluation outside a terminal, and one on
    how far the search is every ``progress_every`` seconds) and what ``warm_start`` decided;
    False prints nothing. ``verbose``: Ray's and MLflow's own output
    too. ``resume=True`` continues search ``name``: the arguments left at their defaults take
    the values it was started with.

    Returns the best config and objective (the Pareto front with several ``objectives``), the
    MLflow experiment and run ids and where Ray and Optuna keep the search. Raises ValueError
    for bad input (before Ray starts), :class:`astune.SearchStopped` on SIGTERM or Ctrl-C
    (resumable) and :class:`astune.TrackingBehind` when MLflow is unreachable at the end.
    """
    from astune.tuning.runner import execute_search, prepare_search

    options = call_arguments(search, locals(), skip=NOT_OPTIONS)
    settings = SearchSettings(dataset, console=progress, **options)  # paths, lists: its own
    prepared = prepare_search(settings)
    if progress:
        for line in prepared.notes:
            print(line, flush=True)
    return execute_search(prepared)
