"""Whether a scheduler, by name or as a Ray Tune object, can serve a search: checked with the
settings (one objective assumed) and again once the space says how many objectives there are.
No import of the settings: they call it."""

from __future__ import annotations

from typing import Any


def check_scheduler(scheduler: Any, *, objectives: int, metric: str | None = None) -> None:
    """ValueError (one line) for a scheduler that cannot serve the search: ``hyperband`` (or a
    scheduler object) with several objectives, population-based training (Ray Tune runs it
    without a search algorithm only), an object that is no Ray Tune scheduler, or (given the
    search's ``metric``, which every trial reports) an object that stops trials on another."""
    if isinstance(scheduler, str) or scheduler is None:
        from astune._checks import check_choice
        from astune.space.files import SCHEDULER_TYPES, check_not_population_based

        check_not_population_based(scheduler)
        if scheduler is not None:  # the Python API's; the command's parser holds to its choices
            check_choice("scheduler", scheduler, SCHEDULER_TYPES)
        if scheduler == "hyperband" and objectives > 1:
            raise ValueError(
                f"scheduler 'hyperband' stops trials on one metric, but the search has "
                f"{objectives} objectives; use asha (successive halving by non-dominated "
                "sorting) or none"
            )
        return
    from ray.tune.schedulers import PopulationBasedTraining, TrialScheduler

    from astune.space.files import population_based_refusal

    if not isinstance(scheduler, TrialScheduler):
        raise ValueError(
            f"scheduler must be a name or a ray.tune.schedulers.TrialScheduler, but got "
            f"{type(scheduler).__name__}"
        )
    if isinstance(scheduler, PopulationBasedTraining):  # PB2 is one too
        raise ValueError(
            population_based_refusal(f"a scheduler object ({type(scheduler).__name__})")
        )
    if objectives > 1:
        raise ValueError(
            f"a scheduler object ({type(scheduler).__name__}) stops trials on one metric, but "
            f"the search has {objectives} objectives; use --scheduler asha or none"
        )
    own = getattr(scheduler, "metric", None)
    if metric is not None and own is not None and own != metric:
        raise ValueError(
            f"a scheduler object ({type(scheduler).__name__}) stops trials on {own!r}, but "
            f"the search's trials report {metric!r}; make it with metric={metric!r}, or with "
            "none (the search's is set)"
        )
