"""A user's own loss without forking astune (issue 71, items 1 and 2): one registration a loss,
the built-ins included; a plugin module named by ``--plugin``, ``plugins=`` or a config, whose
loss is listed, built, trained and exported like a built-in; one line for a plugin that cannot
be imported or registers a malformed loss. Searched, exported and confirmed from a user's own
file on the installed wheel: tests/test_installed.py runs docs/extending.md."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from astune.cli import main
from astune.losses.catalogue import CATALOGUE, LOSS_PARAM_NAMES, ParamSpec, register_loss

PLUGIN = Path(__file__).parent / "plugins" / "focal_losses.py"
ROOT = Path(__file__).resolve().parents[1]


def test_each_loss_is_declared_once_in_the_source():
    """`git grep` finds each built-in's name registered once and its parameters declared once
    (the catalogue is the one place; no factory table elsewhere)."""
    source = "\n".join(p.read_text() for p in (ROOT / "astune").rglob("*.py"))
    for name, info in CATALOGUE.items():
        assert len(re.findall(rf'register_loss\(\s*"{name}"', source)) == 1, name
        for spec in info.params:
            declared = re.findall(rf'ParamSpec\("{spec.name}"', source)
            assert len(declared) == 1, (name, spec.name)
    builder = (ROOT / "astune" / "losses" / "registry.py").read_text()
    assert not [name for name in CATALOGUE if f'"{name}"' in builder]  # no second table there


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(name="Focal"), r"loss 'Focal': a loss's name must match"),
        (dict(params=(ParamSpec("lr", float, 0.1, 0.0),)), r"parameter 'lr' is reserved"),
        (dict(params=(ParamSpec("g", float, 1.0, 0.0),) * 2), r"parameter 'g' is declared twice"),
        (dict(params=(ParamSpec("g", float, -1.0, 0.0),)), r"parameter 'g': default g must be"),
        (dict(tasks=("images",)), r"tasks \['images'\] must be some of single_label"),
        (dict(name="softmax"), r"loss 'softmax' is already registered \(by astune.losses.base"),
        (dict(factory="no_colon"), r"factory must be callable or 'module:attribute'"),
    ],
)
def test_a_malformed_loss_is_refused_in_one_line(kwargs, message, registry):
    args = {"name": "mine", "factory": torch.nn.CrossEntropyLoss, **kwargs}
    with pytest.raises(ValueError, match=message) as err:
        register_loss(args.pop("name"), **args)
    assert len(str(err.value).splitlines()) == 1
    assert "mine" not in CATALOGUE


def test_a_plugins_loss_is_listed_built_and_carried_flat(registry, capsys):
    assert main(["losses", "--plugin", str(PLUGIN)]) == 0
    line = next(row for row in capsys.readouterr().out.splitlines() if row.startswith("focal"))
    assert "gamma=2.0 [0.0, inf)" in line and line.split()[-1] == "focal_losses"
    from astune.config import TrainConfig
    from astune.losses import build_loss

    assert "gamma" in LOSS_PARAM_NAMES
    config = TrainConfig.from_dict({"loss": "focal", "gamma": 0.5, "plugins": [str(PLUGIN)]})
    assert config.validate().loss_kwargs() == {"gamma": 0.5}
    loss = build_loss("focal", reduction="none", **config.loss_kwargs())
    logits, labels = torch.randn(6, 5), torch.tensor([0, 1, 2, 3, 4, -100])
    p_t = torch.softmax(logits, 1)[torch.arange(5), labels[:5]]
    expected = -((1 - p_t) ** 0.5) * p_t.log()  # the focal loss by its definition
    torch.testing.assert_close(loss(logits, labels)[:5], expected)
    assert loss(logits, labels)[5] == 0.0
    with pytest.raises(ValueError, match=r"gamma must be in \[0.0, inf\), but got -1.0"):
        build_loss("focal", gamma=-1.0)


def test_a_plugins_parameter_is_read_from_the_store_by_its_kind(registry):
    from astune.store.reader import parse_value

    assert parse_value("2", "gamma") == 2  # read before the plugin: YAML's int
    assert main(["losses", "--plugin", str(PLUGIN)]) == 0
    value = parse_value("2", "gamma")  # a float parameter logged as "2" stays a float
    assert value == 2.0 and isinstance(value, float)


@pytest.mark.parametrize(
    "name, message",
    [
        ("no_such_plugin_module", "plugin 'no_such_plugin_module': cannot import it "
         "(ModuleNotFoundError: No module named 'no_such_plugin_module')"),
        ("missing_file.py", "plugin 'missing_file.py': cannot import it (FileNotFoundError: no "
         "such file"),
    ],
)  # fmt: skip
def test_a_plugin_that_cannot_be_imported_is_one_line(name, message, registry, capsys):
    assert main(["losses", "--plugin", name]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_plugin_that_registers_a_malformed_loss_is_one_line(registry, tmp_path, capsys):
    bad = tmp_path / "bad_losses.py"
    bad.write_text(
        "from astune.losses import ParamSpec, register_loss\n"
        "register_loss('bad', params=(ParamSpec('gamma', float, -2.0, 0.0),), factory=len)\n"
    )
    assert main(["losses", "--plugin", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "cannot import it (ValueError: loss 'bad': parameter 'gamma': default gamma" in err


def test_a_plugins_loss_trains_from_the_command_line(registry, tmp_path, data_dir):
    """`train --plugin FILE` with the plugin's loss, in a process of its own (as a user runs
    it): the run trains and its config names the plugin, so `--resume` and export find it."""
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "astune", "train", "--dataset", "sst5", "--plugin",
            str(PLUGIN), "--loss", "focal", "--backbone", "minilm", "--num-layers", "1",
            "--max-train-samples", "32", "--max-eval-samples", "16", "--epochs", "1",
            "--batch-size", "16", "--lr", "1e-3", "--device", "cpu", "--output-dir", str(out),
            "--data-dir", str(data_dir)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    final = json.loads((out / "final.json").read_text())
    assert final["optimizer_steps"] == 2 and math.isfinite(final["test_loss"])


def test_a_plugins_loss_named_by_losses_runs_at_its_registered_defaults(
    registry, tmp_path, data_dir
):
    """`search --losses focal --plugin FILE` on a packaged space, which gives no
    loss_params.focal: focal runs with gamma fixed at its registered 2.0 and the console says
    so (it was refused, naming the packaged file, which a user cannot edit); the portfolio,
    of other losses only, says why it is empty (it said "nothing recorded on minilm")."""
    import optuna
    from tiny import tiny_settings

    from astune.space.params import Param
    from astune.space.space import load_space
    from astune.tuning.runner import prepare_search

    settings = tiny_settings(root=tmp_path, data_dir=data_dir, portfolio=True, losses="focal",
                             plugins=str(PLUGIN))  # fmt: skip
    prepared = prepare_search(settings)
    assert prepared.space.losses == ("focal",)
    assert prepared.space.loss_params["focal"] == {"gamma": Param("fixed", value=2.0)}
    trial = optuna.create_study().ask()
    config = {**prepared.space.define_by_run(trial), **trial.params}  # as a trial gets it
    assert config["loss"] == "focal" and config["gamma"] == 2.0
    assert prepared.notes == (
        "focal: its parameters stay at their registered defaults (gamma=2): neither the space "
        "nor default.yaml gives loss_params.focal; search them from a --space file that does "
        "(docs/extending.md)",
        "portfolio: none: past tasks on minilm were recorded with as_softmax, "
        "multilabel_as_softmax, multilabel_softmax and softmax, not with the loss searched "
        "(focal)",
    )
    # a loss the packaged files give keeps their ranges, and takes no note
    assert load_space("sst5").undefined_losses("focal,t_softmax") == {"focal": {"gamma": 2.0}}
