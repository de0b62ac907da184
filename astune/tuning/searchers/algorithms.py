"""What proposes trials and what stops them: Optuna behind Ray Tune (one mode per objective)
and the scheduler (ASHA, asynchronous Hyperband, multi-objective successive halving, none, or a
Ray Tune scheduler object from the Python API)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from astune.space.space import SearchSpace
    from astune.tuning.settings import SearchSettings


def searcher_for(space: SearchSpace, settings: SearchSettings, *, max_concurrent: int) -> Any:
    """Optuna behind Ray Tune: the metric alone, or the metric and costs (one mode each),
    proposing for at most ``max_concurrent`` trials at a time."""
    import optuna
    from ray.tune.search import ConcurrencyLimiter

    from astune.tuning.searchers.searcher import PruneAwareOptunaSearch

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    multi = space.multi_objective
    search = PruneAwareOptunaSearch(
        space=space.define_by_run,
        metric=list(space.objectives) if multi else space.metric,
        mode=space.modes if multi else space.mode,
        points_to_evaluate=space.seed_points or None,
        sampler=_sampler(settings),
    )
    return ConcurrencyLimiter(search, max_concurrent=max_concurrent)


def _sampler(settings: SearchSettings) -> Any:
    """``--sampler``: a sampler of :data:`~astune.tuning.searchers.samplers.SAMPLERS` seeded
    with the search's seed, or the Optuna sampler object the Python API was given."""
    from astune.tuning.searchers.samplers import build_sampler

    return build_sampler(settings.sampler, seed=settings.seed)


def scheduler_for(space: SearchSpace, max_t: int, given: Any = None) -> Any:
    """``given`` (a Ray Tune scheduler object from the Python API) as it is, the search's metric
    and mode set where it has none; else the space's:
    ASHA on the metric (with several objectives successive halving by NSGA-II's order of the
    metric and costs: :mod:`.mo_halving`), ``hyperband``: asynchronous Hyperband with every
    bracket its rungs allow, ``none``: FIFO, no early stopping."""
    import math

    from ray.tune.schedulers import ASHAScheduler, AsyncHyperBandScheduler, FIFOScheduler

    from astune.tuning.searchers.mo_halving import MOHalvingScheduler

    if given is not None:
        # One made without a metric (as Ray's examples make them) takes the search's, as a
        # TuneConfig naming it would set it; its own metric and mode stay.
        given.set_search_properties(space.metric, space.mode)
        return given
    options = space.scheduler
    if space.scheduler_type == "none":
        return FIFOScheduler()
    budget = dict(
        time_attr="training_iteration",
        max_t=options.get("max_t") or max_t,
        grace_period=options["grace_period"],
        reduction_factor=options["reduction_factor"],
    )
    if space.multi_objective:
        return MOHalvingScheduler(list(space.objectives), space.modes, **budget)
    if space.scheduler_type == "hyperband":
        rungs = math.log(budget["max_t"] / budget["grace_period"], budget["reduction_factor"])
        brackets = max(1, int(math.floor(rungs + 1e-9)) + 1)
        return AsyncHyperBandScheduler(
            metric=space.metric, mode=space.mode, brackets=brackets, **budget
        )
    return ASHAScheduler(metric=space.metric, mode=space.mode, **budget)
