"""`astune export` on a real MLflow store filled by a real short search
(tests/mlflow_searches.py)."""

from __future__ import annotations

import json
import types

import pytest
import torch
import yaml
from mlflow_searches import tiny_searches

from astune.cli import main
from astune.config import TrainConfig
from astune.export import export, find_best_trial

EXPERIMENT = "sst5-tiny"


@pytest.fixture(scope="module")
def searches(tmp_path_factory, data_dir):
    return tiny_searches(tmp_path_factory, data_dir)


@pytest.fixture(scope="module")
def best(searches):
    return find_best_trial(EXPERIMENT, searches.tracking_uri)


def _at_best_evaluation(best, key: str) -> float:
    """The trial's ``key`` at its best evaluation, as MLflow holds it."""
    from mlflow import MlflowClient

    client = MlflowClient(best.tracking_uri)
    step = int(client.get_run(best.run_id).data.metrics["best_evaluation"])
    return next(m.value for m in client.get_metric_history(best.run_id, key) if m.step == step)


def test_best_trial_is_the_one_the_search_chose(best, searches):
    summary = searches.summaries[EXPERIMENT]
    assert best.run_id is not None and best.parent_run_id == summary.parent_run_id
    assert best.objective == pytest.approx(summary.best_objective, abs=1e-12)
    assert best.metric == "val_accuracy" and best.value == pytest.approx(best.objective)
    for key in ("loss", "delta", "warmup_ratio", "as_speed", "lr", "batch_size", "epochs"):
        assert best.config[key] == summary.best_config[key], key
    assert best.config["loss"] == "as_softmax" and best.config["warmup_ratio"] == 0.25


def test_yaml_export_reruns_the_best_trial_exactly(best, searches, tmp_path, capsys):
    path = tmp_path / "best.yaml"
    argv = ["export", "--experiment", EXPERIMENT, "--tracking-uri", searches.tracking_uri]
    assert main([*argv, "-o", str(path)]) == 0
    assert best.run_id in capsys.readouterr().out
    text = path.read_text()
    assert text.startswith("# astune export of search 'sst5-tiny'") and best.run_id in text
    assert yaml.safe_load(text) == best.config
    # The trial ran in a Ray worker with OMP_NUM_THREADS=1 (one CPU per trial); with more
    # threads float sums can differ in the last bit, so the rerun uses one thread too.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rc = main(["train", "--config", str(path), "--output-dir", str(tmp_path / "rerun")])
    finally:
        torch.set_num_threads(threads)
    assert rc == 0
    final = json.loads((tmp_path / "rerun" / "final.json").read_text())
    assert final["val_accuracy"] == best.value == _at_best_evaluation(best, "val_accuracy")
    assert final["val_loss"] == _at_best_evaluation(best, "val_loss")  # bit for bit


def test_json_export_loads_as_the_same_config(best, searches, tmp_path):
    yaml_file, json_file = tmp_path / "best.yaml", tmp_path / "best.json"
    export(EXPERIMENT, "yaml", yaml_file, searches.tracking_uri)
    text = export(EXPERIMENT, "json", json_file, searches.tracking_uri)
    assert json.loads(text)["astune_export"]["run_id"] == best.run_id
    assert TrainConfig.from_yaml(json_file) == TrainConfig.from_yaml(yaml_file)
    assert TrainConfig.from_yaml(json_file).delta == best.config["delta"]


def test_python_snippet_builds_the_best_objects_and_trains(best, searches):
    code = export(EXPERIMENT, "python", tracking_uri=searches.tracking_uri)
    namespace: dict = {}
    exec(compile(code, "best.py", "exec"), namespace)
    loss_fn, cfg = namespace["loss_fn"], best.config
    assert type(loss_fn).__name__ == "ASSoftmaxLoss" and loss_fn.delta == cfg["delta"]
    schedule = namespace["delta_schedule"](8)
    assert (schedule.delta, schedule.warmup_ratio) == (cfg["delta"], cfg["warmup_ratio"])
    assert [schedule.delta_at(i) for i in (0, 1, 2)] == [1.0, 1.0, cfg["delta"]]
    speed = namespace["speed"]
    assert (speed is not None) == cfg["as_speed"]
    if speed is not None:
        assert (speed.lam, speed.max_steps) == (cfg["lam"], cfg["max_accum_steps"])
    model = torch.nn.Linear(6, 5)
    gen = torch.Generator().manual_seed(0)
    batches = [
        (torch.randn(8, 6, generator=gen), torch.randint(0, 5, (8,), generator=gen))
        for _ in range(4)
    ]
    before = model.weight.detach().clone()
    steps = namespace["train"](
        model, batches, torch.optim.SGD(model.parameters(), lr=0.1), epochs=2
    )
    assert 1 <= steps <= 8 and not torch.equal(before, model.weight)
    assert loss_fn.delta == cfg["delta"]  # after the warm-up


def test_hf_snippet_switches_delta_after_the_warmup(best, searches):
    code = export(EXPERIMENT, "hf", tracking_uri=searches.tracking_uri)
    assert "AS-Speed needs astune's own loop" in code
    namespace: dict = {}
    exec(compile(code, "best_hf.py", "exec"), namespace)
    callback, loss_fn = namespace["DeltaWarmupCallback"](), namespace["loss_fn"]
    delta, max_steps = best.config["delta"], 20  # warm-up 0.25 of 20 steps: steps 0-4
    seen = []
    for step in range(8):
        callback.on_step_begin(
            None, types.SimpleNamespace(global_step=step, max_steps=max_steps), None
        )
        seen.append(loss_fn.delta)
    assert seen == [1.0] * 5 + [delta] * 3
    labels = torch.tensor([0, 2, -100, 4])
    logits = torch.randn(4, 5)
    outputs = types.SimpleNamespace(logits=logits)
    expected = torch.nn.functional.cross_entropy(logits, labels, reduction="sum") / 6
    callback.on_step_begin(None, types.SimpleNamespace(global_step=0, max_steps=max_steps), None)
    loss = namespace["compute_loss_func"](outputs, labels, num_items_in_batch=6)
    torch.testing.assert_close(loss, expected)


def test_unknown_experiment_names_it_and_lists_the_searches(searches, capsys):
    rc = main(["export", "--experiment", "no-such-search", "--tracking-uri", searches.tracking_uri])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "'no-such-search'" in err and "conll-tiny" in err and "sst5-tiny" in err


def test_search_without_a_finished_trial_is_an_error(searches):
    from mlflow import MlflowClient

    client = MlflowClient(searches.tracking_uri)
    experiment = client.create_experiment("unfinished")
    parent = client.create_run(experiment, tags={"astune.role": "search"}).info.run_id
    child = client.create_run(
        experiment, tags={"astune.role": "trial", "mlflow.parentRunId": parent}
    )
    client.log_metric(child.info.run_id, "objective", 0.5)
    client.set_terminated(child.info.run_id, "FAILED")
    with pytest.raises(ValueError, match="has no finished trial"):
        find_best_trial("unfinished", searches.tracking_uri)
