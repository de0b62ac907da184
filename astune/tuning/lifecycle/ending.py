"""How a search ends in MLflow: its parent run's status, the driver's claim given up, the Optuna
study written; and the search whose tracking server is away at its end (:class:`TrackingBehind`).

While a search runs, its writes wait in the tracker's outbox when the server is unreachable
(:mod:`astune.store.outbox`). If the server has not come back when the trials have ended, the
driver does not wait for it: the parent run stays as it is, the claim ages out, and one line says
that tracking is behind and which command writes the rest (``--resume`` reads Ray's records,
:mod:`astune.store.backfill`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from astune.store.outbox import fast_failing_http, first_line, unreachable
from astune.tuning.lifecycle.resume import resume_command

if TYPE_CHECKING:
    from astune.space.space import SearchSpace
    from astune.store.driver_lock import DriverLock
    from astune.store.writer import SearchTracker
    from astune.tuning.settings import SearchSettings

logger = logging.getLogger(__name__)


class TrackingBehind(RuntimeError):
    """The trials ended but the tracking server was unreachable for the last writes; the one-
    line message says so and gives the command that writes what is missing."""

    exit_code = 75  # EX_TEMPFAIL (sysexits.h): a temporary failure, to be retried


class SearchEnd:
    """The end of one search's tracking (see the module)."""

    def __init__(
        self,
        tracker: SearchTracker,
        lock: DriverLock,
        *,
        space: SearchSpace,
        settings: SearchSettings,
    ):
        self.tracker, self.lock, self.space, self.settings = tracker, lock, space, settings

    def behind(self, failure: str) -> TrackingBehind:
        settings, held = self.settings, self.tracker.outbox.behind
        return TrackingBehind(
            f"search {settings.experiment_name!r}: its trials ended, but tracking is behind: "
            f"{self.tracker.tracking_uri} is unreachable ({failure}; {held} writes held); Ray "
            f"keeps every result under {settings.experiment_path()}: once the server answers, "
            f"run {resume_command(settings)} to write them"
        )

    def check_caught_up(self) -> None:
        """After the trials: the held writes written now, else :class:`TrackingBehind`."""
        outbox = self.tracker.outbox
        outbox.flush(force=True)
        if outbox.behind:
            raise self.behind(outbox.failure)

    @contextmanager
    def behind_if_unreachable(self) -> Iterator[None]:
        """A write in the block that finds the server unreachable is :class:`TrackingBehind`."""
        try:
            yield
        except Exception as err:
            if unreachable(err):
                raise self.behind(f"{type(err).__name__}: {first_line(err)}") from None
            raise

    def close(self, status: str, *, stopped_by: str | None = None, failing: bool = False) -> None:
        """The parent run ends with ``status`` and the claim is released; the study is written.
        With the server unreachable: :class:`TrackingBehind`, or only a warning when the search
        is ``failing`` already (its own error is the one to report)."""
        from astune.tuning.lifecycle.scratch import clean_stale_scratch
        from astune.tuning.optuna_storage import write_study

        try:
            with fast_failing_http(), self.behind_if_unreachable():
                self.tracker.finish(status, stopped_by=stopped_by)
                self.lock.release()
            write_study(self.tracker, self.space)  # Optuna's tools read the search from here
        except TrackingBehind as behind:
            self.lock.stop()
            if not failing:
                raise
            logger.warning("%s", behind)
        finally:
            clean_stale_scratch()  # this node's folders of trials killed with SIGKILL

    def discard(self) -> None:
        """Delete the parent run made by this driver (after :meth:`close`): a new search
        stopped before any trial ran. Unreachable, it stays KILLED, with a warning."""
        if not self.tracker.created_parent:
            return
        try:
            with fast_failing_http():
                self.tracker.client.delete_run(self.tracker.require_parent())
        except Exception as err:
            if not unreachable(err):
                raise
            logger.warning("the stopped search's parent run stays KILLED: %s", first_line(err))

    def give_up(self) -> None:
        """Tracking is behind: stop the claim's heartbeat without writing, leave the rest."""
        from astune.tuning.lifecycle.scratch import clean_stale_scratch

        self.lock.stop()
        clean_stale_scratch()
