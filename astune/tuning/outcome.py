"""What a search's fit hands back: which trials failed, finished or were stopped, the best
finished trial (ties broken as :func:`astune.store.best.best_first` breaks them), and the
:class:`~astune.tuning.settings.SearchResult` logged on the parent run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from astune.tuning.settings import SearchResult, SearchSettings

if TYPE_CHECKING:
    from ray.tune import Result, ResultGrid

    from astune.space.space import SearchSpace
    from astune.store.pareto import FrontPoint
    from astune.store.writer import SearchTracker


def search_was_stopped(results: ResultGrid) -> bool:
    """A trial that neither ended (Tune's ``done``; a restored trial's last record may lack it,
    its ``final`` report says it) nor failed: the search was stopped."""
    return any(
        not failed and (r.metrics is None or not (r.metrics.get("done") or r.metrics.get("final")))
        for r, failed in zip(results, failed_trials(results))
    )


def failed_trials(results: ResultGrid) -> list[bool]:
    """Whether each trial of ``results`` failed: its error read back from storage, or the
    driver's ERROR status (a trial whose folder could not be written left no error there)."""
    from astune._private import trial_statuses

    statuses = trial_statuses(results)
    return [r.error is not None or status == "ERROR" for r, status in zip(results, statuses)]


def best_finished(results: ResultGrid, metric: str, mode: str) -> tuple[Result, float] | None:
    """The best trial among those that finished (no error) and its best ``metric``: a trial
    that errored after a good evaluation has no result to export. Ties go as
    :func:`astune.store.best.best_first` breaks them, whatever the grid's order. None if none
    reported."""
    from astune.store.best import best_first

    scored: list[tuple[Result, float]] = []
    for result, failed in zip(results, failed_trials(results)):
        frame = result.metrics_dataframe
        if failed or frame is None or metric not in frame:
            continue
        values = frame[metric].dropna()
        if not values.empty:
            scored.append((result, float(values.max() if mode == "max" else values.min())))
    return min(scored, key=lambda s: best_first(s[1], result_trial_id(s[0]), mode), default=None)


def result_trial_id(result: Result) -> str:
    """The Ray trial id of a ``Result`` (in every report Tune records; else its folder's name,
    ``trial_<id>``)."""
    found = (result.metrics or {}).get("trial_id")
    return str(found) if found else Path(result.path).name.removeprefix("trial_")


def summarize(
    settings: SearchSettings,
    space: SearchSpace,
    base: dict,
    results: ResultGrid,
    tracker: SearchTracker,
) -> SearchResult:
    """The search's result from Tune's ``results``: the best finished trial (its config laid
    over ``base``), the trials' states and, with several objectives, the Pareto front; the
    best config and the trials are logged on the parent run."""
    from astune.store.artifacts import log_search_artifacts
    from astune.tuning.lifecycle.resume import resume_command

    if space.multi_objective:  # each trial's last result: a finished one's is its final report
        frame = results.get_dataframe()
    else:  # each trial's best evaluation
        frame = results.get_dataframe(filter_metric=space.metric, filter_mode=space.mode)
    states: dict[str, int] = {}
    for failed in failed_trials(results):
        state = "ERROR" if failed else "TERMINATED"
        states[state] = states.get(state, 0) + 1
    best = best_finished(results, space.metric, space.mode)
    best_config = {**base, **best[0].config} if best else {}
    best_objective = best[1] if best else None
    if best_config:
        log_search_artifacts(
            tracker,
            best_config=best_config,
            trials_df=frame,
            best_objective=best_objective,
            mode=space.mode,
            base_config=base,
            metric=space.metric,
        )
    front = _front(tracker, space) if space.multi_objective else []
    return SearchResult(
        experiment=settings.experiment_name,
        tracking_uri=tracker.tracking_uri,
        experiment_path=settings.experiment_path(),
        best_config=best_config,
        best_objective=best_objective,
        metric=space.metric,
        num_trials=len(results),
        trial_states=states,
        parent_run_id=tracker.parent_run_id,
        experiment_id=tracker.experiment_id,
        objectives=space.objectives,
        front=front,
        resume_command=resume_command(settings),
    )


def _front(tracker: SearchTracker, space: SearchSpace) -> list[FrontPoint]:
    """The Pareto front of the search's finished trials, logged on its parent run."""
    from astune.store.pareto import finished_points, pareto_front
    from astune.store.pareto_plot import log_front

    runs = tracker.trial_runs()
    points = finished_points(runs, space.objectives)
    front = pareto_front(points, space.objectives, space.mode)
    if points:
        log_front(tracker, points, front, space.objectives, trial_runs=runs)
    return front
