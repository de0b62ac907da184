"""Evaluation metrics: accuracy, MCC, entity-level F1, macro/micro F1, and Pearson correlation.

numpy only (torch tensors are accepted and converted), so importing this module is cheap.
``compute_metrics`` is the single entry point of the training loop's evaluation; it returns a
dict of floats under the stable names ``accuracy``, ``matthews``, ``f1``, ``precision``,
``recall``, ``macro_f1`` and ``micro_f1``.

Zero divisions follow sklearn's ``zero_division=0``: a precision, recall or F1 whose
denominator is 0 is 0.0 (no warning).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from astune._checks import check_choice
from astune.losses.catalogue import TASKS
from astune.metrics.csc import CSC_METRICS, csc_scores

IGNORE_INDEX = -100
Span = tuple[int, str, int, int]  # (sentence, entity type, first token, last token)


COMPUTED_METRICS = ("accuracy", "matthews", "f1", "micro_f1", "macro_f1", "correction_f1")
"""The primary metrics astune computes; a dataset scored otherwise cannot be searched yet."""


def is_csc(metric: str) -> bool:
    """Whether a token dataset scored with ``metric`` is spelling correction (its labels are
    candidate characters, scored by :func:`astune.metrics.csc.csc_scores`)."""
    return metric in CSC_METRICS


def check_metric_computed(dataset: str, metric: str) -> None:
    """ValueError (one line) when ``dataset`` is scored with a metric astune does not compute."""
    if metric not in COMPUTED_METRICS:
        raise ValueError(
            f"dataset {dataset!r} is scored with {metric!r}, which astune does not compute yet; "
            f"computed metrics: {', '.join(COMPUTED_METRICS)}."
        )


def _to_numpy(values: Any) -> np.ndarray:
    """A numpy array from a numpy array, a list, or a torch tensor (any device or dtype)."""
    if hasattr(values, "detach"):
        values = values.detach().cpu()
        if values.is_floating_point():
            values = values.float()  # numpy has no bfloat16
        return values.numpy()
    return np.asarray(values)


def _check_same_length(preds: np.ndarray, labels: np.ndarray, what: str) -> None:
    if preds.shape != labels.shape:
        raise ValueError(
            f"{what}: preds and labels must have the same shape, "
            f"but got {preds.shape} and {labels.shape}."
        )
    if preds.size == 0:
        raise ValueError(f"{what}: needs at least one sample, but got 0.")


def accuracy(preds: Any, labels: Any) -> float:
    """Fraction of equal entries; ``preds`` and ``labels`` are ``(N,)`` class ids."""
    preds, labels = _to_numpy(preds).ravel(), _to_numpy(labels).ravel()
    _check_same_length(preds, labels, "accuracy")
    return float(np.mean(preds == labels))


def matthews_corrcoef(preds: Any, labels: Any) -> float:
    """Multi-class Matthews correlation (Gorodkin's R_K), as sklearn computes it.

    ``preds`` and ``labels`` are ``(N,)`` class ids. Returns 0.0 when either side holds a
    single class (the correlation is undefined there; sklearn's convention).
    """
    preds, labels = _to_numpy(preds).ravel(), _to_numpy(labels).ravel()
    _check_same_length(preds, labels, "matthews_corrcoef")
    _, codes = np.unique(np.concatenate([labels, preds]), return_inverse=True)
    n = len(labels)
    n_classes = int(codes.max()) + 1
    confusion = np.zeros((n_classes, n_classes), dtype=np.float64)
    np.add.at(confusion, (codes[:n], codes[n:]), 1.0)
    true_counts, pred_counts = confusion.sum(axis=1), confusion.sum(axis=0)
    cov_true_pred = np.trace(confusion) * n - true_counts @ pred_counts
    cov_pred = n * n - pred_counts @ pred_counts
    cov_true = n * n - true_counts @ true_counts
    if cov_pred * cov_true == 0:
        return 0.0
    return float(cov_true_pred / np.sqrt(cov_true * cov_pred))


def _split_tag(tag: str) -> tuple[str, str]:
    """('B', 'PER') from 'B-PER', ('O', '_') from 'O', as seqeval splits a prefix tag."""
    if not isinstance(tag, str) or not tag or tag[0] not in "BIOES":
        raise ValueError(
            f"tag must be 'O' or start with one of B, I, E, S (IOB1, IOB2, IOBES), but got {tag!r}."
        )
    return tag[0], tag[1:].split("-", maxsplit=1)[-1] or "_"


def _ends(prev_prefix: str, prefix: str, prev_type: str, type_: str) -> bool:
    if prev_prefix in ("E", "S"):
        return True
    if prev_prefix in ("B", "I") and prefix in ("B", "S", "O"):
        return True
    return prev_prefix != "O" and prev_type != type_


def _starts(prev_prefix: str, prefix: str, prev_type: str, type_: str) -> bool:
    if prefix in ("B", "S"):
        return True
    if prev_prefix in ("E", "S", "O") and prefix in ("E", "I"):
        return True
    return prefix != "O" and prev_type != type_


def entity_spans(tags: Sequence[str], sentence: int = 0) -> list[Span]:
    """Entity spans of one tag sequence, decoded as conlleval (and seqeval's default mode).

    A span opens at B-X (or S-X), and also at an I-X (or E-X) that does not continue a span of
    type X; it closes at O, at the next B/S, after E/S, or where the type changes.
    """
    spans: list[Span] = []
    prev_prefix, prev_type, start = "O", "_", 0
    for i, tag in enumerate([*tags, "O"]):
        prefix, type_ = _split_tag(tag)
        if _ends(prev_prefix, prefix, prev_type, type_):
            spans.append((sentence, prev_type, start, i - 1))
        if _starts(prev_prefix, prefix, prev_type, type_):
            start = i
        prev_prefix, prev_type = prefix, type_
    return spans


def _prf(n_correct: float, n_pred: float, n_gold: float) -> dict[str, float]:
    precision = n_correct / n_pred if n_pred else 0.0
    recall = n_correct / n_gold if n_gold else 0.0
    f1 = 2 * n_correct / (n_pred + n_gold) if n_pred + n_gold else 0.0
    return {"precision": float(precision), "recall": float(recall), "f1": float(f1)}


def entity_scores(
    pred_tags: Sequence[Sequence[str]], gold_tags: Sequence[Sequence[str]]
) -> dict[str, float]:
    """Micro-averaged entity-level precision, recall and F1 over sentences of tag strings.

    A predicted entity counts as correct only when its type, start and end all match a gold
    entity. Equals seqeval's default ``precision_score``, ``recall_score`` and ``f1_score``.
    """
    if len(pred_tags) != len(gold_tags):
        raise ValueError(
            f"entity_scores: pred_tags and gold_tags must hold the same number of "
            f"sentences, but got {len(pred_tags)} and {len(gold_tags)}."
        )
    pred_spans: set[Span] = set()
    gold_spans: set[Span] = set()
    for i, (pred, gold) in enumerate(zip(pred_tags, gold_tags)):
        if len(pred) != len(gold):
            raise ValueError(
                f"entity_scores: sentence {i} has {len(pred)} predicted tags and "
                f"{len(gold)} gold tags; they must match."
            )
        pred_spans.update(entity_spans(pred, i))
        gold_spans.update(entity_spans(gold, i))
    return _prf(len(pred_spans & gold_spans), len(pred_spans), len(gold_spans))


def entity_f1(pred_tags: Sequence[Sequence[str]], gold_tags: Sequence[Sequence[str]]) -> float:
    """Entity-level F1 (see ``entity_scores``)."""
    return entity_scores(pred_tags, gold_tags)["f1"]


def multilabel_f1(pred: Any, gold: Any) -> dict[str, float]:
    """Macro and micro F1 of ``(N, C)`` 0/1 predictions against ``(N, C)`` 0/1 targets.

    Macro F1 averages the per-class F1 over all C classes; a class with no gold positives and
    no predictions has F1 0.0 (sklearn's ``zero_division=0``), so it lowers the macro average.
    Micro F1 pools the counts of all classes.
    """
    pred, gold = _to_numpy(pred).astype(bool), _to_numpy(gold).astype(bool)
    if pred.ndim != 2:
        raise ValueError(f"multilabel_f1: pred must be a (N, C) array, but got shape {pred.shape}.")
    _check_same_length(pred, gold, "multilabel_f1")
    tp = (pred & gold).sum(axis=0).astype(np.float64)
    fp = (pred & ~gold).sum(axis=0).astype(np.float64)
    fn = (~pred & gold).sum(axis=0).astype(np.float64)
    denom = 2 * tp + fp + fn
    per_class = np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0)
    micro = _prf(tp.sum(), tp.sum() + fp.sum(), tp.sum() + fn.sum())["f1"]
    return {"macro_f1": float(per_class.mean()), "micro_f1": micro}


def pearson(x: Any, y: Any) -> float:
    """Pearson correlation of two 1-D sequences (e.g. validation loss against the metric).

    Pairs where either value is NaN or infinite are dropped first (a missing evaluation).
    Returns NaN, without a warning, when fewer than two pairs remain or either side is constant.
    """
    x = _to_numpy(x).astype(np.float64).ravel()
    y = _to_numpy(y).astype(np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(
            f"pearson: x and y must have the same length, but got {x.size} and {y.size}."
        )
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    # An exact test: a constant column's mean can differ from its values by rounding.
    if x.size < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")
    xc, yc = x - x.mean(), y - y.mean()
    r = (xc @ yc) / np.sqrt((xc @ xc) * (yc @ yc))
    return float(np.clip(r, -1.0, 1.0))


def token_predictions(
    logits: Any, labels: Any, ignore_index: int = IGNORE_INDEX
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per-sentence predicted and gold ids at the positions whose label is not ``ignore_index``.

    ``logits`` ``(B, T, C)``, ``labels`` ``(B, T)`` (-100 on special tokens and non-first
    sub-tokens). Call it per batch and extend two lists; feed them to ``compute_metrics``.
    """
    logits, labels = _to_numpy(logits), _to_numpy(labels)
    if logits.ndim != 3 or logits.shape[:2] != labels.shape:
        raise ValueError(
            f"token_predictions: logits must be (B, T, C) and labels (B, T), "
            f"but got {logits.shape} and {labels.shape}."
        )
    ids = logits.argmax(axis=-1)
    keep = labels != ignore_index
    return [row[k] for row, k in zip(ids, keep)], [row[k] for row, k in zip(labels, keep)]


def compute_metrics(
    task: str,
    outputs: Any,
    labels: Any,
    *,
    label_names: Sequence[str] | None = None,
    matthews: bool = False,
    sources: Sequence[Any] | None = None,
) -> dict[str, float]:
    """Metrics of one evaluation, from outputs accumulated over all batches.

    - "single_label" / "pair" / "image" / "audio": ``outputs`` logits ``(N, C)``, ``labels``
      ``(N,)``; rows labelled -100 are skipped. Returns ``accuracy`` (and ``matthews`` when asked).
    - "multi_label": ``outputs`` scores ``(N, C)``, ``labels`` 0/1 ``(N, C)``; a class is
      predicted when its score is > 0 (the paper's rule for the multi-label categorical
      cross-entropy). Returns ``macro_f1`` and ``micro_f1``.
    - "token": ``outputs`` and ``labels`` are lists of per-sentence id sequences with the -100
      positions removed (see ``token_predictions``), or one ``(N, T, C)`` logits array with
      ``(N, T)`` labels. ``label_names`` maps ids to IOB tags. Returns entity-level ``f1``,
      ``precision``, ``recall`` and the token ``accuracy``.
    - "token" with ``sources`` (spelling correction): the per-sentence candidate ids of the
      input characters (-1: not a candidate) beside the per-sentence word ids; returns
      :data:`~astune.metrics.csc.CSC_METRICS` and the character ``accuracy`` (:func:`csc_metrics`).
    """
    check_choice("task", task, TASKS)
    if task == "multi_label":
        return multilabel_f1(_to_numpy(outputs) > 0, labels)
    if task == "token" and sources is not None:
        return csc_metrics(outputs, labels, sources)
    if task == "token":
        return _token_metrics(outputs, labels, label_names)
    logits, gold = _to_numpy(outputs), _to_numpy(labels).ravel()
    if logits.ndim != 2 or logits.shape[0] != gold.shape[0]:
        raise ValueError(
            f"compute_metrics({task!r}): outputs must be (N, C) logits and labels "
            f"(N,), but got {logits.shape} and {gold.shape}."
        )
    keep = gold != IGNORE_INDEX
    preds, gold = logits[keep].argmax(axis=-1), gold[keep]
    result = {"accuracy": accuracy(preds, gold)}
    if matthews:
        result["matthews"] = matthews_corrcoef(preds, gold)
    return result


def _token_metrics(
    outputs: Any, labels: Any, label_names: Sequence[str] | None
) -> dict[str, float]:
    if label_names is None:
        raise ValueError("compute_metrics('token') needs label_names (the IOB tag of each id).")
    if hasattr(outputs, "ndim") and outputs.ndim == 3:
        outputs, labels = token_predictions(outputs, labels)
    preds = [_to_numpy(p).ravel() for p in outputs]
    golds = [_to_numpy(g).ravel() for g in labels]
    if len(preds) != len(golds):
        raise ValueError(
            f"compute_metrics('token'): got {len(preds)} predicted and "
            f"{len(golds)} gold sentences; they must match."
        )
    kept = [(p[g != IGNORE_INDEX], g[g != IGNORE_INDEX]) for p, g in zip(preds, golds)]
    preds, golds = [p for p, _ in kept], [g for _, g in kept]  # ignored tokens are not scored
    flat_pred = np.concatenate(preds) if preds else np.zeros(0, dtype=np.int64)
    flat_gold = np.concatenate(golds) if golds else np.zeros(0, dtype=np.int64)
    names = np.asarray(list(label_names), dtype=object)
    for what, ids in (("predicted", flat_pred), ("gold", flat_gold)):
        if ids.size and (ids.min() < 0 or ids.max() >= len(names)):
            raise ValueError(
                f"compute_metrics('token'): {what} ids must be in "
                f"[0, {len(names) - 1}], but got {ids.min()}..{ids.max()}."
            )
    result = entity_scores([names[p] for p in preds], [names[g] for g in golds])
    result["accuracy"] = accuracy(flat_pred, flat_gold)
    return result


def csc_metrics(
    predictions: Sequence[Any], golds: Sequence[Any], sources: Sequence[Any]
) -> dict[str, float]:
    """Spelling-correction scores from per-sentence candidate ids: ``predictions`` (-1: the
    word was cut by truncation, so it is kept), ``golds`` (-100: the correction is not a
    candidate) and ``sources`` (the input characters' ids, -1: not a candidate). A character
    whose gold is -100 is left out of every score, as other token tasks leave out ignored
    tokens; the rest go to :func:`~astune.metrics.csc.csc_scores`, and ``accuracy`` is the
    share of those characters predicted right."""
    if not len(predictions) == len(golds) == len(sources):
        raise ValueError(
            f"csc_metrics needs one prediction, gold and source sequence per sentence, but got "
            f"{len(predictions)}, {len(golds)} and {len(sources)}."
        )
    kept_sources, kept_golds, kept_preds = [], [], []
    for pred, gold, source in zip(predictions, golds, sources):
        pred, gold, source = (_to_numpy(x).ravel() for x in (pred, gold, source))
        pred = np.where(pred < 0, source, pred)
        keep = gold != IGNORE_INDEX
        kept_sources.append(source[keep].tolist())
        kept_golds.append(gold[keep].tolist())
        kept_preds.append(pred[keep].tolist())
    result = csc_scores(kept_sources, kept_golds, kept_preds)
    flat_pred = np.asarray([c for s in kept_preds for c in s], dtype=np.int64)
    flat_gold = np.asarray([c for s in kept_golds for c in s], dtype=np.int64)
    result["accuracy"] = accuracy(flat_pred, flat_gold) if flat_gold.size else 0.0
    return result
