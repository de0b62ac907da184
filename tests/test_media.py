"""Image and audio classification on real small data made offline (tests/media_data.py):
scikit-learn's digits as PNG class folders, espeak-ng speech as 16 kHz WAV, tiny config-only
ViT and wav2vec2 backbones (random weights), real Ray / Optuna / MLflow for the search."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import shutil
import warnings
from math import gcd
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch
import yaml
from media_data import DIGITS, EXTRACTOR_RATE, FILE_RATE, TRAINING, WORDS
from mlflow import MlflowClient
from PIL import Image
from scipy.signal import resample_poly
from stores import new_store
from training_runs import WALL_CLOCK

from astune.backbones import build_model, load_processor
from astune.cli import main
from astune.config import TrainConfig
from astune.data import REGISTRY, load_dataset_splits
from astune.data.encoded import load_encoded
from astune.data.errors import DataError
from astune.data.media_encoding import MediaData, encode_media
from astune.data.rows import normalize_rows
from astune.history.probe import run_probe
from astune.losses.catalogue import AS_LOSSES, loss_names
from astune.space.space import load_space
from astune.training import fit
from astune.training.batches import SKIP_RECORD_KEYS
from astune.tuning.runner import SearchSettings, run_search

CHANCE = 0.25  # four balanced classes in both datasets


def media_config(dataset: Path, backbone: Path, tmp_path: Path, **overrides) -> TrainConfig:
    values = dict(
        dataset=str(dataset),
        backbone=str(backbone),
        loss="as_softmax",
        delta=0.3,
        batch_size=16,
        weight_decay=0.0,
        seed=0,
        output_dir=str(tmp_path / "run"),
    )
    return TrainConfig(**{**values, **overrides}).validate()


def copy_of(folder: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(folder, tmp_path / folder.name))


# --- loading ----------------------------------------------------------------------------------


def test_class_folders_give_rows_labelled_by_their_folder(digits_dir):
    loaded = load_dataset_splits(digits_dir)
    assert loaded.spec.task == "image" and loaded.spec.label_names == tuple(map(str, DIGITS))
    assert loaded.sizes() == {"train": 4 * 63, "validation": 4 * 14, "test": 4 * 13}
    for rows in loaded.splits.values():
        for row in rows:
            path = Path(row["path"])
            assert path.is_absolute() and path.is_file()
            assert loaded.spec.label_names[row["label"]] == path.parent.name


def test_a_path_column_in_jsonl_names_the_audio_files(speech_dir):
    loaded = load_dataset_splits(speech_dir)
    assert loaded.spec.task == "audio" and loaded.spec.label_names == WORDS
    lines = (speech_dir / "validation.jsonl").read_text().splitlines()
    for row, line in zip(loaded.splits["validation"], lines):
        raw = json.loads(line)
        assert row["path"] == str(speech_dir / raw["file"])
        assert WORDS[row["label"]] == raw["word"] and row["sampling_rate"] == FILE_RATE


def test_hub_image_cells_with_embedded_bytes_become_cached_files(tmp_path, monkeypatch, digits_dir):
    import datasets

    monkeypatch.setenv("ASTUNE_MEDIA_CACHE", str(tmp_path / "cache"))
    files = sorted((digits_dir / "test" / "2").iterdir())[:3]
    features = datasets.Features(
        {"image": datasets.Image(), "labels": datasets.ClassLabel(names=list(map(str, DIGITS)))}
    )
    hub = datasets.Dataset.from_dict(
        {"image": [Image.fromarray(np.asarray(Image.open(f))) for f in files], "labels": [2] * 3},
        features=features,
    )
    cells = hub.to_list()  # what astune's hub loader reads: the Arrow cells, undecoded
    assert cells[0]["image"]["bytes"] and not cells[0]["image"]["path"]
    spec = dataclasses.replace(REGISTRY["wikiart"], num_labels=4, label_names=None)
    rows = normalize_rows(cells, spec, "hub:test split train")
    for row, cell in zip(rows, cells):
        path = Path(row["path"])
        assert path.parent == tmp_path / "cache" and row["label"] == 2
        assert path.read_bytes() == cell["image"]["bytes"]
    assert np.array_equal(np.asarray(Image.open(rows[1]["path"])), np.asarray(Image.open(files[1])))


# --- per-batch preprocessing --------------------------------------------------------------------


def test_images_are_decoded_per_batch_and_normalised_by_the_vit_processor(digits_dir, tiny_vit_dir):
    loaded = load_dataset_splits(digits_dir)
    data = encode_media(loaded, load_processor(str(tiny_vit_dir), "image"))
    assert isinstance(data, MediaData) and not hasattr(data.splits["train"], "pixels")
    batch = data.collate("validation", [0, 5, 17])
    assert batch["pixel_values"].shape == (3, 3, 16, 16)
    assert batch["labels"].tolist() == [loaded.splits["validation"][i]["label"] for i in (0, 5, 17)]
    for k, i in enumerate((0, 5, 17)):  # reference: RGB, bilinear resize, (x / 255 - 0.5) / 0.5
        image = Image.open(loaded.splits["validation"][i]["path"]).convert("RGB")
        pixels = np.asarray(image.resize((16, 16), Image.BILINEAR), dtype=np.float32) / 255
        expected = torch.from_numpy((pixels - 0.5) / 0.5).permute(2, 0, 1)
        torch.testing.assert_close(batch["pixel_values"][k], expected, atol=1e-5, rtol=0)


def test_audio_is_resampled_to_the_extractor_rate_padded_and_masked(
    speech_dir, tiny_wav2vec2_dir, caplog
):
    loaded = load_dataset_splits(speech_dir)
    with caplog.at_level(logging.WARNING):
        data = encode_media(loaded, load_processor(str(tiny_wav2vec2_dir), "audio"))
    total = sum(loaded.sizes().values())
    assert data.notes == (
        f"resampling audio to the feature extractor's {EXTRACTOR_RATE} Hz: {total} at "
        f"{FILE_RATE} Hz",
    )
    assert data.notes[0] in caplog.text
    batch = data.collate("train", [0, 1, 2, 3])
    g = gcd(EXTRACTOR_RATE, FILE_RATE)
    clips = []
    for i in range(4):  # reference: polyphase resampling, then zero mean and unit variance
        samples, rate = soundfile.read(data.splits["train"].paths[i], dtype="float32")
        assert rate == FILE_RATE
        clip = resample_poly(samples, EXTRACTOR_RATE // g, FILE_RATE // g)
        clips.append((clip - clip.mean()) / np.sqrt(clip.var() + 1e-7))
    longest = max(len(c) for c in clips)
    assert batch["input_values"].shape == (4, longest)
    assert batch["attention_mask"].sum(1).tolist() == [len(c) for c in clips]
    for k, clip in enumerate(clips):
        got = batch["input_values"][k]
        torch.testing.assert_close(
            got[: len(clip)], torch.from_numpy(clip).float(), atol=1e-4, rtol=0
        )
        assert not got[len(clip) :].any()


def test_clips_over_max_audio_seconds_are_cut_and_counted_in_one_line(
    speech_dir, tiny_wav2vec2_dir, caplog
):
    loaded = load_dataset_splits(speech_dir)
    rows = [row for split in loaded.splits.values() for row in split]
    seconds = sorted(soundfile.info(row["path"]).duration for row in rows)
    limit = round(seconds[len(seconds) // 2], 3)  # the median clip: about half are longer
    longer = sum(s > limit for s in seconds)
    assert 0 < longer < len(rows)
    processor = load_processor(str(tiny_wav2vec2_dir), "audio")
    with caplog.at_level(logging.WARNING):
        data = encode_media(loaded, processor, max_audio_seconds=limit)
    expected = f"cutting {longer} of {len(rows)} audio clips longer than {limit:g} s"
    assert any(note.startswith(expected) for note in data.notes), data.notes
    assert expected in caplog.text
    train = data.splits["train"]
    batch = data.collate("train", range(len(train)))
    assert batch["input_values"].shape[1] <= int(limit * EXTRACTOR_RATE)


def test_max_audio_seconds_zero_refuses_a_long_clip_naming_it(tmp_path, tiny_wav2vec2_dir):
    folder = tmp_path / "long"
    for split in ("train", "validation", "test"):
        (folder / split / "word").mkdir(parents=True)
        soundfile.write(folder / split / "word" / "short.wav", np.zeros(8000), 8000)
    long_clip = folder / "train" / "word" / "long.wav"
    soundfile.write(long_clip, np.zeros(31 * 8000), 8000)  # 31 s, over the default 30 s
    (folder / "dataset.json").write_text(json.dumps({"task": "audio"}))
    loaded = load_dataset_splits(folder)
    processor = load_processor(str(tiny_wav2vec2_dir), "audio")
    with pytest.raises(DataError, match=r"max-audio-seconds 0 refuses long clips") as info:
        encode_media(loaded, processor, max_audio_seconds=0)
    assert f"audio file {str(long_clip)!r} is 31.0 s long, over 30 s (1 of 4 clips" in str(
        info.value
    )
    cut = encode_media(loaded, processor)  # the default: cut at 30 s, and said
    assert cut.notes[-1].startswith("cutting 1 of 4 audio clips longer than 30 s")


# --- backbones --------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["image", "audio"])
def test_config_only_folders_build_random_models_with_a_warning(
    which, tiny_vit_dir, tiny_wav2vec2_dir
):
    folder = tiny_vit_dir if which == "image" else tiny_wav2vec2_dir
    with pytest.warns(UserWarning, match="config but no weights.*randomly initialised"):
        model = build_model(str(folder), task=which, num_labels=4, num_layers=1)
    blocks = {"image": "ViTLayer", "audio": "Wav2Vec2EncoderLayer"}[which]
    kept = [m for m in model.modules() if type(m).__name__ == blocks]
    assert model.config.num_hidden_layers == 1 and len(kept) == 1
    assert model.classifier.out_features == 4
    with pytest.raises(ValueError, match=r"num_layers must be an integer in \[1, 2\].*got 3"):
        build_model(str(folder), task=which, num_labels=4, num_layers=3)


# --- training ---------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["image", "audio"])
def test_training_beats_chance_on_validation(
    which, tmp_path, digits_dir, speech_dir, tiny_vit_dir, tiny_wav2vec2_dir
):
    dataset, backbone = (
        (digits_dir, tiny_vit_dir) if which == "image" else (speech_dir, tiny_wav2vec2_dir)
    )
    config = media_config(dataset, backbone, tmp_path, **TRAINING[which])
    epochs = TRAINING[which]["epochs"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the random-initialisation warning
        final = fit(config)
    history = [json.loads(line) for line in Path(config.output_dir, "metrics.jsonl").open()]
    assert len(history) == epochs
    assert final["val_accuracy"] >= 2 * CHANCE, history
    assert final["test_accuracy"] > CHANCE
    assert history[-1]["masked_ratio"] > 0  # AS-Softmax masked some classes


@pytest.mark.parametrize("loss", loss_names("image"))
def test_every_single_label_loss_and_as_speed_train_on_images(
    loss, tmp_path, digits_dir, tiny_vit_dir
):
    speed = {"as_speed": True, "lam": 1.5, "max_accum_steps": 3}
    extra = speed if loss in AS_LOSSES else {}
    config = media_config(
        digits_dir,
        tiny_vit_dir,
        tmp_path,
        loss=loss,
        epochs=1,
        lr=5e-3,
        max_train_samples=32,
        max_eval_samples=16,
        batch_size=8,
        **extra,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        final = fit(config)
    assert final["samples_seen"] == 32 and 0.0 <= final["val_accuracy"] <= 1.0
    assert np.isfinite(final["test_loss"])


def test_as_skip_keeping_every_sample_equals_as_softmax_on_images(
    tmp_path, digits_dir, tiny_vit_dir
):
    def run(name, **extra):
        config = media_config(
            digits_dir, tiny_vit_dir, tmp_path / name, loss="as_softmax", delta=0.3, epochs=2,
            lr=5e-3, max_train_samples=32, max_eval_samples=16, batch_size=8, **extra,
        )  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            final = fit(config)
        lines = Path(config.output_dir, "metrics.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines]
        drop = (*WALL_CLOCK, *SKIP_RECORD_KEYS, "samples_computed")
        return final, [{k: v for k, v in r.items() if k not in drop} for r in records]

    plain, plain_records = run("plain")
    # v1 re-checks (no probe, no back-off): keep 1 trains on every zero-loss sample, so nothing
    # is skipped
    kept, kept_records = run(
        "skip", as_skip=True, skip_keep=1.0, skip_probe=False, skip_backoff=1.0
    )
    assert kept_records == plain_records  # image batches go through AS-Skip's filling unchanged
    assert kept["samples_computed"] == kept["samples_seen"] == 64
    assert kept["test_accuracy"] == plain["test_accuracy"]


# --- search -------------------------------------------------------------------------------------


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("which", ["image", "audio"])
def test_a_search_of_two_trials_tracks_both(
    which, tmp_path, monkeypatch, digits_dir, speech_dir, tiny_vit_dir, tiny_wav2vec2_dir,
    shared_ray,
):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    dataset, backbone = (
        (digits_dir, tiny_vit_dir) if which == "image" else (speech_dir, tiny_wav2vec2_dir)
    )
    space = Path(__file__).parent / "spaces" / "tiny_media.yaml"
    summary = run_search(
        SearchSettings(
            dataset=str(dataset),
            backbone=str(backbone),
            space=str(space),
            num_samples=2,
            max_concurrent=1,
            max_train_samples=48,
            max_eval_samples=24,
            name=f"media-{which}",
            console=False,
        )
    )
    client = MlflowClient(summary.tracking_uri)
    experiment = client.get_experiment_by_name(f"media-{which}")
    trials = client.search_runs([experiment.experiment_id], "tags.`astune.role` = 'trial'")
    assert summary.num_trials == 2 and summary.trial_states == {"TERMINATED": 2}
    assert len(trials) == 2
    assert {t.data.tags["astune.task"] for t in trials} == {which}
    assert {t.data.params["loss"] for t in trials} == {"as_softmax", "softmax"}
    for trial in trials:
        assert 0.0 <= trial.data.metrics["val_accuracy"] <= 1.0
        assert "test_accuracy" in trial.data.metrics

    uri, exported = summary.tracking_uri, tmp_path / "best.yaml"
    common = ["--experiment", f"media-{which}", "--tracking-uri", uri]
    assert main(["export", *common, "--format", "yaml", "-o", str(exported)]) == 0
    config = TrainConfig.from_dict(yaml.safe_load(exported.read_text())).validate()
    assert (config.dataset, config.backbone) == (str(dataset), str(backbone))
    assert main(["report", *common, "--output-dir", str(tmp_path / "report")]) == 0
    assert (tmp_path / "report" / "report.md").is_file()


@pytest.mark.parametrize("dataset, task", [("wikiart", "image"), ("chest_falsetto", "audio")])
def test_the_registry_spaces_seed_delta_0_3_first(dataset, task):
    space = load_space(dataset=dataset).for_task(task)
    assert Path(space.source).name == f"{dataset}.yaml"
    first = space.seed_points[0]
    assert (first["loss"], first["delta"], first["warmup_ratio"]) == ("as_softmax", 0.3, 0.0)
    spec = REGISTRY[dataset]
    assert spec.task == task and spec.metric == "accuracy" and spec.as_softmax is not None
    assert spec.as_softmax > spec.softmax  # the paper's table: AS-Softmax above softmax


# --- bad input: one line each, before training ------------------------------------------------


def test_a_missing_file_names_the_file_and_the_row(tmp_path, speech_dir):
    folder = copy_of(speech_dir, tmp_path)
    rows = (folder / "train.jsonl").read_text().splitlines()
    rows[2] = json.dumps({"file": "wav/gone.wav", "word": "yes"})
    (folder / "train.jsonl").write_text("\n".join(rows) + "\n")
    with pytest.raises(ValueError) as info:
        load_dataset_splits(folder)
    message = str(info.value)
    assert (
        "gone.wav" in message and "train.jsonl (row 3)" in message and "does not exist" in message
    )
    assert "\n" not in message


def test_an_unreadable_image_names_the_file_and_the_row(tmp_path, digits_dir):
    folder = copy_of(digits_dir, tmp_path)
    broken = sorted((folder / "validation" / "2").iterdir())[0]
    broken.write_bytes(b"not a png")
    with pytest.raises(
        ValueError,
        match=rf"image file '.*{broken.name}' in .*validation \(row \d+\) cannot be read",
    ):
        load_dataset_splits(folder)


def test_an_audio_file_without_a_readable_sampling_rate_is_refused(tmp_path, speech_dir):
    folder = copy_of(speech_dir, tmp_path)
    first = json.loads((folder / "test.jsonl").read_text().splitlines()[0])["file"]
    (folder / first).write_bytes(b"RIFF....WAVEfmt garbage")
    with pytest.raises(
        ValueError, match=r"test.jsonl \(row 1\) cannot be read \(sampling rate unknown\)"
    ):
        load_dataset_splits(folder)


def test_an_empty_class_folder_is_named(tmp_path, digits_dir):
    folder = copy_of(digits_dir, tmp_path)
    (folder / "train" / ".ipynb_checkpoints").mkdir()  # hidden: not a class
    assert load_dataset_splits(folder).spec.num_labels == len(DIGITS)
    (folder / "train" / "9").mkdir()
    with pytest.raises(ValueError, match=r"class folder .*train/9 holds no image files \(.png"):
        load_dataset_splits(folder)


def test_a_label_outside_label_names_is_named(tmp_path, digits_dir):
    folder = copy_of(digits_dir, tmp_path)
    shutil.copytree(folder / "test" / "3", folder / "test" / "7")
    with pytest.raises(
        ValueError,
        match=r"label '7' in .*test \(row \d+\) is not one of label_names \(0, 1, 2, 3\)",
    ):
        load_dataset_splits(folder)


def test_the_cli_refuses_bad_media_with_exit_code_2_before_training(
    tmp_path, capsys, digits_dir, tiny_vit_dir
):
    folder = copy_of(digits_dir, tmp_path)
    next((folder / "train" / "1").iterdir()).unlink()
    (folder / "train" / "1" / "x.png").write_text("text, not an image")
    code = main(
        [
            "train",
            "--dataset",
            str(folder),
            "--backbone",
            str(tiny_vit_dir),
            "--epochs",
            "1",
            "--batch-size",
            "8",
            "--lr",
            "1e-3",
            "--output-dir",
            str(tmp_path / "out"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "x.png" in err, err
    assert not (tmp_path / "out" / "metrics.jsonl").exists()


def test_a_text_backbone_for_images_is_refused_before_training(tmp_path, capsys, digits_dir):
    out = tmp_path / "out"
    code = main(
        ["train", "--dataset", str(digits_dir), "--backbone", "minilm", "--epochs", "1",
         "--batch-size", "8", "--lr", "1e-3", "--output-dir", str(out)]
    )  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "model type 'bert'" in err and "no image classification head" in err
    assert "'vit-base'" in err and not out.exists()


def test_the_hub_fallback_error_says_how_to_point_at_local_files(tmp_path, monkeypatch):
    monkeypatch.delenv("ASTUNE_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(ValueError) as info:
        load_dataset_splits("chest_falsetto", data_dir=tmp_path)
    message = str(info.value)
    assert "ccmusic-database/chest_falsetto" in message and "\n" not in message
    assert "chest_falsetto/{train,validation,test}/<label>/<audio file>" in message


def test_load_encoded_gives_media_data_for_media_tasks(tmp_path, digits_dir, tiny_vit_dir):
    data = load_encoded(media_config(digits_dir, tiny_vit_dir, tmp_path, epochs=1, lr=1e-3))
    assert isinstance(data, MediaData) and data.spec.num_labels == len(DIGITS)


# --- recommend's difficulty probe -------------------------------------------------------------


@pytest.mark.parametrize("which", ["image", "audio"])
def test_the_probe_scores_frozen_pooled_features_of_the_given_backbone(
    which, digits_dir, speech_dir, tiny_vit_dir, tiny_wav2vec2_dir
):
    dataset, backbone = (
        (digits_dir, tiny_vit_dir) if which == "image" else (speech_dir, tiny_wav2vec2_dir)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the random-initialisation warning
        result = run_probe(str(dataset), backbone=str(backbone), max_train_samples=64)
    assert (result.task, result.backbone, result.metric) == (which, str(backbone), "accuracy")
    assert result.chance == pytest.approx(CHANCE, abs=0.05)
    assert result.value > result.chance  # random features still separate these classes a bit


def test_the_probe_of_an_own_media_folder_asks_for_a_backbone(digits_dir):
    with pytest.raises(ValueError, match="needs a backbone for images: pass --probe-backbone"):
        run_probe(str(digits_dir))


def test_recommend_takes_the_probe_backbone(tmp_path, capsys, digits_dir, tiny_vit_dir):
    uri = new_store(tmp_path)
    argv = ["recommend", "--dataset", str(digits_dir), "--tracking-uri", uri]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        code = main([*argv, "--probe-backbone", str(tiny_vit_dir)])
    out = capsys.readouterr().out
    assert code == 0 and "delta" in out and f"frozen {tiny_vit_dir}" in out, out


# --- class folders without a dataset.json -------------------------------------------------------
def _class_folders(root: Path, files: dict[str, list[str]]) -> Path:
    """``root/<split>/<label>/<name>`` for each ``"split/label": [names]``: 4x4 PNGs, 0.1 s
    WAVs, text otherwise, an empty folder for an empty list; a name starting ``empty`` is a
    zero-byte file."""
    for where, names in files.items():
        (root / where).mkdir(parents=True, exist_ok=True)
        for name in names:
            path = root / where / name
            if name.startswith("empty"):
                path.write_bytes(b"")
            elif name.endswith(".png"):
                Image.new("RGB", (4, 4), (len(name) * 20 % 255, 0, 0)).save(path)
            elif name.endswith(".wav"):
                soundfile.write(path, np.zeros(800), 8000)
            else:
                path.write_text("not a media file")
    return root


@pytest.mark.parametrize("task, suffix", [("image", ".png"), ("audio", ".wav")])
def test_class_folders_need_no_dataset_json(tmp_path, caplog, task, suffix):
    from astune.data.resolve import resolve_dataset

    layout = {f"{s}/{label}": [f"{i}{suffix}" for i in range(3)]
              for s in ("train", "validation", "test") for label in ("cat", "dog")}  # fmt: skip
    folder = _class_folders(tmp_path / "pets", layout)
    assert resolve_dataset(str(folder)).folder == folder  # a folder, not a registry name
    with caplog.at_level(logging.WARNING):
        loaded = load_dataset_splits(folder)
    assert loaded.spec.task == task and loaded.spec.label_names == ("cat", "dog")
    assert f"{folder} has no dataset.json: task {task!r}, from its files" in caplog.text
    assert loaded.sizes() == {"train": 6, "validation": 6, "test": 6}


@pytest.mark.parametrize(
    "layout, message",
    [
        ({"train/cat": ["1.png"], "train/dog": ["2.wav"], "test/cat": ["3.png"]}, "mixes audio"),
        ({"train/cat": ["1.png"], "train/dog": [], "test/cat": ["3.png"]}, "holds no image files"),
        (
            {"train/cat": ["1.png"], "test/cat": ["2.png"], "test/owl": ["3.png"]},
            "test/owl is a class that",
        ),
        ({"train/cat": ["1.png", "empty.png"], "test/cat": ["2.png"]}, "empty.png"),
        ({"train/cat": ["notes.txt"], "test/cat": ["2.png"]}, "holds no image"),
    ],
)
def test_bad_class_folders_fail_in_one_line_naming_the_place(tmp_path, layout, message):
    folder = _class_folders(tmp_path / "bad", layout)
    with pytest.raises(DataError, match=re.escape(message)) as info:
        load_dataset_splits(folder)
    assert "\n" not in str(info.value)
    assert str(folder) in str(info.value)


def test_a_metadata_csv_labels_flat_files_as_imagefolder_reads_it(tmp_path):
    layout = {split: [f"{i}.png" for i in range(4)] for split in ("train", "validation", "test")}
    folder = _class_folders(tmp_path / "flat", layout)
    for split in ("train", "validation", "test"):
        lines = ["file_name,label"] + [f"{i}.png,{'cat' if i % 2 else 'dog'}" for i in range(4)]
        (folder / split / "metadata.csv").write_text("\n".join(lines) + "\n")
    loaded = load_dataset_splits(folder)
    assert loaded.spec.task == "image" and loaded.spec.label_names == ("cat", "dog")
    rows = loaded.splits["test"] + loaded.splits["train"] + loaded.splits["validation"]
    for row in rows:  # odd files are cats; ids of the sorted names: cat 0, dog 1
        assert row["label"] == (0 if int(Path(row["path"]).stem) % 2 else 1), row
    (folder / "train" / "metadata.csv").write_text("file_name,label\nmissing.png,cat\n")
    with pytest.raises(DataError, match=r"metadata.csv row 1: no file .*missing.png"):
        load_dataset_splits(folder)
