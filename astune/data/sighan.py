"""``astune prepare sighan``: Chinese spelling check data in the project's token layout.

Reads the two layouts CSC data is distributed in:

- the common JSON layout (SIGHAN13/14/15 and Wang271K as CSC papers distribute them): a JSON
  list, or JSON lines, of records holding the original and the corrected text, under
  ``original_text``/``correct_text``, ``source``/``target`` or ``src``/``tgt``;
- the SIGHAN bake-off's two files, given as ``INPUT,TRUTH``: input lines ``(pid=ID)<tab>text``
  and truth lines ``ID, pos, char[, pos, char ...]`` (1-based positions) or ``ID, 0``.

Each character is one token, labelled with its correct character's index in the candidate set:
the characters of the training targets seen at least ``min_count`` times (most frequent first,
at most ``max_candidates``; the paper keeps 5,201). A correct character outside the set is
labelled ``ignore_index`` (-100) and counted. Pairs whose lengths differ (CSC keeps the length)
are dropped and counted. Writes ``{train,validation,test}.jsonl`` (``tokens``, ``labels`` and the
corrected text ``target``) and a ``dataset.json`` (task ``token``, metric ``correction_f1``).
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astune._checks import check_int
from astune._text import counted
from astune.config import TRAIN_FIELDS
from astune.data.errors import DataError
from astune.metrics.scores import IGNORE_INDEX

PAIR_FIELDS = (("original_text", "correct_text"), ("source", "target"), ("src", "tgt"))
"""The (original, corrected) field names of the JSON layout, in the order they are tried."""
_INPUT_LINE = re.compile(r"^\(pid=([^)]+)\)\s*(.*)$")

Pair = tuple[str, str]


@dataclass
class Prepared:
    """What :func:`prepare_sighan` wrote and counted."""

    out: Path
    sizes: dict[str, int]
    candidates: int
    dropped_lengths: int = 0
    unknown_labels: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        sizes = ", ".join(f"{n} {split}" for split, n in self.sizes.items())
        unknown = sum(self.unknown_labels.values())
        return (
            f"prepared {sizes} sentences in {self.out}; {self.candidates} candidate characters; "
            f"dropped {counted(self.dropped_lengths, 'pair')} whose lengths differ; "
            f"{counted(unknown, 'character')} whose correction is not a candidate labelled -100"
        )


def read_pairs(source: str) -> tuple[list[Pair], int]:
    """The (original, corrected) pairs of one source (a JSON file, or ``INPUT,TRUTH``) and how
    many were dropped for differing lengths; DataError naming the file and what it expected."""
    if "," in source:
        input_path, truth_path = (Path(p.strip()) for p in source.split(",", 1))
        pairs = _sighan_pairs(input_path, truth_path)
    else:
        pairs = _json_pairs(Path(source))
    kept = [(a, b) for a, b in pairs if len(a) == len(b)]
    return kept, len(pairs) - len(kept)


def _json_pairs(path: Path) -> list[Pair]:
    text = _read(path)
    try:
        records = json.loads(text)
    except json.JSONDecodeError:
        try:
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as err:
            raise DataError(f"{path} is neither JSON nor JSON lines: {err.msg}") from None
    if isinstance(records, dict):
        records = [records]
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise DataError(f"{path} must hold a list of records (JSON objects)")
    return [_pair_of(record, path, n) for n, record in enumerate(records)]


def _pair_of(record: dict[str, Any], path: Path, n: int) -> Pair:
    for original, corrected in PAIR_FIELDS:
        if isinstance(record.get(original), str) and isinstance(record.get(corrected), str):
            return record[original], record[corrected]
    accepted = ", ".join(f"{a}/{b}" for a, b in PAIR_FIELDS)
    raise DataError(f"{path} record {n} has no text pair; expected one of: {accepted}")


def _sighan_pairs(input_path: Path, truth_path: Path) -> list[Pair]:
    texts: dict[str, str] = {}
    for number, line in enumerate(_read(input_path).splitlines(), 1):
        if line.strip():
            match = _INPUT_LINE.match(line.strip())
            if match is None:
                raise DataError(f"{input_path} line {number}: expected '(pid=ID)<tab>text'")
            texts[match.group(1)] = match.group(2).strip()
    pairs = []
    for number, line in enumerate(_read(truth_path).splitlines(), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        pid, edits = fields[0], fields[1:]
        if pid not in texts:
            raise DataError(f"{truth_path} line {number}: {pid!r} is not in {input_path}")
        text = list(texts[pid])
        if edits != ["0"]:
            if len(edits) % 2:
                raise DataError(f"{truth_path} line {number}: expected 'ID, pos, char, ...'")
            for pos, char in zip(edits[::2], edits[1::2]):
                if not pos.isdigit() or not 1 <= int(pos) <= len(text) or len(char) != 1:
                    raise DataError(
                        f"{truth_path} line {number}: position {pos!r} / character {char!r} "
                        f"is not a 1-based position in a {len(text)}-character sentence"
                    )
                text[int(pos) - 1] = char
        pairs.append((texts[pid], "".join(text)))
    return pairs


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise DataError(f"cannot read {path}: {err.strerror or err}") from None


def candidate_set(
    pairs: Sequence[Pair], *, min_count: int = 1, max_candidates: int | None = None
) -> list[str]:
    """The corrected characters of ``pairs`` seen at least ``min_count`` times, most frequent
    first (ties in first-seen order), at most ``max_candidates``."""
    counts = Counter(char for _, corrected in pairs for char in corrected)
    kept = [c for c, n in sorted(counts.items(), key=lambda kv: -kv[1]) if n >= min_count]
    return kept if max_candidates is None else kept[:max_candidates]


def token_rows(pairs: Sequence[Pair], candidates: Sequence[str]) -> tuple[list[dict], int]:
    """Rows of the token layout and the count of labels outside ``candidates`` (-100)."""
    index = {c: i for i, c in enumerate(candidates)}
    rows, unknown = [], 0
    for original, corrected in pairs:
        labels = [index.get(c, IGNORE_INDEX) for c in corrected]
        unknown += labels.count(IGNORE_INDEX)
        rows.append({"tokens": list(original), "labels": labels, "target": corrected})
    return rows, unknown


def prepare_sighan(
    train: Sequence[str],
    *,
    test: str,
    out: str | Path,
    validation: str | None = None,
    validation_fraction: float = 0.1,
    min_count: int = 1,
    max_candidates: int | None = None,
    seed: int = 42,
) -> Prepared:
    """Convert CSC data (module docstring) into ``out``; validation is carved from train
    (seeded) when not given. Returns what it wrote and counted."""
    TRAIN_FIELDS["validation_fraction"].check(validation_fraction)
    check_int("min_count", min_count, 1)
    if max_candidates is not None:
        check_int("max_candidates", max_candidates, 1)
    splits: dict[str, list[Pair]] = {"train": []}
    dropped = 0
    for source in train:
        pairs, lost = read_pairs(source)
        splits["train"] += pairs
        dropped += lost
    if validation is None:
        random.Random(seed).shuffle(splits["train"])
        cut = max(1, round(validation_fraction * len(splits["train"])))
        splits["validation"], splits["train"] = splits["train"][:cut], splits["train"][cut:]
    for split, source in (("validation", validation), ("test", test)):
        if source is not None:
            splits[split], lost = read_pairs(source)
            dropped += lost
    for split, pairs in splits.items():
        if not pairs:
            raise DataError(f"the {split} split has no sentence pair of equal lengths")
    candidates = candidate_set(splits["train"], min_count=min_count, max_candidates=max_candidates)
    return _write(Path(out), splits, candidates, dropped)


def _write(
    out: Path, splits: dict[str, list[Pair]], candidates: list[str], dropped: int
) -> Prepared:
    out.mkdir(parents=True, exist_ok=True)
    prepared = Prepared(out, {}, len(candidates), dropped)
    for split in ("train", "validation", "test"):
        rows, unknown = token_rows(splits[split], candidates)
        with (out / f"{split}.jsonl").open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        prepared.sizes[split], prepared.unknown_labels[split] = len(rows), unknown
    meta = {
        "task": "token",
        "tokens_column": "tokens",
        "label_column": "labels",
        "label_names": candidates,
        "metric": "correction_f1",
        "source": "astune prepare sighan",
        "split_sizes": prepared.sizes,
        "dropped_lengths": dropped,
        "unknown_labels": prepared.unknown_labels,
    }
    (out / "dataset.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1) + "\n")
    return prepared
