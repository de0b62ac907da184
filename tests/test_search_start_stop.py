"""A new search stopped before its first trial ran (astune/tuning/lifecycle/stop.py's start-up
signals, astune/tuning/execution.py's tune_search): it leaves nothing behind, so that the same
command starts it anew. The signal comes between two start-up steps, as a user's Ctrl-C does;
the stop's path through Tune's loop is test_search's SIGTERM test."""

from __future__ import annotations

import signal

import pytest
import yaml
from mlflow import MlflowClient
from mlflow.entities import ViewType
from tiny import fifo_space, one_ray, tiny_settings

from astune.tuning import execution
from astune.tuning.lifecycle.resume import experiment_saved, forget_experiment
from astune.tuning.lifecycle.stop import SearchStopped, StopSignals
from astune.tuning.runner import _check_experiment_path, prepare_search
from astune.tuning.settings import SearchSettings


class SignalAtCheck(StopSignals):
    """Ctrl-C during the start-up step that ends with check number ``at`` (1: Ray's start, 2:
    the parent run opened and claimed, 3: the Tuner made)."""

    def __init__(self, at: int):
        super().__init__()
        self.at, self.checks = at, 0

    def check(self, **where) -> None:
        self.checks += 1
        if self.checks == self.at:  # as the handler notes it while a start-up step runs
            self.received = signal.SIGINT
        super().check(**where)


def stopped_at(at: int, tmp_path, data_dir) -> tuple[SearchStopped, MlflowClient]:
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(fifo_space(trials=2, epochs=1)))
    settings = tiny_settings(root=tmp_path, data_dir=data_dir, name="early", space=str(space))
    prepared = prepare_search(settings)
    stop = SignalAtCheck(at)
    with pytest.raises(SearchStopped) as stopped:
        execution.tune_search(prepared, 2, stop=stop)
    assert stop.checks == at
    _check_experiment_path(prepared.settings)  # the same command: no "already exists"
    return stopped.value, MlflowClient(prepared.tracking_uri)


def assert_nothing_left(stopped: SearchStopped, client: MlflowClient) -> None:
    assert str(stopped) == (
        "search 'early' stopped by SIGINT (before its first trial started; nothing ran); start "
        "it again with the same command"
    )
    assert stopped.exit_code == 130 and not stopped.resumable
    experiment = client.get_experiment_by_name("early")
    assert client.search_runs([experiment.experiment_id], run_view_type=ViewType.ACTIVE_ONLY) == []


def test_stopped_once_it_holds_the_search_its_parent_run_is_deleted(tmp_path, data_dir):
    stopped, client = stopped_at(2, tmp_path, data_dir)
    assert_nothing_left(stopped, client)
    experiment = client.get_experiment_by_name("early")
    deleted = client.search_runs([experiment.experiment_id], run_view_type=ViewType.DELETED_ONLY)
    assert [r.info.status for r in deleted] == ["KILLED"]  # closed, then deleted


@pytest.mark.ray
def test_stopped_once_its_tuner_is_made_its_experiment_folder_goes_too(tmp_path, data_dir):
    with one_ray():
        stopped, client = stopped_at(3, tmp_path, data_dir)
    assert_nothing_left(stopped, client)
    assert not (tmp_path / "ray" / "early").exists()  # the Tuner's pickle alone: not resumable


def test_a_tuner_made_but_never_fitted_is_not_saved_and_its_folder_goes(tmp_path):
    from ray import tune

    settings = SearchSettings(dataset="sst5", name="made", storage_path=str(tmp_path))
    tune.Tuner(
        lambda config: None, run_config=tune.RunConfig(name="made", storage_path=str(tmp_path))
    )
    assert (tmp_path / "made" / "tuner.pkl").is_file()  # what Tuner.restore cannot resume
    assert not experiment_saved(settings)
    forget_experiment(settings)
    assert not (tmp_path / "made").exists()
