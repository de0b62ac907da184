"""The Optuna samplers a search may propose its trials with, by name (``--sampler``, a space's
or the API's) or, in the Python API, as an Optuna sampler object. One registry that the CLI's
choices, the settings' checks and the docs read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna


@dataclass(frozen=True)
class SamplerKind:
    """A sampler of ``optuna.samplers``: its class's ``attribute`` and whether it searches
    several objectives (a Pareto front) or one only; ``neighbours``: that many trials after the
    seed points run one step from the best so far first
    (:class:`~astune.tuning.searchers.neighbours.NeighbourSampler`)."""

    name: str
    attribute: str
    several_objectives: bool
    what: str
    neighbours: int = 0

    def build(self, seed: int) -> optuna.samplers.BaseSampler:
        import optuna

        sampler = getattr(optuna.samplers, self.attribute)(seed=seed)
        if not self.neighbours:
            return sampler
        from astune.tuning.searchers.neighbours import NeighbourSampler

        return NeighbourSampler(sampler, trials=self.neighbours, seed=seed)


NEIGHBOUR_TRIALS = 4
"""The ``neighbours`` sampler's trials one step from the best before TPE alone: of 4 and 8,
CoNLL-2003's and GoEmotions' sources chose 4 (issue 70's fourth round of rules)."""


SAMPLER_KINDS = (
    SamplerKind("tpe", "TPESampler", True, "tree-structured Parzen estimator (the default)"),
    SamplerKind(
        "neighbours",
        "TPESampler",
        False,
        f"{NEIGHBOUR_TRIALS} trials one step from the best after the seed points, then TPE",
        neighbours=NEIGHBOUR_TRIALS,
    ),
    SamplerKind("random", "RandomSampler", True, "independent random search"),
    SamplerKind("qmc", "QMCSampler", True, "quasi-Monte Carlo (scrambled Sobol) points"),
    SamplerKind("cmaes", "CmaEsSampler", False, "CMA-ES over the numeric parameters"),
    SamplerKind("gp", "GPSampler", True, "Gaussian-process Bayesian optimisation"),
    SamplerKind("nsgaii", "NSGAIISampler", True, "NSGA-II, a genetic algorithm"),
    SamplerKind("nsgaiii", "NSGAIIISampler", True, "NSGA-III, for many objectives"),
)
SAMPLERS = {kind.name: kind for kind in SAMPLER_KINDS}
"""Every sampler a search takes by name."""


def sampler_name(sampler: str | Any) -> str:
    """A sampler's name as the search records it: a registry name as it is, an object by its
    class (``TPESampler``)."""
    return sampler if isinstance(sampler, str) else type(sampler).__name__


def check_sampler(sampler: str | Any, *, objectives: int) -> None:
    """ValueError (one line) for a name the registry lacks, an object that is no Optuna
    sampler, or a sampler of one objective asked for several."""
    if isinstance(sampler, str):
        if sampler not in SAMPLERS:
            raise ValueError(
                f"sampler must be one of {', '.join(SAMPLERS)} (or, in Python, an Optuna "
                f"sampler object), but got {sampler!r}"
            )
        if objectives > 1 and not SAMPLERS[sampler].several_objectives:
            several = ", ".join(k.name for k in SAMPLER_KINDS if k.several_objectives)
            raise ValueError(
                f"sampler {sampler!r} searches one objective, but the search has {objectives}; "
                f"use one of {several}"
            )
        return
    import optuna

    if not isinstance(sampler, optuna.samplers.BaseSampler):
        raise ValueError(
            f"sampler must be a name or an optuna.samplers.BaseSampler, but got "
            f"{type(sampler).__name__}"
        )


def build_sampler(sampler: str | Any, *, seed: int) -> optuna.samplers.BaseSampler:
    """The sampler of ``sampler``: a registry name built with ``seed``, an object as given;
    either made picklable, as Ray's Tuner and a resumed search need it
    (:func:`astune._private.picklable_sampler`)."""
    from astune._private import picklable_sampler

    built = SAMPLERS[sampler].build(seed) if isinstance(sampler, str) else sampler
    return picklable_sampler(built)
