"""CSC metrics (astune/csc_metrics.py) against hand-worked cases and a plain reference written
here, on the SIGHAN definitions: a sentence counts as corrected only when every error is fixed
and nothing else changed; error-free sentences that the model changes count against precision."""

from __future__ import annotations

import random

import pytest

from astune.metrics.csc import CSC_METRICS, csc_scores


def reference(sources, targets, predictions):
    """Sentence- and character-level scores, spelled out one sentence at a time."""
    counts = dict(pred=0, gold=0, det=0, cor=0, cpred=0, cgold=0, cdet=0, ccor=0)
    for s, t, p in zip(sources, targets, predictions):
        wrong = [i for i in range(len(s)) if s[i] != t[i]]
        changed = [i for i in range(len(s)) if s[i] != p[i]]
        if changed:
            counts["pred"] += 1
        if wrong:
            counts["gold"] += 1
        if changed and sorted(changed) == sorted(wrong):
            counts["det"] += 1
            if all(p[i] == t[i] for i in wrong):
                counts["cor"] += 1
        counts["cpred"] += len(changed)
        counts["cgold"] += len(wrong)
        counts["cdet"] += sum(1 for i in changed if i in wrong)
        counts["ccor"] += sum(1 for i in changed if i in wrong and p[i] == t[i])

    def prf(hit, pred, gold):
        precision = hit / pred if pred else 0.0
        recall = hit / gold if gold else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, f1

    dp, dr, df = prf(counts["det"], counts["pred"], counts["gold"])
    cp, cr, cf = prf(counts["cor"], counts["pred"], counts["gold"])
    return {
        "detection_precision": dp, "detection_recall": dr, "detection_f1": df,
        "correction_precision": cp, "correction_recall": cr, "correction_f1": cf,
        "char_detection_f1": prf(counts["cdet"], counts["cpred"], counts["cgold"])[2],
        "char_correction_f1": prf(counts["ccor"], counts["cpred"], counts["cgold"])[2],
    }  # fmt: skip


CLEAN = ("我今天很高兴", "我今天很高兴")  # no error
TWO_ERRORS = ("他门在坐业", "他们在作业")  # errors at 1 and 3


def test_an_error_free_sentence_left_alone_counts_nowhere():
    scores = csc_scores([CLEAN[0]], [CLEAN[1]], [CLEAN[0]])
    assert scores == {name: 0.0 for name in CSC_METRICS}


def test_a_sentence_fixed_in_full_is_detected_and_corrected():
    scores = csc_scores([TWO_ERRORS[0]], [TWO_ERRORS[1]], [TWO_ERRORS[1]])
    assert scores == {name: 1.0 for name in CSC_METRICS}


def test_a_sentence_fixed_partly_counts_for_neither_but_its_characters_do():
    partly = "他们在坐业"  # error 1 fixed, error 3 missed
    scores = csc_scores([TWO_ERRORS[0]], [TWO_ERRORS[1]], [partly])
    assert scores["detection_f1"] == scores["correction_f1"] == 0.0
    # one edit, right: precision 1/1, recall 1/2 at character level
    assert scores["char_detection_f1"] == scores["char_correction_f1"] == pytest.approx(2 / 3)


def test_a_wrong_replacement_is_detected_but_not_corrected():
    wrong_char = "他们在做业"  # both positions found, the second with the wrong character
    scores = csc_scores([TWO_ERRORS[0]], [TWO_ERRORS[1]], [wrong_char])
    assert scores["detection_f1"] == 1.0 and scores["correction_f1"] == 0.0
    assert scores["char_correction_f1"] == pytest.approx(0.5)


def test_over_correction_of_an_error_free_sentence_costs_precision():
    over = "我今天狠高兴"
    scores = csc_scores([TWO_ERRORS[0], CLEAN[0]], [TWO_ERRORS[1], CLEAN[1]], [TWO_ERRORS[1], over])
    # one of two changed sentences is right; the one erroneous sentence was fixed
    assert scores["correction_precision"] == 0.5 and scores["correction_recall"] == 1.0
    assert scores["correction_f1"] == pytest.approx(2 / 3)
    assert scores == pytest.approx(reference(*zip(TWO_ERRORS, CLEAN), [TWO_ERRORS[1], over]))


def test_random_sentences_match_the_plain_reference():
    rng = random.Random(0)
    chars = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动"
    sources, targets, predictions = [], [], []
    for _ in range(300):
        source = [rng.choice(chars) for _ in range(rng.randint(1, 12))]
        target = [rng.choice(chars) if rng.random() < 0.1 else c for c in source]
        prediction = [
            target[i] if rng.random() < 0.6 else (rng.choice(chars) if rng.random() < 0.1 else c)
            for i, c in enumerate(source)
        ]
        sources.append(source), targets.append(target), predictions.append(prediction)
    got = csc_scores(sources, targets, predictions)
    assert got == pytest.approx(reference(sources, targets, predictions))
    assert 0 < got["correction_f1"] < got["detection_f1"] < 1  # the case tells them apart


@pytest.mark.parametrize(
    "args, message",
    [
        ((["ab"], ["ab", "cd"], ["ab"]), "as many targets and predictions as sources"),
        ((["abc"], ["abd"], ["ab"]), "sentence 0: source, target and prediction must have one"),
    ],
)
def test_mismatched_inputs_fail_in_one_line(args, message):
    with pytest.raises(ValueError, match=message) as err:
        csc_scores(*args)
    assert "\n" not in str(err.value)
