"""Image and audio splits, preprocessed per batch by the backbone's own processor.

Only the file paths and labels are held (and handed to Ray trials); each batch decodes its
files and runs the processor (``ViTImageProcessor`` resizes and normalises images to
``pixel_values``; ``Wav2Vec2FeatureExtractor`` normalises and pads audio to ``input_values``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from astune.config import TRAIN_FIELDS
from astune.data.batching import Batching
from astune.data.encoding import EncodedData
from astune.data.errors import DataError
from astune.data.media import PATH_KEY, RATE_KEY, SECONDS_KEY, load_audio, load_images
from astune.data.spec import DatasetSpec

if TYPE_CHECKING:
    from transformers.feature_extraction_utils import FeatureExtractionMixin
    from transformers.image_processing_utils import BaseImageProcessor

    from astune.data.loading import LoadedData

    Processor = BaseImageProcessor | FeatureExtractionMixin

logger = logging.getLogger(__name__)

DEFAULT_MAX_AUDIO_SECONDS = TRAIN_FIELDS["max_audio_seconds"].default
"""Clips are cut here unless a run says otherwise (one long clip pads its whole batch)."""


@dataclass
class MediaSplit:
    """One split of N files: ``paths`` (N absolute paths) and ``labels`` (N,) int64."""

    paths: list[str]
    labels: torch.Tensor

    def __len__(self) -> int:
        return len(self.paths)


@dataclass
class MediaData(Batching):
    """All splits of an image or audio dataset and the processor that turns files into inputs.

    ``sampling_rate`` (Hz) is the feature extractor's rate for audio, None for images; clips
    are cut at ``max_audio_seconds``.
    """

    spec: DatasetSpec
    splits: dict[str, MediaSplit]
    processor: Processor
    sampling_rate: int | None = None
    source: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    max_audio_seconds: float = DEFAULT_MAX_AUDIO_SECONDS

    def collate(self, split: str, indices: torch.Tensor | Sequence[int]) -> dict[str, torch.Tensor]:
        """A batch of the files ``indices`` of ``split``, decoded now.

        Keys: ``pixel_values`` (B, 3, H, W) float32 for images; ``input_values`` (B, T) float32
        padded with zeros to the longest clip, and ``attention_mask`` (B, T) when the extractor
        makes one (wav2vec2-base's does not: its group norm must see the padding) for audio;
        ``labels`` (B,) int64 and ``index`` (B,).
        """
        data = self.splits[split]
        index = torch.as_tensor(indices, dtype=torch.long)
        paths = [data.paths[i] for i in index.tolist()]
        if self.spec.task == "image":
            inputs = self.processor(images=load_images(paths), return_tensors="pt")
        else:
            rate = int(self.sampling_rate)
            inputs = self.processor(
                load_audio(paths, rate),
                sampling_rate=rate,
                padding="longest",
                truncation=True,
                max_length=int(self.max_audio_seconds * rate),
                return_tensors="pt",
            )
        batch = {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)}
        batch["labels"] = data.labels[index]
        batch["index"] = index
        return batch


def encode_media(
    loaded: LoadedData,
    processor: Processor,
    *,
    max_audio_seconds: float = DEFAULT_MAX_AUDIO_SECONDS,
) -> MediaData:
    """The ``MediaData`` of ``loaded`` (a ``LoadedData`` of an image or audio task); nothing is
    decoded here. For audio, says (a logged warning and ``notes``) when files will be
    resampled to the extractor's rate, and how many clips are cut at ``max_audio_seconds``
    (0: a clip longer than the default limit is a DataError naming it)."""
    spec = loaded.spec
    rate = None
    notes: tuple[str, ...] = ()
    limit = max_audio_seconds or DEFAULT_MAX_AUDIO_SECONDS
    if spec.task == "audio":
        rate = getattr(processor, "sampling_rate", None)
        if not isinstance(rate, int) or rate <= 0:
            raise DataError(
                f"the feature extractor {type(processor).__name__} has sampling_rate {rate!r}; "
                f"an audio backbone's preprocessor_config.json must give it in Hz"
            )
        notes = _resampling_notes(loaded.splits, rate)
        notes += _long_clip_notes(loaded.splits, limit, refuse=max_audio_seconds == 0)
    for note in notes:
        logger.warning(note)
    splits = {
        name: MediaSplit(
            paths=[row[PATH_KEY] for row in rows],
            labels=torch.tensor([row["label"] for row in rows], dtype=torch.long),
        )
        for name, rows in loaded.splits.items()
    }
    return MediaData(
        spec=spec,
        splits=splits,
        processor=processor,
        sampling_rate=rate,
        source=str(getattr(loaded, "source", "")),
        notes=notes,
        max_audio_seconds=limit,
    )


def _resampling_notes(splits: dict[str, list[dict]], rate: int) -> tuple[str, ...]:
    rates = Counter(row[RATE_KEY] for rows in splits.values() for row in rows)
    other = {r: n for r, n in sorted(rates.items()) if r != rate}
    if not other:
        return ()
    shown = ", ".join(f"{n} at {r} Hz" for r, n in other.items())
    return (f"resampling audio to the feature extractor's {rate} Hz: {shown}",)


def _long_clip_notes(
    splits: dict[str, list[dict]], limit: float, *, refuse: bool
) -> tuple[str, ...]:
    """One line counting the clips longer than ``limit`` seconds, which are cut to it; with
    ``refuse``, a DataError naming the first of them instead."""
    rows = [row for split in splits.values() for row in split]
    long = [row for row in rows if row[SECONDS_KEY] > limit]
    if not long:
        return ()
    if refuse:
        first = long[0]
        raise DataError(
            f"audio file {first[PATH_KEY]!r} is {first[SECONDS_KEY]:.1f} s long, over "
            f"{limit:g} s ({len(long)} of {len(rows)} clips are): --max-audio-seconds 0 refuses "
            "long clips; shorten them, or pass --max-audio-seconds S to cut them at S seconds"
        )
    return (
        f"cutting {len(long)} of {len(rows)} audio clips longer than {limit:g} s to their first "
        f"{limit:g} s (--max-audio-seconds S sets the limit; 0 refuses long clips)",
    )


TrainData = EncodedData | MediaData
"""What a training run takes: tokenized text, or image/audio files decoded per batch."""
