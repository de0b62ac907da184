"""``astune status``: a running or finished search as its MLflow store holds it, from any
terminal or machine that reaches the store (issue 72 item 3). The trials with their state,
progress, objective and where their config came from (a seed point: the portfolio's or the
space's; else the searcher), the best so far, the elapsed time and about what is left; a search
whose run is still RUNNING but whose driver stopped giving heartbeats is named as such, with
the command that resumes it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from astune._private import latest_step
from astune.metrics.objectives import PRIMARY
from astune.store.conventions import PORTFOLIO_POINTS, STOPPED_EARLY_TAG
from astune.store.driver_lock import HEARTBEAT_SECONDS, holder_of, recorded_idle
from astune.store.estimate import duration_text, search_seconds_left
from astune.store.reader import Store, best_so_far, objective, param, search_mode, trial_id

if TYPE_CHECKING:
    from mlflow.entities import Run

STALE_AFTER = 2 * HEARTBEAT_SECONDS
"""A RUNNING search whose driver's last heartbeat is older than this is reported stale."""

PORTFOLIO = "portfolio"
"""A trial's source when it ran one of the portfolio's configs (what won on past tasks: the
first trials of a search that starts from history)."""
SEED_POINT = "seed point"
"""A trial's source when it ran one of the space's own seed points (they run next)."""
SEARCHER = "searcher"
"""A trial's source when the searcher proposed its config."""


@dataclass(frozen=True)
class TrialStatus:
    """One trial: its id, MLflow status (``STOPPED`` for one a scheduler stopped early), share
    of its samples done (None: unknown), best objective, evaluations and its config's source
    (:data:`PORTFOLIO`, :data:`SEED_POINT`, :data:`SEARCHER`, or ``-`` when the search's space
    file is not there to tell the last two apart)."""

    trial_id: str
    status: str
    progress: float | None
    objective: float | None
    evaluations: int
    source: str
    seconds: float


@dataclass(frozen=True)
class SearchStatus:
    """A search as :func:`search_status` reads it; ``str()`` is what the command prints."""

    experiment: str
    status: str  # the parent run's: RUNNING, FINISHED, KILLED, FAILED
    stale: bool  # RUNNING, but its driver's heartbeat is older than STALE_AFTER
    elapsed: float  # seconds since its start, the time between a driver's end and a resume left out
    remaining: float | None
    num_samples: int | None
    trials: tuple[TrialStatus, ...]
    best: TrialStatus | None
    resume_command: str

    def __str__(self) -> str:
        return format_status(self)


def search_status(experiment: str, tracking_uri: str | None = None) -> SearchStatus:
    """The newest search of ``experiment`` in the store at ``tracking_uri``; ValueError (one
    line) for an experiment the store does not hold."""
    from astune.store.uri import resolve_tracking_uri

    store = Store(resolve_tracking_uri(tracking_uri))
    parent = store.require_search(experiment)
    runs = sorted(store.trials(parent.info.run_id), key=_started)
    sources = _sources(parent, len(runs))
    now = time.time()
    trials = tuple(
        _trial_status(run, source, now, _evaluations(run)) for run, source in zip(runs, sources)
    )
    best_run = best_so_far(runs, search_mode(parent))
    best = None if best_run is None else trials[runs.index(best_run)]
    num_samples = param(parent, "num_samples")
    return SearchStatus(
        experiment=experiment,
        status=parent.info.status,
        stale=is_stale(parent, now),
        elapsed=max(0.0, _seconds(parent, now) - recorded_idle(parent)),  # a resume's gap left out
        remaining=_remaining(trials, num_samples, param(parent, "max_concurrent")),
        num_samples=num_samples,
        trials=trials,
        best=best,
        resume_command=_resume_command(parent, experiment, store.uri, tracking_uri),
    )


def _evaluations(run: Run) -> int:
    """The evaluations ``run`` logged: its objective's latest step + 1 (a trial's reports log
    it at ``step = evaluation``, from 0, which is no metric of its own; a retried trial's
    repeated evaluation counts once). Read from the run as the store listed it: no request."""
    step = latest_step(run, PRIMARY)
    return 0 if step is None else step + 1


def _trial_status(run: Run, source: str, now: float, evaluations: int) -> TrialStatus:
    status = run.info.status
    if status == "FINISHED" and run.data.tags.get(STOPPED_EARLY_TAG) == "true":
        status = "STOPPED"
    progress = run.data.metrics.get("progress")
    if run.info.status == "FINISHED":
        progress = 1.0
    return TrialStatus(
        trial_id=trial_id(run),
        status=status,
        progress=progress,
        objective=objective(run),
        evaluations=evaluations,
        source=source,
        seconds=_seconds(run, now),
    )


def _seconds(run: Run, now: float) -> float:
    ended = run.info.end_time and run.info.status != "RUNNING"  # a resume keeps the old end
    end = run.info.end_time / 1000 if ended else now
    return max(0.0, end - run.info.start_time / 1000)


def _started(run: Run) -> tuple[int, str]:
    """A trial's place in its search: the order trials started (the driver opens each one's
    run as Ray starts it; Ray's trial ids are random), then its id."""
    return run.info.start_time or 0, trial_id(run)


def _sources(parent: Run, trials: int) -> list[str]:
    """The source of each of the first ``trials`` trials, in their order: the portfolio's
    configs ran first, then the space's own seed points, then the searcher's configs."""
    portfolio = param(parent, PORTFOLIO_POINTS) or 0
    seeds = _seed_points(parent)
    return [_source(index, portfolio, seeds) for index in range(trials)]


def _source(index: int, portfolio: int, seeds: int | None) -> str:
    if index < portfolio:
        return PORTFOLIO
    if seeds is None:  # the space file is not here: seed point or searcher, unknown
        return "-"
    return SEED_POINT if index < seeds else SEARCHER


def _seed_points(parent: Run) -> int | None:
    """How many seed points the search's space file starts with (the first trials ran them);
    None when the file cannot be read here."""
    from astune.space.space import load_space

    space = param(parent, "space")
    try:
        return len(load_space(space).seed_points) if space else None
    except (OSError, ValueError):
        return None


def is_stale(parent: Run, now: float) -> bool:
    """Whether the search of ``parent`` is RUNNING in the store, but its driver gave no
    heartbeat for :data:`STALE_AFTER` seconds at time ``now`` (or its process is gone)."""
    if parent.info.status != "RUNNING":
        return False
    holder = holder_of(parent, "search")
    return holder is None or now - holder.heartbeat > STALE_AFTER or not holder.alive(now)


def _remaining(
    trials: tuple[TrialStatus, ...], num_samples: int | None, max_concurrent: int | None
) -> float | None:
    running = [(t.seconds, t.progress) for t in trials if t.status == "RUNNING"]
    done = [t.seconds for t in trials if t.status in ("FINISHED", "STOPPED")]
    pending = max(0, (num_samples or 0) - len(trials))
    concurrency = max_concurrent or max(1, len(running))
    return search_seconds_left(
        running=running, finished_seconds=done, pending=pending, concurrency=concurrency
    )


def _resume_command(parent: Run, experiment: str, uri: str, given: str | None) -> str:
    command = f"python -m astune search --dataset {param(parent, 'dataset')} --name {experiment}"
    return command + (f" --tracking-uri {uri}" if given else "") + " --resume"


def format_status(status: SearchStatus) -> str:
    """The command's lines: the search, its trials one a line, the best, what is left."""
    total = f"/{status.num_samples}" if status.num_samples else ""
    trials = f"{len(status.trials)}{total} trials"
    elapsed = duration_text(status.elapsed)
    if status.status != "RUNNING":  # it ended: how long it ran
        head = f"{status.status.lower()}, {trials} in {elapsed}"
    elif status.stale:
        head = f"running, {trials}, {elapsed} in"
    else:
        left = duration_text(status.remaining)
        head = f"running, {trials}, {elapsed} in, about {left} left if none stops early"
    lines = [f"search {status.experiment!r}: {head}"]
    if status.stale:
        lines.append(
            f"its driver gave no heartbeat for over {STALE_AFTER:.0f} s: it died or lost the "
            f"store. Resume it with: {status.resume_command}"
        )
    lines.append(f"{'trial':<18}{'state':<10}{'done':>6}{'objective':>11}{'evals':>7}  source")
    for t in status.trials:
        done = "-" if t.progress is None else f"{100 * t.progress:.0f}%"
        value = "-" if t.objective is None else f"{t.objective:.4g}"
        lines.append(
            f"{t.trial_id:<18}{t.status:<10}{done:>6}{value:>11}{t.evaluations:>7}  {t.source}"
        )
    if status.best is not None:
        lines.append(f"best: {status.best.trial_id}, objective {status.best.objective:.4g}")
    if status.status in ("KILLED", "FAILED"):
        lines.append(f"resume it with: {status.resume_command}")
    return "\n".join(lines)
