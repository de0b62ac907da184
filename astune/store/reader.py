"""Reading astune's MLflow store: searches (parent runs), their trials, and their values.

The layout is the one :mod:`astune.tuning` writes (docs/contract.md, "MLflow conventions"):
a parent run per search (tag ``astune.role=search``) and a child run per trial (tag
``astune.role=trial``, ``mlflow.parentRunId``) whose params are strings, ``"None"`` where a key
does not apply. ``export`` and ``recommend`` read the store through these functions only.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astune.losses.catalogue import AS_LOSSES, SOFTMAX_LOSSES
from astune.store.conventions import (
    CHANGED_ON_RESUME,
    CONFIRM_ROLE,
    DATASET_TAG,
    NOT_APPLICABLE,
    PARENT_TAG,
    ROLE_TAG,
    TRIAL_ID_TAG,
    quote,
)
from astune.store.uri import check_tracking_uri, resolve_tracking_uri

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Run

_PAGE = 1000


class Store:
    """One MLflow tracking store, opened read-mostly: a missing SQLite file is an empty store
    (nothing is created by reading)."""

    def __init__(self, tracking_uri: str | None = None):
        if tracking_uri is None or not tracking_uri.strip():
            # The embedded default (tracking.default_tracking_uri) without creating its folder.
            tracking_uri = str(Path.cwd() / "astune-runs" / "mlflow.db")
        self.uri = resolve_tracking_uri(tracking_uri)
        self._client: MlflowClient | None = None

    @property
    def exists(self) -> bool:
        """False for a SQLite or file store whose file is not there yet."""
        if self.uri.startswith("sqlite:///"):
            return Path(self.uri[len("sqlite:///") :].partition("?")[0]).is_file()
        if self.uri.startswith("file:"):
            from urllib.parse import unquote, urlsplit

            return Path(unquote(urlsplit(self.uri).path)).is_dir()
        return True

    @property
    def client(self) -> "MlflowClient":
        if self._client is None:
            from mlflow import MlflowClient

            if self.uri.startswith(("http://", "https://")):
                check_tracking_uri(self.uri)  # one short request: MLflow retries for minutes
            self._client = MlflowClient(tracking_uri=self.uri)
        return self._client

    def experiment_ids(self) -> list[str]:
        """Every active experiment of the store."""
        if not self.exists:
            return []
        return [e.experiment_id for e in self.client.search_experiments()]

    def runs(self, filter_string: str, experiment_ids: Iterable[str] | None = None) -> list["Run"]:
        """All runs matching ``filter_string`` (MLflow's syntax), in every experiment by default,
        newest first; pages through the store."""
        ids = list(experiment_ids) if experiment_ids is not None else self.experiment_ids()
        if not ids:
            return []
        out: list[Run] = []
        token = None
        while True:
            page = self.client.search_runs(
                ids,
                filter_string=filter_string,
                max_results=_PAGE,
                order_by=["attributes.start_time DESC"],
                page_token=token,
            )
            out.extend(page)
            token = page.token
            if not token:
                return out

    def searches(self, experiment_ids: Iterable[str] | None = None) -> list["Run"]:
        """The parent runs of searches, newest first."""
        return self.runs(f"tags.`{ROLE_TAG}` = 'search'", experiment_ids)

    def experiment_id(self, name: str) -> str | None:
        """The id of the active experiment ``name``; None when the store has none."""
        found = self.client.get_experiment_by_name(name) if self.exists else None
        return None if found is None or found.lifecycle_stage != "active" else found.experiment_id

    def latest_search(self, experiment: str) -> "Run | None":
        """The newest search (parent) run of the active experiment ``experiment``, or None."""
        experiment_id = self.experiment_id(experiment)
        searches = [] if experiment_id is None else self.searches([experiment_id])
        return searches[0] if searches else None

    def require_search(self, experiment: str) -> "Run":
        """The newest search run of ``experiment``; a one-line ValueError when the store has no
        such experiment (listing the astune experiments it has) or it holds no search."""
        if self.experiment_id(experiment) is None:
            names = self.search_experiment_names() if self.exists else []
            raise ValueError(
                f"no experiment {experiment!r} in {self.uri}; astune experiments there: "
                f"{', '.join(names) if names else 'none'}."
            )
        search = self.latest_search(experiment)
        if search is None:
            raise ValueError(
                f"experiment {experiment!r} holds no astune search run (tag {ROLE_TAG}=search)."
            )
        return search

    def trials(
        self, parent_run_id: str | None = None, experiment_ids: Iterable[str] | None = None
    ) -> list["Run"]:
        """Trial runs: the children of one parent run, or every trial of the store."""
        query = f"tags.`{ROLE_TAG}` = 'trial'"
        if parent_run_id is not None:
            query += f" and tags.`{PARENT_TAG}` = {quote(parent_run_id)}"
        return self.runs(query, experiment_ids)

    def confirm_runs(
        self, parent_run_id: str, experiment_ids: Iterable[str] | None = None
    ) -> list["Run"]:
        """The confirm runs (tag ``astune.role=confirm``) under one search's parent run."""
        query = f"tags.`{ROLE_TAG}` = {quote(CONFIRM_ROLE)} and "
        query += f"tags.`{PARENT_TAG}` = {quote(parent_run_id)}"
        return self.runs(query, experiment_ids)

    def runs_by_id(self, run_ids: Iterable[str], experiment_id: str) -> dict[str, "Run"]:
        """The runs of ``experiment_id`` among ``run_ids`` (one query; deleted ones left out)."""
        wanted = sorted(set(run_ids))
        if not wanted:
            return {}
        query = f"attributes.run_id IN ({', '.join(quote(r) for r in wanted)})"
        return {run.info.run_id: run for run in self.runs(query, [experiment_id])}

    def dataset_trials(self, dataset: str) -> list["Run"]:
        """Every trial run tagged with ``dataset``."""
        return self.runs(f"tags.`{ROLE_TAG}` = 'trial' and tags.`{DATASET_TAG}` = {quote(dataset)}")

    def search_experiment_names(self) -> list[str]:
        """The names of the experiments that hold at least one astune search, sorted."""
        ids = {run.info.experiment_id for run in self.searches()}
        return sorted(self.experiment_name(i) for i in ids)

    def experiment_name(self, experiment_id: str) -> str:
        """The name of the experiment ``experiment_id``."""
        return self.client.get_experiment(experiment_id).name


def existing_store(tracking_uri: str | None) -> Store:
    """The store at ``tracking_uri`` (None: ``./astune-runs/mlflow.db``), read without importing
    MLflow; ValueError (one line) when it is a local SQLite or file store that is not there
    (MLflow would create an empty one)."""
    store = Store(tracking_uri)
    if store.uri.startswith(("sqlite:///", "file:")) and not store.exists:
        path = store.uri.removeprefix("sqlite:///").partition("?")[0]
        raise ValueError(
            f"no MLflow store at {path} (tracking URI {store.uri}); pass --tracking-uri"
        )
    return store


def param(run: "Run", key: str) -> Any:
    """A run's param as a Python value (``"0.3"`` -> 0.3, ``"True"`` -> True), as a resume
    last changed it (:func:`params_now`); None when the run lacks it or logged ``"None"`` (not
    applicable)."""
    return parse_value(params_now(run).get(key), key)


def params_now(run: "Run") -> dict[str, str]:
    """A search run's params with the values a resume changed (tagged
    :data:`~astune.store.conventions.CHANGED_ON_RESUME` + key) in place of those first logged."""
    changed = {
        tag.removeprefix(CHANGED_ON_RESUME): value
        for tag, value in run.data.tags.items()
        if tag.startswith(CHANGED_ON_RESUME)
    }
    return {**run.data.params, **changed}


def field_kinds(cls: type) -> dict[str, type]:
    """The scalar type of each field of dataclass ``cls`` whose annotation starts with bool,
    float, int or str (``"float | None"`` -> float)."""
    import dataclasses

    kinds = {}
    for f in dataclasses.fields(cls):
        head = str(f.type).split(" | ")[0]
        for kind in (bool, float, int, str):
            if head == kind.__name__:
                kinds[f.name] = kind
    return kinds


def _schema_kinds() -> dict[str, type]:
    """The scalar type of each TrainConfig field and flat loss parameter of the losses
    registered now (a plugin's loss registers after the first read)."""
    from astune.losses.catalogue import CATALOGUE

    return _kinds_of(tuple(CATALOGUE))


@functools.cache
def _kinds_of(losses: tuple[str, ...]) -> dict[str, type]:
    from astune.config import TrainConfig
    from astune.losses.catalogue import CATALOGUE

    kinds: dict[str, type] = {p.name: p.kind for n in losses for p in CATALOGUE[n].params}
    return {**kinds, **field_kinds(TrainConfig)}


def parse_value(text: str | None, key: str | None = None) -> Any:
    """A logged param as Python: by the config schema's type when ``key`` is a TrainConfig
    field or loss parameter (``"2e-05"`` is a float; YAML 1.1 would keep a string), else
    YAML's reading."""
    kind = _schema_kinds().get(key) if key is not None else None
    return as_kind(text, kind)


def as_kind(text: str | None, kind: type | None) -> Any:
    """A logged param read as ``kind`` (bool, int, float, str); YAML's reading when ``kind``
    is None or the text is not of that kind; None for a missing or ``"None"`` param."""
    if text is None or text == NOT_APPLICABLE:
        return None
    if kind is bool and text in ("True", "False"):
        return text == "True"
    if kind in (int, float):
        try:
            number = float(text)
        except ValueError:
            return text
        return int(number) if kind is int and number.is_integer() else number
    if kind is str:
        return text
    import yaml

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return value if isinstance(value, (bool, int, float, str)) else text


def objective(run: "Run") -> float | None:
    """The trial's best ``objective``: its ``best_objective`` metric (logged with its final
    report), else the latest ``objective`` (a trial stopped before its final report); None
    unless finite."""
    metrics = run.data.metrics
    value = metrics.get("best_objective", metrics.get("objective"))
    return value if value is not None and math.isfinite(value) else None


def search_mode(parent: "Run") -> str:
    """The mode of the search of ``parent`` (its param; ``max`` when it logged none)."""
    return "min" if param(parent, "mode") == "min" else "max"


def best_trial(runs: Iterable["Run"], mode: str) -> "Run":
    """The best of ``runs`` (trial runs with an objective: :func:`finished_trials`) by
    :func:`astune.store.best.best_first`, whatever their order; ValueError when empty."""
    from astune.store.best import best_first

    return min(runs, key=lambda r: best_first(objective(r), trial_id(r), mode))


def trial_id(run: "Run") -> str:
    """A trial's one name, everywhere a person reads it (the live and front tables, run names,
    the confirm table, `export`, `report`, ``pareto.csv``): Ray's trial id, which the run holds
    as its tag ``astune.trial_id`` and in its run name (``<loss>-<trial id>``); the run id for
    a run written without the tag."""
    return run.data.tags.get(TRIAL_ID_TAG) or run.info.run_id


def best_evaluation_metrics(store: Store, run: "Run") -> dict[str, float]:
    """The trial's ``val_*`` metrics at its best evaluation (metric ``best_evaluation``, else
    its latest evaluation)."""
    step = run.data.metrics.get("best_evaluation")
    out = {}
    for key, latest in run.data.metrics.items():
        if not key.startswith("val_"):
            continue
        out[key] = latest
        if step is not None:
            history = store.client.get_metric_history(run.info.run_id, key)
            at_step = [m.value for m in history if m.step == int(step)]
            if at_step:
                out[key] = at_step[-1]
    return out


def best_so_far(runs: Iterable["Run"], mode: str) -> "Run | None":
    """The best of ``runs`` that did not fail and reported an objective (a running trial's
    latest counts), as :func:`best_trial` picks it; None when none has: ``status``' rule."""
    scored = [run for run in runs if run.info.status != "FAILED" and objective(run) is not None]
    return best_trial(scored, mode) if scored else None


def finished_trials(runs: Iterable["Run"], losses: Iterable[str] | None = None) -> list["Run"]:
    """The FINISHED trial runs with a finite objective, optionally of ``losses`` only."""
    wanted = set(losses) if losses is not None else None
    return [
        run
        for run in runs
        if run.info.status == "FINISHED"
        and objective(run) is not None
        and (wanted is None or param(run, "loss") in wanted)
    ]


def dataset_of(run: "Run") -> str | None:
    return run.data.tags.get(DATASET_TAG)


@contextmanager
def no_progress_bar() -> Iterator[None]:
    """MLflow draws a progress bar per downloaded artifact; readers fetch a few small files."""
    key = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    old = os.environ.get(key)
    os.environ[key] = "false"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = old


__all__ = [
    "AS_LOSSES",
    "SOFTMAX_LOSSES",
    "Store",
    "best_evaluation_metrics",
    "best_trial",
    "dataset_of",
    "finished_trials",
    "no_progress_bar",
    "objective",
    "param",
    "parse_value",
    "search_mode",
    "trial_id",
]
