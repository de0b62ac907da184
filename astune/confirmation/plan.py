"""Which configs `astune confirm` re-runs: the K best finished trials of a search (or, with
``--front``, the trials of its Pareto front, cheapest first) and the baseline (the best
trial's config with the baseline loss), each over the same N seeds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from astune._checks import check_int
from astune.config import SPEED_FIELDS
from astune.losses.catalogue import AS_LOSSES, LOSS_PARAM_NAMES, family_loss, loss_info
from astune.store.best import best_first
from astune.store.confirmed import config_label
from astune.store.conventions import CONFIRM_BASELINE, STOPPED_EARLY_TAG, TASK_TAG
from astune.store.pareto import search_front
from astune.store.reader import (
    Store,
    best_trial,
    finished_trials,
    objective,
    param,
    search_mode,
    trial_id,
)

if TYPE_CHECKING:
    from mlflow.entities import Run

CONFIRMS_KEY = "confirms"  # the Ray config key naming what a confirm run re-runs


@dataclass(frozen=True)
class Candidate:
    """A config to re-run: the trial run it comes from (or the baseline) and its trial config
    (the keys the search proposed, seed left out)."""

    confirms: str
    label: str
    config: dict[str, Any]
    objective: float | None  # the search's single-run objective (None for the baseline)


@dataclass
class ConfirmPlan:
    """Every (candidate, seed) run a confirm asks for, under the search's parent run."""

    experiment: str
    store: Store
    parent: "Run"
    mode: str
    candidates: list[Candidate]
    seeds: list[int]
    notes: tuple[str, ...] = ()  # one line each, for the person who asked (fewer than --top)

    def points(self, done: set[tuple[str, int]] = frozenset()) -> list[dict[str, Any]]:
        """The Ray configs of the runs not in ``done`` ((confirms, seed) pairs), seed-major
        so that an interrupted confirm has whole seeds of every candidate."""
        return [
            {**c.config, "seed": seed, CONFIRMS_KEY: c.confirms}
            for seed in self.seeds
            for c in self.candidates
            if (c.confirms, seed) not in done
        ]


def plan_confirm(
    experiment: str,
    *,
    top: int | None = None,
    seeds: int = 3,
    baseline: str = "softmax",
    front: bool = False,
    tracking_uri: str | None = None,
) -> ConfirmPlan:
    """The plan for ``astune confirm``: the ``top`` best finished trials (default 2), or with
    ``front`` the trials of the Pareto front, cheapest first (default: all of them), and the
    baseline (the best trial's config with the ``baseline`` loss). ``top`` is an upper bound,
    as "the K best" is in pandas' ``nlargest``: with fewer trials than ``top`` every one is
    confirmed and the plan's ``notes`` say so in one line. ValueError (one line) on bad input:
    an unknown experiment, ``top < 1``, ``seeds < 2``, an AS or unknown baseline, ``front`` for
    a search with one objective, a search with no trial that ran to the end."""
    if top is not None:
        check_int("top", top, 1)
    check_int("seeds", seeds, 2)
    info = loss_info(baseline)
    if info.name in AS_LOSSES:
        raise ValueError(
            f"baseline must be a loss that is not an AS loss ({', '.join(AS_LOSSES)}), "
            f"but got {baseline!r}."
        )
    store = Store(tracking_uri)
    parent = store.require_search(experiment)
    trials = front_trials(store, parent) if front else ranked_trials(store, parent)
    if not trials:  # the front has at least one point (search_front says so when none)
        raise ValueError(
            f"confirm needs a trial that ran to the end, but no trial of search {experiment!r} "
            f"(parent run {parent.info.run_id}) did; let one finish (or resume the search) "
            "and confirm again."
        )
    wanted = top if top is not None else (len(trials) if front else 2)
    notes = ()
    if wanted > len(trials):
        asked = f"--top {wanted}" if top is not None else f"the default --top {wanted}"
        notes = (fewer_than_top(len(trials), asked, front=front),)
    top = min(wanted, len(trials))
    chosen = [_candidate(run) for run in trials[:top]]
    mode = search_mode(parent)
    best = best_trial(trials, mode) if front else trials[0]
    base = _baseline(_candidate(best).config, baseline, parent.data.tags.get(TASK_TAG))
    if not any(_same_config(c.config, base.config) for c in chosen):
        chosen.append(base)
    else:  # the best trials include the baseline's config: it is the baseline
        chosen = [_as_baseline(c) if _same_config(c.config, base.config) else c for c in chosen]
    first = param(parent, "seed") or 0
    return ConfirmPlan(
        experiment=experiment,
        store=store,
        parent=parent,
        mode=mode,
        candidates=chosen,
        seeds=list(range(first + 1, first + 1 + seeds)),  # not the search's: no selection bias
        notes=notes,
    )


def fewer_than_top(count: int, asked: str, *, front: bool) -> str:
    """The line saying that ``count`` trials, fewer than ``asked`` (``"--top 3"``), are all
    confirmed."""
    trials = "1 trial" if count == 1 else f"{count} trials"
    what = f"the front has {trials}" if front else f"the search has {trials} that ran to the end"
    them = "it" if count == 1 else ("both" if count == 2 else f"all {count}")
    return f"{what}, fewer than {asked}; confirming {them}"


def ranked_trials(store: Store, parent: "Run") -> list["Run"]:
    """The search's trials that ran to the end (FINISHED, an objective, not stopped early),
    best objective first."""
    runs = finished_trials(store.trials(parent.info.run_id, [parent.info.experiment_id]))
    runs = [r for r in runs if r.data.tags.get(STOPPED_EARLY_TAG) != "true"]
    mode = search_mode(parent)  # ties as astune.store.best.best_first breaks them
    return sorted(runs, key=lambda r: best_first(objective(r), trial_id(r), mode))


def front_trials(store: Store, parent: "Run") -> list["Run"]:
    """The trial runs of the search's Pareto front, cheapest first (by the first cost);
    ValueError for a search with one objective."""
    runs = store.trials(parent.info.run_id, [parent.info.experiment_id])
    by_id = {run.info.run_id: run for run in runs}
    return [by_id[p.run_id] for p in search_front(parent, runs, needed_by="--front needs").front]


def trial_config(run: "Run") -> dict[str, Any]:
    """The trial config a run logged: its accepted keys that apply, seed left out."""
    from astune.config import TrainConfig

    accepted = TrainConfig.accepted_keys() - {"seed"}
    values = {key: param(run, key) for key in run.data.params if key in accepted}
    return {k: v for k, v in values.items() if v is not None}


def _candidate(run: "Run") -> Candidate:
    return Candidate(run.info.run_id, config_label(run), trial_config(run), objective(run))


def _baseline(config: dict[str, Any], baseline: str, task: str | None) -> Candidate:
    """``config`` with the baseline loss: the AS loss's keys, AS-Speed's and other losses'
    parameters left out, the baseline's defaults in."""
    loss = family_loss(baseline, task) if task else baseline
    info = loss_info(loss)
    if task and task not in info.tasks:
        raise ValueError(
            f"baseline {baseline!r} does not serve the search's task {task!r}; accepted: "
            f"losses for {', '.join(info.tasks)}."
        )
    dropped = set(SPEED_FIELDS) | set(LOSS_PARAM_NAMES)
    for name in AS_LOSSES:
        dropped |= set(loss_info(name).config_keys)
    kept = {k: v for k, v in config.items() if k not in dropped}
    kept.update(loss=loss, **info.defaults())
    return Candidate(CONFIRM_BASELINE, loss, kept, None)


def _same_config(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two trial configs train the same way (keys left out take their defaults)."""
    from astune.config import TrainConfig

    return TrainConfig.from_dict(a) == TrainConfig.from_dict(b)


def _as_baseline(candidate: Candidate) -> Candidate:
    return Candidate(CONFIRM_BASELINE, candidate.label, candidate.config, candidate.objective)
