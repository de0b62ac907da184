"""`astune prepare sighan` (astune/data/sighan.py): both distributed layouts, the candidate set,
labels outside it, pairs of differing lengths, the carved validation split, and the written
folder loading as a token task."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from astune.data.loading import load_dataset_splits
from astune.data.sighan import IGNORE_INDEX, candidate_set, prepare_sighan, read_pairs

TRAIN = [
    {"id": "a", "original_text": "他门在坐业", "correct_text": "他们在作业"},
    {"id": "b", "original_text": "我们在学校", "correct_text": "我们在学校"},
    {"id": "c", "original_text": "今天天汽好", "correct_text": "今天天气好"},
    {"id": "d", "original_text": "短", "correct_text": "长了"},  # lengths differ: dropped
]
MORE = [{"src": "他们在学习", "tgt": "他们在学习"}, {"src": "天汽很好", "tgt": "天气很好"}]
SIGHAN_INPUT = "(pid=A1-1)\t我在学效\n(pid=A1-2)\t我们好\n"
SIGHAN_TRUTH = "A1-1, 4, 校\nA1-2, 0\n"


def write_sources(folder: Path) -> dict[str, str]:
    (folder / "train.json").write_text(json.dumps(TRAIN, ensure_ascii=False))
    (folder / "more.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in MORE))
    (folder / "input.txt").write_text(SIGHAN_INPUT)
    (folder / "truth.txt").write_text(SIGHAN_TRUTH)
    return {
        "train": str(folder / "train.json"),
        "more": str(folder / "more.jsonl"),
        "test": f"{folder / 'input.txt'},{folder / 'truth.txt'}",
    }


def test_both_layouts_read_as_pairs_and_unequal_lengths_are_dropped(tmp_path):
    files = write_sources(tmp_path)
    pairs, dropped = read_pairs(files["train"])
    assert dropped == 1 and pairs[0] == ("他门在坐业", "他们在作业") and len(pairs) == 3
    assert read_pairs(files["more"]) == ([tuple(r.values()) for r in MORE], 0)
    assert read_pairs(files["test"]) == ([("我在学效", "我在学校"), ("我们好", "我们好")], 0)


def test_the_candidate_set_keeps_frequent_corrected_characters_first():
    pairs = [("ab", "ab"), ("ac", "ab"), ("dd", "dd"), ("xb", "xb")]  # b 3, a 2, d 2, x 1
    assert candidate_set(pairs) == ["b", "a", "d", "x"]  # ties in first-seen order
    assert candidate_set(pairs, min_count=2) == ["b", "a", "d"]
    assert candidate_set(pairs, max_candidates=1) == ["b"]


def test_prepare_writes_a_token_folder_that_loads(tmp_path):
    files = write_sources(tmp_path)
    out = tmp_path / "csc"
    prepared = prepare_sighan(
        [files["train"], files["more"]], test=files["test"], out=out, validation_fraction=0.2,
        min_count=2, seed=3,
    )  # fmt: skip
    assert prepared.sizes == {"train": 4, "validation": 1, "test": 2}
    assert prepared.dropped_lengths == 1
    meta = json.loads((out / "dataset.json").read_text())
    assert meta["task"] == "token" and meta["metric"] == "correction_f1"
    names = meta["label_names"]
    rows = [json.loads(line) for line in (out / "test.jsonl").read_text().splitlines()]
    assert rows[0]["tokens"] == list("我在学效") and rows[0]["target"] == "我在学校"
    for row in rows:  # a correction that is no candidate is ignored, and counted
        want = [names.index(c) if c in names else IGNORE_INDEX for c in row["target"]]
        assert row["labels"] == want
    assert prepared.unknown_labels["test"] == sum(r["labels"].count(IGNORE_INDEX) for r in rows) > 0
    prepare_sighan(
        [files["train"], files["more"]], test=files["test"], out=tmp_path / "again",
        validation_fraction=0.2, min_count=2, seed=3,
    )  # fmt: skip
    assert (tmp_path / "again" / "validation.jsonl").read_text() == (
        out / "validation.jsonl"
    ).read_text()  # the carved split is seeded
    loaded = load_dataset_splits(str(out))
    assert loaded.spec.task == "token" and loaded.spec.num_labels == len(names)
    assert len(loaded.splits["train"]) == 4
    assert any(IGNORE_INDEX in row["label"] for row in loaded.splits["train"])  # kept ignored


def test_token_metrics_leave_ignored_tokens_unscored():
    from astune.metrics import compute_metrics

    names = ["O", "B-X", "I-X"]
    gold = [[1, IGNORE_INDEX, 0], [0, 0]]
    pred = [[1, 2, 0], [0, 0]]  # the ignored position's prediction is not scored
    scores = compute_metrics("token", pred, gold, label_names=names)
    assert scores["accuracy"] == 1.0 and scores["f1"] == 1.0


@pytest.mark.parametrize(
    "content, message",
    [
        ('[{"text": "abc"}]', "record 0 has no text pair; expected one of: original_text/"),
        ("not json", "is neither JSON nor JSON lines"),
    ],
)
def test_bad_sources_fail_in_one_line_through_the_cli(tmp_path, content, message):
    (tmp_path / "bad.json").write_text(content)
    (tmp_path / "input.txt").write_text(SIGHAN_INPUT)
    (tmp_path / "truth.txt").write_text("A1-9, 0\n")
    argv = ["prepare", "sighan", "--train", str(tmp_path / "bad.json"), "--out", str(tmp_path)]
    test = f"{tmp_path / 'input.txt'},{tmp_path / 'truth.txt'}"
    proc = subprocess.run(
        [sys.executable, "-m", "astune", *argv, "--test", test],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
