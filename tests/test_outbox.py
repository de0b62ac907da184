"""Writes held while the tracking server is away (``astune.store.outbox``) and what a resume
writes from Ray's record (``astune.store.backfill``), on real MLflow clients: a SQLite store, and
an HTTP URI where no server listens."""

from __future__ import annotations

import logging
import os

import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from ports import free_port
from stores import new_store

from astune.store.backfill import TrialRecord, backfill_trials
from astune.store.outbox import (
    FAST_HTTP,
    FIRST_RETRY_SECONDS,
    LAST_RETRY_SECONDS,
    RETRIES_VARIABLE,
    TIMEOUT_VARIABLE,
    Outbox,
    fast_failing_http,
    unreachable,
)
from astune.store.writer import SearchTracker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Server:
    """A write target that is away until told otherwise; what reached it, in order."""

    def __init__(self) -> None:
        self.up, self.written = True, []

    def write(self, item: str):
        def call() -> None:
            if not self.up:
                client = MlflowClient(f"http://127.0.0.1:{CLOSED_PORT}")
                client.get_experiment("0")  # a real refused connection, as MLflow raises it
            self.written.append(item)

        return call


CLOSED_PORT = free_port()  # nothing listens there


@pytest.fixture(autouse=True)
def _fast_http(monkeypatch):
    """No retries: a refused connection fails at once (the search's own settings retry twice)."""
    monkeypatch.setenv(RETRIES_VARIABLE, "0")
    with fast_failing_http():
        yield


def test_an_unreachable_server_is_told_apart_from_a_refused_request(tmp_path):
    with pytest.raises(MlflowException) as away:
        MlflowClient(f"http://127.0.0.1:{CLOSED_PORT}").get_experiment("0")
    assert unreachable(away.value)
    with pytest.raises(MlflowException) as refused:  # the server answered: not there
        MlflowClient(new_store(tmp_path)).get_run("0" * 32)
    assert not unreachable(refused.value)


def test_writes_are_held_in_order_while_away_and_written_when_back(caplog):
    clock, server = Clock(), Server()
    outbox = Outbox(clock=clock)
    outbox.submit("a", server.write("a"))
    server.up = False
    with caplog.at_level(logging.WARNING, logger="astune.store.outbox"):
        outbox.submit("b", server.write("b"))
        for item in "cd":  # before the retry is due: queued, no call made
            outbox.submit(item, server.write(item))
    assert server.written == ["a"] and outbox.behind == 3
    assert outbox.failure.startswith("MlflowException: API request to http://127.0.0.1:")
    (away,) = caplog.messages  # one line, however many writes wait
    assert away.startswith("MLflow tracking server unreachable (MlflowException: API request")

    waits = []  # the retry interval doubles while the server stays away, up to its cap
    for _ in range(6):
        clock.now += LAST_RETRY_SECONDS
        before = clock.now
        outbox.flush()
        waits.append(outbox._retry_at - before)
    assert waits[0] == 2 * FIRST_RETRY_SECONDS and waits[-1] == LAST_RETRY_SECONDS
    assert waits == sorted(waits) and server.written == ["a"]

    server.up = True
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="astune.store.outbox"):
        assert outbox.flush() == 0  # not due yet
        clock.now += LAST_RETRY_SECONDS
        outbox.submit("e", server.write("e"))
    assert server.written == list("abcde") and outbox.behind == 0
    assert caplog.messages[-1].endswith("4 held writes written")
    outbox.submit("f", server.write("f"))  # back to writing at once
    assert server.written[-1] == "f"


def test_a_refused_write_is_dropped_with_one_warning_and_the_rest_goes_on(caplog):
    outbox, written = Outbox(), []

    def bad() -> None:
        raise MlflowException("INVALID_PARAMETER_VALUE: a param changed")

    with caplog.at_level(logging.WARNING, logger="astune.store.outbox"):
        outbox.submit("a param of trial t1", bad)
        outbox.submit("ok", lambda: written.append("ok"))
    assert written == ["ok"] and outbox.behind == 0
    (warning,) = caplog.messages
    assert warning.startswith("MLflow tracking: a param of trial t1 failed (MlflowException")


def test_fast_http_keeps_what_the_user_set(monkeypatch):
    key = TIMEOUT_VARIABLE
    assert os.environ[key] == FAST_HTTP[key]  # the autouse fixture set it
    monkeypatch.setenv(key, "9")
    with fast_failing_http():
        assert os.environ[key] == "9"
    assert os.environ[key] == "9"


# -- backfill ------------------------------------------------------------------------------------
def evaluation(step: int, objective: float) -> dict:
    return {"objective": objective, "val_accuracy": objective, "evaluation": step, "trial_id": "x"}


def final(objective: float) -> dict:
    return {"objective": objective, "test_accuracy": objective - 0.1, "final": 1, "done": True}


def history(client: MlflowClient, run_id: str, key: str = "objective") -> list[int]:
    return sorted(m.step for m in client.get_metric_history(run_id, key))


def test_backfill_writes_what_the_runs_lack_once(tmp_path):
    """Three trials as a search left them with the server away: one run lacking its last
    evaluation and its final report (still RUNNING), one never created, one still to run."""
    uri = new_store(tmp_path)
    tracker = SearchTracker(
        uri, "behind", dataset="sst5", task="single_label", search_params={"dataset": "sst5"}
    )
    tracker.start()
    partial = tracker.open_trial_run("t1", {"loss": "as_softmax", "delta": 0.3})
    tracker.log_result(partial, evaluation(0, 0.3))
    tracker.log_result(partial, evaluation(1, 0.4))
    going = tracker.open_trial_run("t3", {"loss": "softmax"})
    tracker.log_result(going, evaluation(0, 0.2))
    records = [
        TrialRecord(
            "t1",
            {"loss": "as_softmax", "delta": 0.3},
            "as_softmax-t1",
            [evaluation(0, 0.3), evaluation(1, 0.4), evaluation(2, 0.45), final(0.45)],
            completed=True,
        ),
        TrialRecord(  # stopped by ASHA: no final report
            "t2", {"loss": "softmax"}, "softmax-t2", [evaluation(0, 0.1)], completed=True
        ),
        TrialRecord(
            "t3",
            {"loss": "softmax"},
            "softmax-t3",
            # its checkpoint was unreadable: restarted, it said so with its first report again,
            # which MLflow holds (the tag it missed), then evaluated further
            [evaluation(0, 0.2), {**evaluation(0, 0.2), "restarted_from_start": 1.0}]
            + [evaluation(1, 0.25)],
            completed=False,
        ),  # fmt: skip
        TrialRecord("t4", {"loss": "softmax"}, "softmax-t4", [], completed=False),
    ]
    done = backfill_trials(tracker, records)
    assert (done.runs, done.evaluations, done.finals, len(done.finished)) == (1, 3, 1, 2)

    client = MlflowClient(uri)
    runs = {r.data.tags["astune.trial_id"]: r for r in tracker.trial_runs()}
    assert sorted(runs) == ["t1", "t2", "t3"]  # t4 reported nothing: no run
    assert runs["t2"].info.run_name == "softmax-t2"
    assert runs["t2"].data.params["loss"] == "softmax"
    assert [runs[t].info.status for t in ("t1", "t2", "t3")] == ["FINISHED", "FINISHED", "RUNNING"]
    assert runs["t2"].data.tags["astune.stopped_early"] == "true"
    assert "astune.stopped_early" not in runs["t1"].data.tags
    assert runs["t3"].data.tags["astune.restarted_from_start"] == "true"
    assert not any("astune.restarted_from_start" in runs[t].data.tags for t in ("t1", "t2"))
    assert history(client, partial) == [0, 1, 2] and history(client, going) == [0, 1]
    assert runs["t1"].data.metrics["best_objective"] == 0.45
    assert history(client, partial, "test_accuracy") == [0]

    again = backfill_trials(tracker, records)  # a second resume writes nothing
    assert not again.anything
    assert history(client, partial) == [0, 1, 2]
    assert len(client.get_metric_history(partial, "val_accuracy")) == 3
