"""`astune search --warm-start`: the space `recommend` warms from a reference file is the one
searched (its first seed point's learning rate is the first trial's), it is written beside the
search, and `--resume` reads it again rather than recommending anew."""

from __future__ import annotations

import math

import pytest
from mlflow import MlflowClient
from search_processes import runs, search_argv, write_space
from stores import new_store
from tiny import tiny_settings

from astune.cli import main
from astune.history.reference import write_reference
from astune.space.space import load_space
from astune.tuning.runner import prepare_search
from astune.tuning.settings import SearchError
from astune.tuning.warm_start import WARM_START_DEPRECATED

BEST = {"loss": "as_softmax", "lr": 3e-3, "epochs": 1, "batch_size": 32, "as_speed": False}


def reference(folder, *, lr: float = BEST["lr"], task: str = "single_label"):
    """A reference file of one search like the tiny one (1-layer MiniLM, 64 rows, SST-5's
    difficulty; ``task`` its family) whose best trials ran ``lr``."""
    entry = {
        "dataset": "sst5-elsewhere",
        "task": task,
        "difficulty": 0.9,
        "train_size": 64,
        "backbone": "minilm",
        "num_layers": 1,
        "ranked": 40,
        "trials": [{"config": {**BEST, "lr": lr}, "rank": i / 39, "score": 0.4} for i in range(10)],
    }
    return write_reference(folder / "reference.json", [entry], made_by="test")


def warned_prepare(settings):
    """``prepare_search`` of a ``--warm-start`` search: it warns, and says so first."""
    with pytest.warns(FutureWarning, match=r"--warm-start is deprecated .* astune 0\.3\.0"):
        prepared = prepare_search(settings)
    assert prepared.notes[0] == WARM_START_DEPRECATED
    return prepared


@pytest.mark.slow
def test_warm_start_moves_the_fixed_lr_toward_the_reference(tmp_path, data_dir):
    space = write_space(tmp_path)  # tests/spaces/tiny.yaml: lr fixed at 1e-3, 2 epochs
    settings = tiny_settings(root=tmp_path, data_dir=data_dir, space=str(space), warm_start=True)
    settings.reference = str(reference(tmp_path))
    prepared = warned_prepare(settings)
    warmed = prepared.settings.space
    assert warmed == str(tmp_path / "ray" / "astune-sst5.warm-start.yaml")
    assert load_space(warmed).points == prepared.space.points
    first = prepared.space.points[0]
    lr = prepared.space.param("lr")
    assert 1e-3 < first["lr"] < 3e-3  # moved from the space's 1e-3 toward history's 3e-3
    assert lr.log and lr.low == 1e-3 and lr.high == pytest.approx(first["lr"])
    h = math.log(first["lr"] / 1e-3) / math.log(3.0)  # history's share, as the lr moved
    assert 0.1 < h < 0.5  # one search, however alike, does not decide alone
    assert first["loss"] == "as_softmax" and 0.1 <= first["delta"] <= 0.5
    assert prepared.space.param("epochs").value == 2  # 2^(1-h) rounds to the space's 2
    assert prepared.notes[1].startswith("warm start: difficulty")
    assert any("sst5-elsewhere" in line for line in prepared.notes)


def test_nothing_to_learn_from_searches_the_space_as_given(tmp_path, data_dir):
    """An empty store and ``--reference none``: the written space is the given one, seed
    points and all, and the report says the dataset was not probed."""
    space = write_space(tmp_path)
    settings = tiny_settings(root=tmp_path, data_dir=data_dir, space=str(space), warm_start=True)
    settings.reference = "none"
    prepared = warned_prepare(settings)
    given, warmed = load_space(space), load_space(prepared.settings.space)
    assert warmed.points == given.points and warmed.params == given.params
    assert warmed.loss_params == given.loss_params
    assert prepared.notes[1].startswith("warm start: nothing to learn from")
    assert "not probed" in prepared.notes[1]


def test_a_reference_too_unlike_to_weigh_is_not_worth_a_probe(tmp_path, data_dir):
    """A reference search of another task family (token tagging) could weigh at most
    0.25 x 40/43 -> h = 0.07 < 0.1 whatever SST-5's difficulty: the space as given, unprobed,
    and the report names the bound."""
    space = write_space(tmp_path)
    settings = tiny_settings(root=tmp_path, data_dir=data_dir, space=str(space), warm_start=True)
    settings.reference = str(reference(tmp_path, task="token"))
    prepared = warned_prepare(settings)
    given, warmed = load_space(space), load_space(prepared.settings.space)
    assert warmed.points == given.points and warmed.params == given.params
    assert prepared.notes[1].startswith("warm start: nothing to learn from")
    assert "could weigh at most 0.072 < 0.1 for a single_label task of 64 rows" in prepared.notes[1]
    assert "not probed" in prepared.notes[1]


def test_reference_without_warm_start_or_missing_is_refused(tmp_path):
    with pytest.raises(SearchError, match="--reference is read by --warm-start and the portf"):
        tiny_settings(reference=str(reference(tmp_path)), portfolio=False).validate()
    tiny_settings(reference=str(reference(tmp_path)), portfolio=True).validate()  # it reads it
    with pytest.raises(SearchError, match="--reference .*nope.json: no such file"):
        tiny_settings(warm_start=True, reference=str(tmp_path / "nope.json")).validate()
    tiny_settings(warm_start=True, reference="none").validate()
    with pytest.raises(SearchError, match="--probe-backbone is read by --warm-start only"):
        tiny_settings(probe_backbone="minilm").validate()
    tiny_settings(warm_start=True, probe_backbone="minilm").validate()


@pytest.mark.ray
@pytest.mark.slow
def test_the_warmed_space_is_searched_and_resume_reads_it_again(tmp_path, data_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uri = new_store(tmp_path / "astune-runs")
    space = write_space(tmp_path, seed_points=[], losses=["as_softmax"])
    argv = search_argv("warm", space, "--epochs", "1", "--max-concurrent", "1", samples=2)
    argv += ["--max-length", "48"]
    argv += ["--data-dir", str(data_dir)]
    argv += ["--warm-start", "--reference", str(reference(tmp_path))]
    assert main(argv) == 0
    client = MlflowClient(uri)
    (parent,) = runs(client, "warm", "search")
    warmed = parent.data.params["space"]
    assert parent.data.params["warm_start"] == "True" and warmed.endswith("warm.warm-start.yaml")
    first_point = load_space(warmed).points[0]
    trials = sorted(runs(client, "warm", "trial"), key=lambda r: r.info.start_time)
    assert float(trials[0].data.params["lr"]) == pytest.approx(first_point["lr"])
    # A reference that would move lr elsewhere: --resume does not recommend again (a new
    # recommendation would change the space, which --resume refuses).
    other = reference(tmp_path / "astune-runs", lr=1e-5)
    resumed = [*argv[: argv.index("--reference") + 1], str(other), "--resume"]
    assert main(resumed) == 0
    assert load_space(warmed).points[0] == first_point
    assert len(runs(client, "warm", "trial")) == 2
