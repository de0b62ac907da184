"""A run's dataset loaded, checked and encoded once: tokenized text, or media file paths that the
backbone's processor decodes per batch. A search driver calls this once for all its trials."""

from __future__ import annotations

from typing import TYPE_CHECKING

from astune.config import TrainConfig
from astune.data.resolve import DatasetRef
from astune.losses.catalogue import MEDIA_TASKS

if TYPE_CHECKING:
    from astune.data.media_encoding import TrainData


def load_encoded(config: TrainConfig, *, ref: DatasetRef | None = None) -> TrainData:
    """Load ``config.dataset`` (local files or the hub) and encode it for ``config.backbone``.
    ``ref``: ``config.dataset`` resolved already (a search resolves it once). Whether astune
    computes its metric is the caller's check, made once
    (:func:`astune.metrics.check_metric_computed`)."""
    from astune.data.loading import load_dataset_splits

    loaded = load_dataset_splits(  # read and checked before torch loads: bad rows fail fast
        config.dataset if ref is None else ref,
        data_dir=config.data_dir,
        max_train_samples=config.max_train_samples,
        max_eval_samples=config.max_eval_samples,
        seed=config.seed,
        validation_fraction=config.validation_fraction,
    )
    from astune.backbones.models import check_max_length, load_processor, load_tokenizer
    from astune.data.encoding import encode_splits
    from astune.data.media_encoding import encode_media

    if loaded.spec.task in MEDIA_TASKS:
        processor = load_processor(config.backbone, loaded.spec.task)
        return encode_media(loaded, processor, max_audio_seconds=config.max_audio_seconds)
    tokenizer = load_tokenizer(config.backbone)
    check_max_length(tokenizer, config.max_length, config.backbone)
    return encode_splits(loaded, tokenizer, max_length=config.max_length)


def load_for_run(config: TrainConfig) -> tuple[TrainConfig, TrainData]:
    """A copy of ``config`` with its dataset's default backbone (an image or audio registry
    entry left at the text default gets its paper backbone), and the data encoded for it."""
    import dataclasses

    from astune.data.resolve import default_backbone, resolve_dataset

    ref = resolve_dataset(config.dataset)
    config = dataclasses.replace(config, backbone=default_backbone(config.backbone, ref.spec))
    return config, load_encoded(config, ref=ref)
