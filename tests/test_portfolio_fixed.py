"""What the user fixed stays fixed (issue 70, item 1): a portfolio config holds the values the
user's own space file (not a packaged one) and the flags fix; configs that become the same run
once; the console says what it kept, and when the search is the portfolio alone."""

from __future__ import annotations

import optuna
import yaml
from tiny import tiny_settings

from astune.space.files import space_dir
from astune.space.user_fixed import user_fixed
from astune.store.conventions import PORTFOLIO_POINTS
from astune.tuning.execution import search_tracker
from astune.tuning.runner import prepare_search

USER_VALUES = {"lr": 2.0e-5, "batch_size": 16, "epochs": 1, "as_speed": False}
LOSS_VALUES = {"delta": 0.3, "warmup_ratio": 0.1}
USER_SPACE = {
    "extends": "sst5",
    "losses": ["as_softmax"],
    "seed_points": [],  # sst5.yaml's hold other values than these
    "params": {
        "lr": {"type": "fixed", "value": 2.0e-5},
        "batch_size": {"type": "categorical", "choices": [16]},  # one choice: fixed too
        "epochs": {"type": "fixed", "value": 1},
    },
    "loss_params": {
        "as_softmax": {
            "delta": {"type": "fixed", "value": 0.3},
            "warmup_ratio": {"type": "fixed", "value": 0.1},
        }
    },
    "speed_params": {"as_speed": {"type": "fixed", "value": False}},
}


def write(path, doc) -> str:
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_only_the_users_own_files_fix_values(tmp_path):
    write(tmp_path / "base.yaml", USER_SPACE)
    child = {"extends": "base", "params": {"lr": {"type": "float", "low": 1e-5, "high": 1e-4}}}
    write(tmp_path / "child.yaml", child)
    fixed = user_fixed(tmp_path / "child.yaml")
    assert fixed.values == {k: v for k, v in USER_VALUES.items() if k != "lr"}  # searched again
    assert fixed.loss_values == {"as_softmax": LOSS_VALUES}
    assert user_fixed(tmp_path / "base.yaml").for_loss("as_softmax") == {
        **USER_VALUES, **LOSS_VALUES
    }  # fmt: skip
    assert not user_fixed(space_dir() / "sst5.yaml")  # the packaged epochs: 7 is astune's


def test_a_space_with_every_value_fixed_runs_exactly_that_config(tmp_path, data_dir):
    space = write(tmp_path / "mine.yaml", USER_SPACE)
    settings = tiny_settings(root=tmp_path, data_dir=data_dir, portfolio=True, space=space,
                             num_samples=1)  # fmt: skip
    prepared = prepare_search(settings)
    study = optuna.create_study()
    configs = []
    for point in prepared.space.seed_points:
        study.enqueue_trial(point)
        trial = study.ask()  # as OptunaSearch merges them: suggested and fixed values
        constants = prepared.space.define_by_run(trial)
        configs.append({**trial.params, **constants})
    assert len(configs) == len({str(sorted(c.items())) for c in configs}) >= 1
    for config in configs:
        assert config["loss"] == "as_softmax"
        assert {k: config[k] for k in (*USER_VALUES, *LOSS_VALUES)} == {
            **USER_VALUES, **LOSS_VALUES
        }  # fmt: skip
    for name in ("lr", "epochs"):  # history widened nothing the user fixed
        assert prepared.space.params[name].fixed, name
    notes = "\n".join(prepared.notes)
    assert (
        "keeps what you fixed: batch_size 16, epochs 1, lr 2e-05, as_speed False, "
        "delta 0.3 (as_softmax), warmup_ratio 0.1 (as_softmax)"
    ) in notes
    assert "configs become the same as an earlier one once holding your values: run once" in notes
    assert "--num-samples 1 is within its 1 config: this search runs the portfolio alone" in notes
    assert "portfolio: trial 1 runs what won on past tasks" in notes


def test_fewer_samples_than_the_portfolio_run_its_first_configs_and_say_so(tmp_path, data_dir):
    """--num-samples 1 under a portfolio of several configs: the console lists them all, but
    says trial 1 alone runs one (it said "trials 1-N run")."""
    settings = tiny_settings(root=tmp_path, data_dir=data_dir, portfolio=True, num_samples=1)
    prepared = prepare_search(settings)
    listed = [line for line in prepared.notes if line.startswith("  ")]
    assert len(listed) >= 2, prepared.notes  # the packaged prior's portfolio at this size
    notes = "\n".join(prepared.notes)
    assert "portfolio: trial 1 runs what won on past tasks" in notes
    assert "not run" not in listed[0] and all(
        line.endswith("; not run: past --num-samples)") for line in listed[1:]
    )  # the listed configs the search will not reach
    within = f"--num-samples 1 is within its {len(listed)} configs"
    assert f"{within}: this search runs its first config alone" in notes
    # the parent run records them, so that `astune status` names their trials "portfolio"
    assert prepared.portfolio_points == len(listed)
    assert search_tracker(prepared).search_params[PORTFOLIO_POINTS] == len(listed)
