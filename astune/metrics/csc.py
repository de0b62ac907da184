"""Chinese spelling check (CSC) metrics: SIGHAN's sentence-level detection and correction
precision, recall and F1, and their character-level counterparts.

A CSC model keeps the length of its input: each character is kept or replaced. For a sentence
with source ``s``, gold target ``t`` and prediction ``p`` (equal lengths), its gold errors are
the positions where ``t != s`` and its predicted edits the positions where ``p != s``.

Sentence level (the SIGHAN 2013-2015 evaluation as the CSC literature computes it):
- a sentence is predicted positive when the model changed something (``p != s``) and gold
  positive when it has an error (``t != s``); a sentence without errors that the model changes
  is a false positive, so error-free sentences count in precision;
- detection is correct when the edited positions are exactly the gold error positions;
- correction is correct when moreover every edit is the gold character (``p == t``): every
  error found and fixed, nothing else changed.
Precision divides the correct sentences by the predicted positives, recall by the gold
positives.

Character level: the edited positions against the gold error positions (detection), and the
edits that give the gold character (correction), pooled over every sentence.
"""

from __future__ import annotations

from collections.abc import Sequence

CSC_METRICS = (
    "detection_precision",
    "detection_recall",
    "detection_f1",
    "correction_precision",
    "correction_recall",
    "correction_f1",
    "char_detection_f1",
    "char_correction_f1",
)
"""What :func:`csc_scores` returns; ``correction_f1`` is the search objective."""

Sentence = Sequence[str]
"""A string, or a sequence of characters (tokens), indexed by position."""


def _f1(precision: float, recall: float) -> float:
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _edits(source: Sentence, other: Sentence) -> set[int]:
    return {i for i in range(len(source)) if other[i] != source[i]}


def csc_scores(
    sources: Sequence[Sentence], targets: Sequence[Sentence], predictions: Sequence[Sentence]
) -> dict[str, float]:
    """The metrics of :data:`CSC_METRICS`, each in [0, 1] (0 where nothing was predicted or
    nothing was wrong).

    Raises:
        ValueError: the three lists differ in length, or a sentence's target or prediction
            differs in length from its source (naming the sentence).
    """
    if not len(sources) == len(targets) == len(predictions):
        raise ValueError(
            f"csc_scores needs as many targets and predictions as sources, but got "
            f"{len(sources)} sources, {len(targets)} targets, {len(predictions)} predictions."
        )
    pred_pos = gold_pos = detected = corrected = 0
    char_pred = char_gold = char_detected = char_corrected = 0
    for n, (source, target, prediction) in enumerate(zip(sources, targets, predictions)):
        if not len(source) == len(target) == len(prediction):
            raise ValueError(
                f"sentence {n}: source, target and prediction must have one length (CSC keeps "
                f"it), but got {len(source)}, {len(target)} and {len(prediction)}."
            )
        gold, edits = _edits(source, target), _edits(source, prediction)
        fixed = {i for i in edits & gold if prediction[i] == target[i]}
        pred_pos, gold_pos = pred_pos + bool(edits), gold_pos + bool(gold)
        if edits and edits == gold:
            detected += 1
            corrected += fixed == gold
        char_pred, char_gold = char_pred + len(edits), char_gold + len(gold)
        char_detected += len(edits & gold)
        char_corrected += len(fixed)
    out: dict[str, float] = {}
    for name, hits in (("detection", detected), ("correction", corrected)):
        precision, recall = _ratio(hits, pred_pos), _ratio(hits, gold_pos)
        out[f"{name}_precision"], out[f"{name}_recall"] = precision, recall
        out[f"{name}_f1"] = _f1(precision, recall)
    for name, hits in (("char_detection", char_detected), ("char_correction", char_corrected)):
        out[f"{name}_f1"] = _f1(_ratio(hits, char_pred), _ratio(hits, char_gold))
    return out
