"""A store read once: for a command that asks the same store many questions (``recommend``
asks for its trials, its searches, a dataset's trials and confirm runs, from four modules).

Every astune run (trials, searches, confirm runs) comes in one paged read and every experiment's
name in one more; the questions :class:`~astune.store.reader.Store` answers are then answered
from those lists, newest first as the store gives them. What is written meanwhile (the
difficulty probe's cache tag) is not seen by the snapshot, which is what one command wants.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from astune.store.conventions import CONFIRM_ROLE, DATASET_TAG, PARENT_TAG, ROLE_TAG
from astune.store.reader import Store

if TYPE_CHECKING:
    from mlflow.entities import Run

ROLES = ("trial", "search", CONFIRM_ROLE)
"""The runs a snapshot holds, by their ``astune.role`` tag."""


class StoreSnapshot(Store):
    """``store``'s astune runs and experiment names, read on first use and kept."""

    def __init__(self, store: Store):
        super().__init__(store.uri)
        self._client = store._client
        self._held: list[Run] | None = None
        self._names: dict[str, str] | None = None

    def _all(self) -> list["Run"]:
        if self._held is None:
            # One read of every run: MLflow's filter has no IN for tags, so the roles are kept
            # here rather than asked for in three queries.
            runs = Store.runs(self, "")
            self._held = [r for r in runs if r.data.tags.get(ROLE_TAG) in ROLES]
        return self._held

    def _with(self, role: str, experiment_ids: Iterable[str] | None, **tags: str) -> list["Run"]:
        ids = None if experiment_ids is None else set(experiment_ids)
        wanted = {ROLE_TAG: role, **{_TAGS[k]: v for k, v in tags.items()}}
        return [
            run
            for run in self._all()
            if (ids is None or run.info.experiment_id in ids)
            and all(run.data.tags.get(k) == v for k, v in wanted.items())
        ]

    def searches(self, experiment_ids: Iterable[str] | None = None) -> list["Run"]:
        return self._with("search", experiment_ids)

    def trials(
        self, parent_run_id: str | None = None, experiment_ids: Iterable[str] | None = None
    ) -> list["Run"]:
        if parent_run_id is None:
            return self._with("trial", experiment_ids)
        return self._with("trial", experiment_ids, parent=parent_run_id)

    def confirm_runs(
        self, parent_run_id: str, experiment_ids: Iterable[str] | None = None
    ) -> list["Run"]:
        return self._with(CONFIRM_ROLE, experiment_ids, parent=parent_run_id)

    def runs_by_id(self, run_ids: Iterable[str], experiment_id: str) -> dict[str, "Run"]:
        wanted = set(run_ids)
        return {
            run.info.run_id: run
            for run in self._all()
            if run.info.run_id in wanted and run.info.experiment_id == experiment_id
        }

    def dataset_trials(self, dataset: str) -> list["Run"]:
        return self._with("trial", None, dataset=dataset)

    def _experiments(self) -> dict[str, str]:
        if self._names is None:
            found = self.client.search_experiments() if self.exists else []
            self._names = {e.experiment_id: e.name for e in found}
        return self._names

    def experiment_ids(self) -> list[str]:
        return list(self._experiments())

    def experiment_name(self, experiment_id: str) -> str:
        names = self._experiments()
        if experiment_id not in names:  # deleted or created since the read: asked once
            names[experiment_id] = super().experiment_name(experiment_id)
        return names[experiment_id]


_TAGS = {"parent": PARENT_TAG, "dataset": DATASET_TAG}
