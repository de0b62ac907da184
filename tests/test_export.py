"""`astune export` on a real MLflow store filled by a real short search
(tests/mlflow_searches.py)."""

from __future__ import annotations

import dataclasses
import json
import math
import types

import pytest
import torch
import yaml
from mlflow_searches import tiny_searches
from stores import new_store
from training_runs import timeless

from astune.cli import main
from astune.config import TrainConfig
from astune.exporting import export, find_best_trial
from astune.exporting.code import python_snippet

pytestmark = pytest.mark.ray

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


def test_exported_config_is_portable(best, data_dir):
    """The search ran trials on device cpu; the data folder is the one the user gave, as given
    (a search given none logs "None" on its parent run, and the export then has none)."""
    assert "device" not in best.config and best.config["data_dir"] == str(data_dir)
    assert TrainConfig.from_dict(best.config).device == "auto"


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
    export(EXPERIMENT, "yaml", output=yaml_file, tracking_uri=searches.tracking_uri)
    text = export(EXPERIMENT, "json", output=json_file, tracking_uri=searches.tracking_uri)
    assert json.loads(text)["astune_export"]["run_id"] == best.run_id
    assert TrainConfig.from_yaml(json_file) == TrainConfig.from_yaml(yaml_file)
    assert TrainConfig.from_yaml(json_file).delta == best.config["delta"]


def test_python_snippet_builds_the_best_objects(best, searches):
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
    assert namespace["CONFIG"] == cfg
    assert namespace["train_config"]() == TrainConfig.from_dict(cfg)
    assert "def train(" not in code  # no loop of its own: it calls astune.train


def _one_thread_env() -> dict:
    """The trials ran in Ray workers with OMP_NUM_THREADS=1; a rerun with more threads may sum
    floats in another order."""
    import os

    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def test_python_script_trains_as_train_config_does(best, tmp_path):
    """The exported script, run as a script, and `train --config` of the same config (the best
    trial's, with AS-Skip and AS-Speed on, so that they go through the script too): one loop,
    so the same records, validation metrics and optimizer steps."""
    import subprocess
    import sys

    config = dict(best.config)
    config.update(as_skip=True, skip_keep=0.0, skip_anneal=0.0, as_speed=True, lam=1.5)
    config.update(delta=0.02, warmup_ratio=0.0)  # a low delta masks (and skips) early
    script, yaml_file = tmp_path / "best.py", tmp_path / "best.yaml"
    script.write_text(python_snippet(dataclasses.replace(best, config=config)))
    yaml_file.write_text(yaml.safe_dump(config))
    argv = [sys.executable, str(script), "--output-dir", str(tmp_path / "script")]
    done = subprocess.run(argv, env=_one_thread_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    threads = torch.get_num_threads()  # as the script ran: one thread (see _one_thread_env)
    torch.set_num_threads(1)
    try:
        argv = ["train", "--config", str(yaml_file), "--output-dir", str(tmp_path / "cli")]
        assert main(argv) == 0
    finally:
        torch.set_num_threads(threads)
    script_final, cli_final = (
        json.loads((tmp_path / how / "final.json").read_text()) for how in ("script", "cli")
    )
    val_keys = [k for k in cli_final if k.startswith("val_")]
    assert val_keys and "val_accuracy" in val_keys
    for key in val_keys:
        assert script_final[key] == pytest.approx(cli_final[key], abs=1e-6), key
    for key in ("optimizer_steps", "samples_seen", "samples_computed"):
        assert script_final[key] == cli_final[key], key
    records = {how: _records(tmp_path / how) for how in ("script", "cli")}
    assert records["script"] == records["cli"]  # every evaluation, but its wall-clock speed
    assert "skipped_ratio" in records["cli"][0]  # AS-Skip ran


def _records(folder) -> list[dict]:
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    return timeless([json.loads(line) for line in lines])


def test_hf_snippet_switches_delta_after_the_warmup(best, searches):
    code = export(EXPERIMENT, "hf", tracking_uri=searches.tracking_uri)
    assert "AS-Speed, AS-Skip and InfoBatch need astune's own loop" in code
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


WINNERS = {  # the search's AS winner, and a softmax and a baseline winner made from it
    "as_softmax": {},
    "softmax": {"loss": "softmax"},
    "label_smoothing": {"loss": "label_smoothing", "epsilon": 0.1},
}


@pytest.mark.parametrize("loss", sorted(WINNERS))
def test_hf_export_trains_in_a_real_trainer(loss, best, data_dir, tmp_path):
    """The exported TrainingArguments, loss and delta callback in transformers' own Trainer:
    MiniLM with 1 layer on 32 SST-5 examples, 8 optimizer steps. The callback is attached for
    every winner, as a user copying the snippet would: it changes nothing of a non-AS loss."""
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        TrainerCallback,
    )

    from astune.backbones.registry import offline_minilm_path
    from astune.exporting.code import hf_snippet

    config = {**best.config, **WINNERS[loss]}
    if loss != "as_softmax":
        config = {k: v for k, v in config.items() if k not in ("delta", "warmup_ratio")}
    ns: dict = {}
    exec(compile(hf_snippet(dataclasses.replace(best, config=config)), "best_hf.py", "exec"), ns)
    assert ns["LOSS"] == loss
    path = offline_minilm_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(
        path, num_labels=5, num_hidden_layers=1
    )
    lines = (data_dir / "sst5" / "train.jsonl").read_text().splitlines()[:32]
    rows = [json.loads(line) for line in lines]
    encoded = [
        {**tokenizer(r["text"], truncation=True, max_length=48), "labels": r["label"]} for r in rows
    ]
    seen: list[tuple[float | None, int | None]] = []
    losses: list[float] = []

    class Record(TrainerCallback):  # after DeltaWarmupCallback: the delta each step trained with
        def on_step_end(self, args, state, control, **kwargs):
            stats = getattr(ns["loss_fn"], "last_stats", None)
            seen.append((getattr(ns["loss_fn"], "delta", None), stats and stats.n_active))

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                losses.append(logs["loss"])

    args = ns["training_arguments"](
        str(tmp_path / "hf"),
        max_steps=8,
        per_device_train_batch_size=4,
        eval_strategy="no",
        save_strategy="no",
        load_best_model_at_end=False,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
    )
    assert args.learning_rate == best.config["lr"]
    trainer = ns["Trainer"](
        model=model,
        args=args,
        train_dataset=encoded,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_loss_func=ns["compute_loss_func"],
        callbacks=[ns["DeltaWarmupCallback"](), Record()],
    )
    trainer.train()
    if loss == "as_softmax":
        delta = best.config["delta"]  # warm-up 0.25 of 8 steps: global steps 0 and 1 at delta 1
        assert [d for d, _ in seen] == [1.0, 1.0] + [delta] * 6
        assert [n for _, n in seen] == [4] * 8  # the exported loss saw every row of each batch
    else:
        assert seen == [(None, None)] * 8
    assert len(losses) == 8 and all(math.isfinite(v) for v in losses)


def _cut_short_search(uri: str, name: str, config: dict) -> tuple:
    """A search as the real run writer leaves it when cut short: a parent run and one finished
    trial, no best_config.yaml artifact."""
    from astune.store.writer import SearchTracker

    params = {"dataset": "sst5", "backbone": "minilm", "num_layers": 1, "seed": 7}
    tracker = SearchTracker(uri, name, dataset="sst5", task="single_label", search_params=params)
    tracker.start()
    run_id = tracker.open_trial_run("t1", config)
    tracker.log_result(run_id, {"objective": 0.5, "evaluation": 0})
    tracker.log_final(run_id, {"objective": 0.5})
    tracker.close_trial_run(run_id, "FINISHED")
    tracker.finish()
    return tracker, run_id


def test_export_without_artifact_reads_params_by_the_config_types(tmp_path):
    uri = new_store(tmp_path)
    config = {"loss": "as_softmax", "delta": 0.3, "warmup_ratio": 0.25, "lr": 2e-05, "epochs": 2}
    _cut_short_search(uri, "cut-short", config)
    path = tmp_path / "best.yaml"
    export("cut-short", "yaml", output=path, tracking_uri=uri)
    loaded = TrainConfig.from_yaml(path).validate()  # `train --config` reads it
    assert loaded.lr == 2e-05 and isinstance(loaded.lr, float) and loaded.epochs == 2.0
    assert (loaded.delta, loaded.warmup_ratio, loaded.seed, loaded.num_layers) == (0.3, 0.25, 7, 1)


def test_a_trial_that_errored_is_never_exported(tmp_path):
    """The search's artifact names a trial that failed after a better evaluation: the export is
    the best FINISHED trial, with the artifact's shared settings."""
    import yaml as yaml_lib

    uri = new_store(tmp_path)
    good = {"loss": "as_softmax", "delta": 0.3, "warmup_ratio": 0.25, "lr": 2e-05}
    tracker, finished = _cut_short_search(uri, "errored", good)
    tracker.start(resume=True)
    failed = tracker.open_trial_run("t2", {**good, "delta": 0.1})
    tracker.log_result(failed, {"objective": 0.9, "evaluation": 0})
    tracker.close_trial_run(failed, "FAILED")
    artifact = {"dataset": "sst5", "max_eval_samples": 32, "max_length": 48, **good, "delta": 0.1}
    tracker.client.log_text(tracker.parent_run_id, yaml_lib.safe_dump(artifact), "best_config.yaml")
    tracker.finish()
    best = find_best_trial("errored", uri)
    assert best.run_id == finished and best.objective == 0.5
    assert best.config["delta"] == 0.3 and best.config["lr"] == 2e-05
    assert (best.config["max_eval_samples"], best.config["max_length"]) == (32, 48)


def test_snippets_quote_names_and_paths_safely(tmp_path):
    """A quote, triple quotes and a Windows-style path cannot break the generated modules."""
    folder = tmp_path / "C:\\Users\\new 'runs'"
    uri = new_store(folder)
    name = 'it\'s the """best""" C:\\Users\\x'
    config = {"loss": "as_softmax", "delta": 0.3, "warmup_ratio": 0.25, "lr": 2e-05}
    tracker, run_id = _cut_short_search(uri, name, config)
    for fmt in ("python", "hf"):
        namespace: dict = {}
        exec(compile(export(name, fmt, tracking_uri=uri), f"best_{fmt}.py", "exec"), namespace)
        assert namespace["EXPERIMENT"] == name and namespace["RUN_ID"] == run_id
        assert namespace["TRACKING_URI"] == tracker.tracking_uri


@pytest.mark.parametrize("loss", ["softmax", "label_smoothing"])
@pytest.mark.parametrize("fmt", ["yaml", "json", "python"])
def test_a_non_as_winner_trains_from_every_export_format(
    loss, fmt, best, data_dir, tmp_path, capsys
):
    """A softmax or baseline winner (made from the search's best) as yaml and json
    (`train --config`) and as the Python script (its ``main``): each trains with that loss."""
    from astune.exporting import render

    config = {**best.config, **WINNERS[loss], "epochs": 1, "data_dir": str(data_dir)}
    config = {k: v for k, v in config.items() if k not in ("delta", "warmup_ratio")}
    config = {k: v for k, v in config.items() if not k.startswith(("as_", "lam", "max_accum"))}
    text = render(dataclasses.replace(best, config=config), fmt)
    out = tmp_path / "run"
    if fmt == "python":
        ns: dict = {"__name__": "best"}
        exec(compile(text, "best.py", "exec"), ns)
        assert ns["train_config"]().loss == loss
        ns["main"](["--output-dir", str(out), "--data-dir", str(data_dir)])
        _script_keeps_its_run(ns["main"], out, capsys)
    else:
        exported = tmp_path / f"best.{fmt}"
        exported.write_text(text)
        written = yaml.safe_load(text) if fmt == "yaml" else json.loads(text)["config"]
        assert written["loss"] == loss
        assert main(["train", "--config", str(exported), "--output-dir", str(out)]) == 0
    final = json.loads((out / "final.json").read_text())
    assert final["optimizer_steps"] > 0 and math.isfinite(final["val_accuracy"])


def _script_keeps_its_run(script_main, out, capsys) -> None:
    """The exported script, run again into the folder of a finished run: refused in one line
    that names the way on (as `train` refuses), the run's record untouched."""
    before = (out / "final.json").read_text()
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        script_main(["--output-dir", str(out)])
    err = capsys.readouterr().err.strip()
    assert stopped.value.code == 2 and len(err.splitlines()) == 1, err
    assert f"{out} holds a run already" in err and "overwrite" in err and "resume" in err
    assert (out / "final.json").read_text() == before
