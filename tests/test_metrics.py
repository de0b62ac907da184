"""Metrics against plain references written here, hand-computed cases, and seqeval on CoNLL-2003."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from seqeval.metrics import f1_score, precision_score, recall_score

from astune.metrics import (
    accuracy,
    compute_metrics,
    entity_f1,
    entity_scores,
    entity_spans,
    matthews_corrcoef,
    multilabel_f1,
    pearson,
    token_predictions,
)

# --- plain references -------------------------------------------------------------------------


def reference_mcc(preds: list[int], labels: list[int]) -> float:
    """Gorodkin's R_K: the correlation of the one-hot indicator matrices, summed over classes."""
    classes = sorted(set(preds) | set(labels))
    n = len(labels)
    x = [[float(lab == c) for c in classes] for lab in labels]
    y = [[float(p == c) for c in classes] for p in preds]

    def cov(a, b):
        total = 0.0
        for k in range(len(classes)):
            mean_a = sum(row[k] for row in a) / n
            mean_b = sum(row[k] for row in b) / n
            total += sum((a[i][k] - mean_a) * (b[i][k] - mean_b) for i in range(n))
        return total

    denom = math.sqrt(cov(x, x) * cov(y, y))
    return 0.0 if denom == 0 else cov(x, y) / denom


def reference_multilabel(pred: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    per_class, tp_all, fp_all, fn_all = [], 0, 0, 0
    for c in range(gold.shape[1]):
        tp = fp = fn = 0
        for i in range(gold.shape[0]):
            tp += int(pred[i, c] == 1 and gold[i, c] == 1)
            fp += int(pred[i, c] == 1 and gold[i, c] == 0)
            fn += int(pred[i, c] == 0 and gold[i, c] == 1)
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_class.append(f1)
        tp_all, fp_all, fn_all = tp_all + tp, fp_all + fp, fn_all + fn
    p = tp_all / (tp_all + fp_all) if tp_all + fp_all else 0.0
    r = tp_all / (tp_all + fn_all) if tp_all + fn_all else 0.0
    micro = 2 * p * r / (p + r) if p + r else 0.0
    return sum(per_class) / len(per_class), micro


def reference_pearson(x: list[float], y: list[float]) -> float:
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy)


# --- accuracy and MCC -------------------------------------------------------------------------


def test_accuracy_hand_case_and_tensor_input() -> None:
    assert accuracy([0, 1, 2, 2], [0, 1, 1, 2]) == 0.75
    assert accuracy(torch.tensor([3, 3]), np.array([3, 1])) == 0.5


@pytest.mark.parametrize("preds, labels", [([0, 1], [0]), ([], [])])
def test_accuracy_rejects_bad_shapes(preds, labels) -> None:
    with pytest.raises(ValueError, match="accuracy"):
        accuracy(preds, labels)


def test_matthews_binary_hand_computed() -> None:
    # tp=3, tn=2, fp=1, fn=2: (3*2 - 1*2) / sqrt(4 * 5 * 3 * 4) = 4 / sqrt(240)
    labels = [1, 1, 1, 1, 1, 0, 0, 0]
    preds = [1, 1, 1, 0, 0, 1, 0, 0]
    assert matthews_corrcoef(preds, labels) == pytest.approx(4 / math.sqrt(240))


@pytest.mark.parametrize("seed, n, k", [(0, 50, 3), (1, 200, 5), (2, 13, 7), (3, 400, 2)])
def test_matthews_matches_reference(seed: int, n: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    preds = np.where(rng.random(n) < 0.6, labels, rng.integers(0, k, n))
    expected = reference_mcc(preds.tolist(), labels.tolist())
    assert matthews_corrcoef(preds, labels) == pytest.approx(expected, abs=1e-12)


def test_matthews_edge_cases() -> None:
    assert matthews_corrcoef([2, 0, 1], [2, 0, 1]) == pytest.approx(1.0)
    assert matthews_corrcoef([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)
    assert matthews_corrcoef([1, 1, 1], [0, 1, 2]) == 0.0  # one predicted class: undefined -> 0
    # labels that are not 0..K-1 are fine (only equality matters)
    expected = reference_mcc([7, 9, 9], [7, 9, 7])
    assert matthews_corrcoef([7, 9, 9], [7, 9, 7]) == pytest.approx(expected)


# --- entity-level F1 --------------------------------------------------------------------------


def test_entity_spans_conlleval_rules() -> None:
    tags = ["I-PER", "I-PER", "O", "B-LOC", "I-ORG", "B-ORG", "B-ORG", "I-ORG"]
    assert entity_spans(tags) == [
        (0, "PER", 0, 1),  # I- at the start opens a span
        (0, "LOC", 3, 3),
        (0, "ORG", 4, 4),  # a type change opens a new span
        (0, "ORG", 5, 5),  # B- after B- of the same type closes the first
        (0, "ORG", 6, 7),
    ]


@pytest.mark.parametrize(
    "pred, gold, expected",
    [
        (["B-PER", "O"], ["B-PER", "I-PER"], (0.0, 0.0)),  # partial span is wrong
        (["B-PER", "I-LOC"], ["B-PER", "I-PER"], (0.0, 0.0)),  # type mismatch splits the span
        (["B-LOC", "I-LOC"], ["B-PER", "I-PER"], (0.0, 0.0)),  # right span, wrong type
        (["I-PER", "I-PER", "O"], ["B-PER", "I-PER", "O"], (1.0, 1.0)),  # I- at start
        (["B-PER", "O", "B-LOC"], ["B-PER", "O", "O"], (0.5, 1.0)),  # one spurious entity
        (["O", "O"], ["O", "O"], (0.0, 0.0)),  # nothing to find: zero_division=0
    ],
)
def test_entity_scores_hand_cases(pred, gold, expected) -> None:
    scores = entity_scores([pred], [gold])
    assert (scores["precision"], scores["recall"]) == pytest.approx(expected)
    assert entity_f1([pred], [gold]) == scores["f1"]
    assert scores["f1"] == pytest.approx(f1_score([gold], [pred], zero_division=0))


def test_entity_spans_are_per_sentence() -> None:
    # The same span in two sentences counts twice; spans never join across sentences.
    scores = entity_scores([["B-PER"], ["I-PER"]], [["B-PER"], ["B-PER"]])
    assert scores == pytest.approx({"precision": 1.0, "recall": 1.0, "f1": 1.0})


def test_entity_scores_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="'X-PER'"):
        entity_scores([["X-PER"]], [["O"]])
    with pytest.raises(ValueError, match="sentence 0"):
        entity_scores([["O", "O"]], [["O"]])
    with pytest.raises(ValueError, match="number of sentences"):
        entity_scores([["O"]], [])


def _load_conll(data_dir: Path) -> tuple[list[list[str]], list[str]]:
    folder = data_dir / "conll2003"
    names = json.loads((folder / "dataset.json").read_text())["label_names"]
    with open(folder / "validation.jsonl") as handle:
        rows = [json.loads(line) for line in handle]
    return [[names[t] for t in row["ner_tags"]] for row in rows], names


@pytest.mark.parametrize("noise", [0.0, 0.05, 0.3])
def test_entity_scores_match_seqeval_on_conll(data_dir: Path, noise: float) -> None:
    gold, names = _load_conll(data_dir)
    assert len(gold) == 3250
    rng = np.random.default_rng(int(noise * 100))

    def flip(tag: str) -> str:
        return names[rng.integers(len(names))] if rng.random() < noise else tag

    pred = [[flip(tag) for tag in sentence] for sentence in gold]
    scores = entity_scores(pred, gold)
    assert scores["precision"] == pytest.approx(precision_score(gold, pred), abs=1e-12)
    assert scores["recall"] == pytest.approx(recall_score(gold, pred), abs=1e-12)
    assert scores["f1"] == pytest.approx(f1_score(gold, pred), abs=1e-12)
    assert (scores["f1"] == 1.0) == (noise == 0.0)


def test_entity_scores_match_seqeval_on_random_iobes() -> None:
    rng = np.random.default_rng(7)
    tags = ["O"] + [f"{p}-{t}" for p in "BIES" for t in ("PER", "LOC")]
    lengths = rng.integers(1, 12, size=400)
    gold = [[tags[i] for i in rng.integers(len(tags), size=n)] for n in lengths]
    pred = [[tags[rng.integers(len(tags))] if rng.random() < 0.3 else t for t in s] for s in gold]
    scores = entity_scores(pred, gold)
    assert scores["f1"] == pytest.approx(f1_score(gold, pred), abs=1e-12)
    assert scores["precision"] == pytest.approx(precision_score(gold, pred), abs=1e-12)


# --- multi-label F1 ---------------------------------------------------------------------------


def test_multilabel_f1_hand_case_with_empty_class() -> None:
    pred = np.array([[1, 0, 0], [1, 1, 0]])
    gold = np.array([[1, 0, 0], [0, 1, 0]])
    # class 0: F1 2/3; class 1: F1 1; class 2 has no positives and no predictions: F1 0
    scores = multilabel_f1(pred, gold)
    assert scores["macro_f1"] == pytest.approx((2 / 3 + 1 + 0) / 3)
    assert scores["micro_f1"] == pytest.approx(0.8)  # tp=2, fp=1, fn=0


@pytest.mark.parametrize("seed, n, c", [(0, 30, 4), (1, 100, 9), (2, 5, 12)])
def test_multilabel_f1_matches_reference(seed: int, n: int, c: int) -> None:
    rng = np.random.default_rng(seed)
    gold = (rng.random((n, c)) < 0.25).astype(int)
    pred = np.where(rng.random((n, c)) < 0.7, gold, 1 - gold)
    macro, micro = reference_multilabel(pred, gold)
    scores = multilabel_f1(pred, gold)
    assert scores["macro_f1"] == pytest.approx(macro, abs=1e-12)
    assert scores["micro_f1"] == pytest.approx(micro, abs=1e-12)


def test_multilabel_f1_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match=r"\(N, C\)"):
        multilabel_f1(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="same shape"):
        multilabel_f1(np.ones((2, 3)), np.ones((2, 4)))


# --- Pearson ----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pearson_matches_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=20)
    y = 0.5 * x + rng.normal(size=20)
    assert pearson(x, y) == pytest.approx(reference_pearson(x.tolist(), y.tolist()), abs=1e-12)


def test_pearson_exact_lines_and_dropped_nans() -> None:
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    with_gap = pearson([1.0, 2.0, np.nan, 4.0, 5.0], [1.0, 3.0, 2.0, np.inf, 4.0])
    assert with_gap == pytest.approx(reference_pearson([1.0, 2.0, 5.0], [1.0, 3.0, 4.0]))


@pytest.mark.parametrize(
    "x, y",
    [([0.1, 0.1, 0.1], [1.0, 2.0, 3.0]), ([1.0, 2.0], [5.0, 5.0]), ([1.0], [2.0]), ([], [])],
)
def test_pearson_undefined_is_nan_without_warnings(x, y) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(pearson(x, y))


# --- compute_metrics --------------------------------------------------------------------------


def test_compute_metrics_single_label_skips_ignored_rows() -> None:
    logits = np.array([[2.0, 0.0, 1.0], [0.0, 3.0, 1.0], [0.0, 0.0, 5.0], [9.0, 0.0, 0.0]])
    labels = np.array([0, 2, 2, -100])
    result = compute_metrics("single_label", logits, labels, matthews=True)
    assert set(result) == {"accuracy", "matthews"}
    assert result["accuracy"] == pytest.approx(2 / 3)
    assert result["matthews"] == pytest.approx(reference_mcc([0, 1, 2], [0, 2, 2]))
    assert compute_metrics("pair", torch.tensor(logits, dtype=torch.bfloat16), labels) == {
        "accuracy": pytest.approx(2 / 3)
    }


def test_compute_metrics_multi_label_predicts_positive_scores() -> None:
    scores = np.array([[0.5, 0.0, -1.0], [2.0, 1e-6, -0.1]])  # a score of exactly 0 is negative
    gold = np.array([[1, 1, 0], [1, 1, 0]])
    result = compute_metrics("multi_label", scores, gold)
    assert result == multilabel_f1(np.array([[1, 0, 0], [1, 1, 0]]), gold)
    assert result["micro_f1"] == pytest.approx(2 * 3 / (3 + 4))


def test_compute_metrics_token_from_logits_and_from_lists() -> None:
    names = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 6, 5))
    labels = rng.integers(0, 5, size=(3, 6))
    labels[:, 0] = labels[:, -1] = -100  # [CLS], [SEP]
    labels[1, 2] = -100  # a non-first sub-token
    preds, golds = token_predictions(torch.tensor(logits), torch.tensor(labels))
    assert [len(p) for p in preds] == [4, 3, 4] == [len(g) for g in golds]
    from_lists = compute_metrics("token", preds, golds, label_names=names)
    from_logits = compute_metrics("token", logits, labels, label_names=names)
    assert from_lists == from_logits
    keep = labels != -100
    tags = lambda rows: [[names[i] for i in row] for row in rows]  # noqa: E731
    assert from_lists["f1"] == pytest.approx(f1_score(tags(golds), tags(preds)))
    assert from_lists["accuracy"] == pytest.approx(np.mean(logits.argmax(-1)[keep] == labels[keep]))
    assert set(from_lists) == {"f1", "precision", "recall", "accuracy"}


def test_compute_metrics_validation() -> None:
    with pytest.raises(ValueError, match="'regression'"):
        compute_metrics("regression", np.zeros((2, 2)), np.zeros(2))
    with pytest.raises(ValueError, match="label_names"):
        compute_metrics("token", [[0]], [[0]])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        compute_metrics("token", [[0, 5]], [[0, 1]], label_names=["O", "B-X"])
    with pytest.raises(ValueError, match=r"\(N, C\)"):
        compute_metrics("single_label", np.zeros(3), np.zeros(3))
