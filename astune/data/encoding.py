"""Tokenizing every split once, and padding per batch.

Each split is stored flat (one int32 tensor of all token ids plus row offsets), so the encoded
data pickles fast and small when it is handed to Ray trials by reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import torch

from astune._checks import check_int
from astune.data.batching import Batching
from astune.data.errors import DataError
from astune.data.spec import DatasetSpec
from astune.metrics.scores import IGNORE_INDEX, is_csc

MODEL_KEYS = ("input_ids", "attention_mask", "token_type_ids", "pixel_values", "input_values")


@dataclass
class EncodedSplit:
    """One tokenized split of N examples holding ``total`` tokens.

    ``ids`` (total,) int32 and ``offsets`` (N+1,) int64: example i is
    ``ids[offsets[i]:offsets[i+1]]``.
    ``type_ids`` (total,) int8 or None. ``labels``: (N,) int64 for single_label/pair, (N, C) float32
    0/1 for multi_label, (total,) int64 aligned with ``ids`` for token tasks (the word's tag on its
    first sub-token, -100 elsewhere). Token tasks also keep ``word_ids`` (total,) int32 (the word
    index on first sub-tokens, -1 elsewhere) and the gold tags of every word, truncated ones
    included: ``word_labels`` (total_words,) int64 with ``word_offsets`` (N+1,) int64. Spelling
    correction (:func:`astune.metrics.is_csc`) also keeps ``word_sources`` (total_words,) int64:
    each input character's candidate id, -1 for a character that is not a candidate.
    """

    ids: torch.Tensor
    offsets: torch.Tensor
    labels: torch.Tensor
    type_ids: torch.Tensor | None = None
    word_ids: torch.Tensor | None = None
    word_labels: torch.Tensor | None = None
    word_offsets: torch.Tensor | None = None
    word_sources: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> torch.Tensor:
        """(N,) int64 token counts."""
        return self.offsets[1:] - self.offsets[:-1]

    def gold_words(self, i: int) -> list[int]:
        """The gold tag ids of every word of example ``i`` (token tasks)."""
        return self.word_labels[self.word_offsets[i] : self.word_offsets[i + 1]].tolist()

    def source_words(self, i: int) -> list[int]:
        """The candidate ids of the input characters of example ``i`` (spelling correction)."""
        if self.word_sources is None:
            raise ValueError("source_words: this split is not a spelling-correction split")
        return self.word_sources[self.word_offsets[i] : self.word_offsets[i + 1]].tolist()


@dataclass
class EncodedData(Batching):
    """All splits of a dataset, tokenized once; ``batches`` pads them per batch."""

    spec: DatasetSpec
    splits: dict[str, EncodedSplit]
    pad_token_id: int
    max_length: int
    tokenizer_name: str = ""
    source: str = ""

    def collate(self, split: str, indices: torch.Tensor | Sequence[int]) -> dict[str, torch.Tensor]:
        """A batch of the examples ``indices`` of ``split``, padded to its longest example.

        Keys: ``input_ids``, ``attention_mask`` (B, T) int64, ``token_type_ids`` (B, T) if the
        tokenizer makes them, ``labels`` ((B,) int64, (B, C) float32 or (B, T) int64 padded with
        -100), ``index`` (B,) the example indices, and for token tasks ``word_ids`` (B, T) padded
        with -1. Pass ``model_inputs(batch)`` to the model.
        """
        data = self.splits[split]
        index = torch.as_tensor(indices, dtype=torch.long)
        starts, lengths = data.offsets[index], data.lengths()[index]
        positions = torch.arange(int(lengths.max()))
        mask = positions[None, :] < lengths[:, None]
        flat = (starts[:, None] + positions[None, :]).clamp(max=max(len(data.ids) - 1, 0))
        batch = {
            "input_ids": _padded(data.ids, flat, mask, self.pad_token_id),
            "attention_mask": mask.long(),
            "index": index,
        }
        if data.type_ids is not None:
            batch["token_type_ids"] = _padded(data.type_ids, flat, mask, 0)
        if self.spec.task == "token":
            batch["labels"] = _padded(data.labels, flat, mask, IGNORE_INDEX)
            batch["word_ids"] = _padded(data.word_ids, flat, mask, -1)
        else:
            batch["labels"] = data.labels[index]
        return batch

    def word_predictions(
        self, split: str, batch: dict[str, torch.Tensor], predictions: torch.Tensor, fill: int = 0
    ) -> list[list[int]]:
        """Word-level tag ids from sub-token ``predictions`` (B, T) of a token-task batch: each
        word takes its first sub-token's prediction; words cut by truncation get ``fill``."""
        data = self.splits[split]
        out = []
        for row, i in enumerate(batch["index"].tolist()):
            words = [fill] * int(data.word_offsets[i + 1] - data.word_offsets[i])
            at = batch["word_ids"][row] >= 0
            for w, p in zip(batch["word_ids"][row][at].tolist(), predictions[row][at].tolist()):
                words[w] = p
            out.append(words)
        return out

    def gold_word_labels(
        self, split: str, indices: torch.Tensor | Sequence[int]
    ) -> list[list[int]]:
        """The gold word tags of the examples ``indices`` (token tasks)."""
        data = self.splits[split]
        return [data.gold_words(i) for i in torch.as_tensor(indices).tolist()]

    def source_word_ids(self, split: str, indices: torch.Tensor | Sequence[int]) -> list[list[int]]:
        """The input characters' candidate ids of the examples ``indices`` (spelling
        correction; -1: not a candidate)."""
        data = self.splits[split]
        return [data.source_words(i) for i in torch.as_tensor(indices).tolist()]


def model_inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The keys of ``batch`` a Hugging Face model takes (no labels: the loss is ours)."""
    return {k: batch[k] for k in MODEL_KEYS if k in batch}


def _padded(
    flat: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, pad: int
) -> torch.Tensor:
    """(B, T) int64 of ``flat[positions]`` where ``mask``, else ``pad``."""
    return torch.where(mask, flat[positions].long(), torch.full_like(positions, pad))


def encode_splits(loaded: Any, tokenizer: Any, *, max_length: int = 128) -> EncodedData:
    """Tokenize every split of ``loaded`` (a ``LoadedData``) once, truncating to ``max_length``."""
    check_int("max_length", max_length, 4)
    spec = loaded.spec
    if spec.task == "token" and not getattr(tokenizer, "is_fast", False):
        raise DataError(
            f"token task {spec.name!r} needs a fast tokenizer (word_ids); "
            f"got {type(tokenizer).__name__}"
        )
    encode = _encode_words if spec.task == "token" else _encode_texts
    splits = {s: encode(rows, spec, tokenizer, max_length) for s, rows in loaded.splits.items()}
    return EncodedData(
        spec=spec,
        splits=splits,
        pad_token_id=int(tokenizer.pad_token_id or 0),
        max_length=max_length,
        tokenizer_name=str(getattr(tokenizer, "name_or_path", "")),
        source=str(getattr(loaded, "source", "")),
    )


def _encode_texts(
    rows: list[dict], spec: DatasetSpec, tokenizer: Any, max_length: int
) -> EncodedSplit:
    texts = [r["text"] for r in rows]
    pairs = [r["text_pair"] for r in rows] if spec.task == "pair" else None
    enc = tokenizer(texts, pairs, truncation=True, max_length=max_length)
    if spec.task == "multi_label":
        labels = torch.zeros(len(rows), spec.num_labels, dtype=torch.float32)
        row_of = [i for i, r in enumerate(rows) for _ in r["label"]]
        labels[row_of, list(chain.from_iterable(r["label"] for r in rows))] = 1.0
    else:
        labels = torch.tensor([r["label"] for r in rows], dtype=torch.long)
    return EncodedSplit(
        ids=_flat(enc["input_ids"], torch.int32),
        offsets=_offsets(enc["input_ids"]),
        labels=labels,
        type_ids=_type_ids(enc),
    )


def _encode_words(
    rows: list[dict], spec: DatasetSpec, tokenizer: Any, max_length: int
) -> EncodedSplit:
    enc = tokenizer(
        [r["tokens"] for r in rows],
        is_split_into_words=True,
        truncation=True,
        max_length=max_length,
    )
    labels, word_ids = [], []
    for i, row in enumerate(rows):
        aligned, firsts = _align(enc.word_ids(i), row["label"])
        labels.append(aligned)
        word_ids.append(firsts)
    tags = [r["label"] for r in rows]
    sources = None
    if is_csc(spec.metric):
        candidate = {name: i for i, name in enumerate(spec.label_names or ())}
        sources = _flat([[candidate.get(t, -1) for t in r["tokens"]] for r in rows], torch.long)
    return EncodedSplit(
        ids=_flat(enc["input_ids"], torch.int32),
        offsets=_offsets(enc["input_ids"]),
        labels=_flat(labels, torch.long),
        type_ids=_type_ids(enc),
        word_ids=_flat(word_ids, torch.int32),
        word_labels=_flat(tags, torch.long),
        word_offsets=_offsets(tags),
        word_sources=sources,
    )


def _align(word_of_token: list[int | None], tags: list[int]) -> tuple[list[int], list[int]]:
    """Per sub-token: the word's tag on its first sub-token, -100 on the rest and on special
    tokens; and the word index on first sub-tokens, -1 elsewhere."""
    labels, firsts, previous = [], [], None
    for word in word_of_token:
        first = word is not None and word != previous
        labels.append(tags[word] if first else IGNORE_INDEX)
        firsts.append(word if first else -1)
        previous = word
    return labels, firsts


def _type_ids(enc: Any) -> torch.Tensor | None:
    return _flat(enc["token_type_ids"], torch.int8) if "token_type_ids" in enc else None


def _flat(lists: list[list[int]], dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(list(chain.from_iterable(lists)), dtype=dtype)


def _offsets(lists: list[list[Any]]) -> torch.Tensor:
    lengths = torch.tensor([0] + [len(x) for x in lists], dtype=torch.long)
    return torch.cumsum(lengths, 0)
