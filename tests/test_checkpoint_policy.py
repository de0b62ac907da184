"""The checkpoint policy: which evaluations write a resume checkpoint, and its bad values."""

from __future__ import annotations

import pytest

from astune.checkpoint_policy import SEARCH_DEFAULT, TRAIN_DEFAULT, CheckpointPolicy
from astune.cli import main
from astune.config import TrainConfig
from astune.tuning.settings import SearchSettings


@pytest.mark.parametrize(
    "every, since, last, due",
    [
        ("eval", 0.0, False, True),
        ("eval", 0.0, True, True),
        ("end", 1e9, False, False),
        ("end", 0.0, True, True),
        ("10m", 599.9, False, False),
        ("10m", 600.0, False, True),
        ("0.5m", 30.0, False, True),
        ("2min", 119.0, False, False),
        ("10m", 1e9, True, False),  # a finished run needs no checkpoint to resume
    ],
)
def test_due(every, since, last, due):
    assert CheckpointPolicy(every).due(seconds_since_last=since, last=last) is due


@pytest.mark.parametrize("every, minutes", [("10m", 10.0), ("0.5m", 0.5), (".25min", 0.25)])
def test_minutes_are_parsed(every, minutes):
    assert CheckpointPolicy(every).minutes == minutes


@pytest.mark.parametrize("bad", ["often", "10", "0m", "-1m", "10s", "", "m", None, 10])
def test_a_bad_policy_names_the_value_and_what_is_accepted(bad):
    with pytest.raises(ValueError) as err:
        CheckpointPolicy(bad)
    message = str(err.value)
    assert repr(bad) in message and "'eval'" in message and "'10m'" in message
    assert "\n" not in message


def test_configs_and_settings_check_their_policy_and_default_to_the_documented_ones():
    assert TrainConfig().checkpoint_every == TRAIN_DEFAULT == "eval"
    assert SearchSettings(dataset="sst5").checkpoint_every == SEARCH_DEFAULT
    CheckpointPolicy(SEARCH_DEFAULT)
    with pytest.raises(ValueError, match="'hourly'"):
        TrainConfig(checkpoint_every="hourly").validate()
    with pytest.raises(ValueError, match="'hourly'"):
        SearchSettings(dataset="sst5", checkpoint_every="hourly").validate()


@pytest.mark.parametrize("command", ["train", "search"])
def test_the_cli_refuses_a_bad_policy_in_one_line(command, capsys):
    assert main([command, "--dataset", "sst5", "--checkpoint-every", "hourly"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'hourly'" in err[0] and "--checkpoint-every must" in err[0]
