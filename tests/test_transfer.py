"""What `recommend` transfers besides delta and r (astune/history/transfer.py and
warm_space.py): similarity of tasks, history's weighted centre against a plain reference,
ranges that move toward history by its weight, the fallback to the shipped space, and the
packaged prior's file."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from astune.history.difficulty import Difficulty
from astune.history.reference import PRIOR_FILE, load_reference, write_reference
from astune.history.transfer import (
    HISTORY_SHRINK,
    OTHER_BACKBONE,
    OTHER_TASK,
    ReferenceTrial,
    TaskProfile,
    advise,
    ranked,
    similarity,
    weight_bound,
)
from astune.recommendation.result import Recommendation
from astune.recommendation.schedules import ScheduleAdvice
from astune.recommendation.warm_space import PROBE_MIN_WEIGHT, snapped, warm_space
from astune.space.space import load_space

TARGET = TaskProfile(0.9, "single_label", 1000, "minilm", 2)


def _search(source, configs, profile=TARGET, dataset="d"):
    """A search whose trials score in the order given (first best)."""
    scored = [(c, 1.0 - i / 100) for i, c in enumerate(configs)]
    return ranked(source, dataset, profile, scored)


def _rec(transfer, *, delta=0.3, task="single_label"):
    """A recommendation of delta 0.3 (range 0.2-0.4), r 0, fixed schedule, and ``transfer``."""
    difficulty = Difficulty("sst5", task, 0.9, 0.03)
    schedule = ScheduleAdvice(band="hard", schedule="fixed", params={}, tallies={})
    return Recommendation(
        dataset="sst5",
        delta=delta,
        low=0.2,
        high=0.4,
        warmup_ratio=0.0,
        difficulty=difficulty,
        prior_delta=0.3,
        fit_delta=None,
        history_weight=0.0,
        schedule=schedule,
        transfer=transfer,
    )


def test_similarity_is_one_for_the_same_task_and_falls_with_each_difference():
    assert similarity(TARGET, TARGET) == pytest.approx(1.0)
    harder = TaskProfile(0.75, "single_label", 1000, "minilm", 2)
    assert similarity(TARGET, harder) == pytest.approx(math.exp(-0.5))  # one scale apart
    bigger = TaskProfile(0.9, "single_label", 10_000, "minilm", 2)
    assert similarity(TARGET, bigger) == pytest.approx(math.exp(-2.0))  # a decade: two scales
    other = TaskProfile(0.9, "multi_label", 1000, "bert-base-cased", None)
    assert similarity(TARGET, other) == pytest.approx(OTHER_TASK * OTHER_BACKBONE)
    token = TaskProfile(0.9, "token", 1000, "minilm", 2)
    assert similarity(TARGET, token) == pytest.approx(OTHER_TASK)
    assert similarity(TARGET, token) == similarity(token, TARGET)


def test_weight_bound_is_the_share_at_the_difficulty_most_alike():
    """Before the probe the difficulty is unknown: the bound takes each search at its own
    difficulty, so it is advise's weight at the best difficulty, and no less than any other."""
    configs = [{"lr": 1e-4, "epochs": 2}] * 40
    ner = TaskProfile(0.42, "token", 1000, "minilm", 2)
    far = _search("ner", configs, ner)
    unknown = dataclasses.replace(TARGET, difficulty=None)
    bound = weight_bound(unknown, far)
    confidence = 40 / (40 + HISTORY_SHRINK)
    n_eff = OTHER_TASK * confidence
    assert bound == pytest.approx(n_eff / (n_eff + HISTORY_SHRINK))
    assert bound < PROBE_MIN_WEIGHT  # another family alone is not worth a probe
    at_its_difficulty = dataclasses.replace(TARGET, difficulty=0.42)
    assert advise(at_its_difficulty, far).weight == pytest.approx(bound)
    assert advise(TARGET, far).weight < bound / 100  # SST-5's 0.9 is far from 0.42
    near = _search("near", configs, dataclasses.replace(TARGET, difficulty=0.5))
    assert weight_bound(unknown, far + near) > PROBE_MIN_WEIGHT  # a like task makes it worth
    assert weight_bound(unknown, []) == 0.0


def test_weight_bound_takes_one_difficulty_for_every_search():
    """Two searches of another family, 0.64 apart in difficulty, as SST-5 and CLINC150 are for
    CoNLL-2003: the target can be as hard as one of them, not both, so the bound is the most of
    advise's weight over difficulties, below the share of both searches at full similarity."""
    configs = [{"lr": 1e-4, "epochs": 2}] * 40
    unknown = TaskProfile(None, "token", 1000, "minilm", 2)
    easy = _search("easy", configs, dataclasses.replace(TARGET, difficulty=0.29))
    hard = _search("hard", configs, dataclasses.replace(TARGET, difficulty=0.93))
    bound = weight_bound(unknown, easy + hard)
    weights = [
        advise(dataclasses.replace(unknown, difficulty=d), easy + hard).weight
        for d in (None, *(i / 100 for i in range(101)))
    ]
    assert bound == pytest.approx(max(weights), rel=1e-3) and bound >= max(weights)
    n_each = OTHER_TASK * 40 / (40 + HISTORY_SHRINK)
    assert bound < 2 * n_each / (2 * n_each + HISTORY_SHRINK) - 0.02  # the sum of both alike
    assert bound < PROBE_MIN_WEIGHT


def test_ranked_keeps_the_best_quarter_in_order_and_drops_failed_trials():
    scored = [({"lr": 10.0**-k}, s) for k, s in enumerate([0.2, 0.9, float("nan"), 0.5, 0.7])]
    scored += [({"lr": 0.5}, 0.1), ({"lr": 0.6}, 0.3), ({"lr": 0.7}, 0.4), ({"lr": 0.8}, 0.6)]
    trials = ranked("s", "d", TARGET, scored)
    assert [t.config["lr"] for t in trials] == [0.1, 1e-4]  # 8 finite -> the best 2
    assert [t.rank for t in trials] == [0.0, pytest.approx(1 / 7)]
    assert all(t.search_size == 8 for t in trials)


def test_advise_centres_on_the_weighted_geometric_mean_of_similar_tasks():
    near = _search("near", [{"lr": 1e-3, "epochs": 4, "batch_size": 16}] * 4)
    far_profile = TaskProfile(0.3, "single_label", 1000, "minilm", 2)
    far = _search("far", [{"lr": 1e-5, "epochs": 1, "batch_size": 32}] * 4, far_profile)
    advice = advise(TARGET, near + far)
    # The reference: each trial weighs similarity x n/(n+3) x (1 - rank/2).
    ws = [similarity(TARGET, t.profile) * 4 / 7 * (1 - t.rank / 2) for t in near + far]
    logs = [math.log(t.config["lr"]) for t in near + far]
    expected = math.exp(sum(w * x for w, x in zip(ws, logs)) / sum(ws))
    assert advice.centre["lr"] == pytest.approx(expected)
    assert advice.centre["lr"] == pytest.approx(1e-3, rel=1e-2)  # the far task barely counts
    assert advice.centre["batch_size"] == 16
    n_eff = 4 / 7 * (1 + similarity(TARGET, far_profile))
    assert advice.weight == pytest.approx(n_eff / (n_eff + HISTORY_SHRINK))
    assert [s for s, _ in advice.sources] == ["near", "far"]


def test_speed_knobs_come_only_from_trials_that_ran_them():
    configs = [
        {"lr": 1e-4, "as_speed": True, "lam": 1.5, "max_accum_steps": 4},
        {"lr": 1e-4, "as_speed": False, "lam": 0.5, "max_accum_steps": 2},  # lam unused
    ]
    advice = advise(TARGET, _search("s", configs * 2))
    assert advice.centre["lam"] == pytest.approx(1.5)
    assert advice.centre["max_accum_steps"] == pytest.approx(4)


def test_no_history_leaves_the_shipped_space_and_its_points():
    space = load_space(dataset="sst5")
    warmed = warm_space(_rec(advise(TARGET, [])), space)
    assert warmed.param("lr") == space.param("lr") and warmed.param("epochs").value == 7
    assert list(warmed.points) == list(space.points)  # the shipped seed point first, as shipped


def test_history_moves_lr_and_epochs_by_its_weight_and_seeds_its_best_trials():
    space = load_space(dataset="sst5")  # lr log [1e-5, 5e-5], seed 2e-5; epochs fixed 7
    best = {"loss": "as_softmax", "lr": 3e-4, "epochs": 3, "batch_size": 32, "delta": 0.3}
    trials = _search("a", [best, {**best, "lr": 1e-4}] * 6)
    trials += _search("b", [{**best, "lr": 2e-4}] * 8, dataset="e")
    advice = advise(TARGET, trials)
    h = advice.weight
    assert 0.25 < h < 0.5  # two searches as alike as can be: history counts, not alone
    warmed = warm_space(_rec(advice), space)
    first = warmed.points[0]
    lr_seed = math.exp(h * math.log(advice.centre["lr"]) + (1 - h) * math.log(2e-5))
    assert first["lr"] == pytest.approx(lr_seed, rel=5e-3)  # to 3 significant digits
    lr = warmed.param("lr")
    assert lr.log and lr.low > 1e-5 and lr.high > 5e-5 and lr.low <= first["lr"] <= lr.high
    epochs = warmed.param("epochs")  # fixed at 7: now the range to the transferred value
    centre = math.exp(h * math.log(advice.centre["epochs"]) + (1 - h) * math.log(7))
    assert first["epochs"] == round(centre) and epochs.kind == "float" and epochs.step == 1.0
    assert (epochs.low, epochs.high) == (round(centre), 7)
    assert first["batch_size"] == 16  # h < 1/2: the categorical keeps the shipped value
    # Next: history's best trials on the warmed space, then the shipped points inside it.
    assert warmed.points[1]["lr"] == snapped(lr, 3e-4) == lr.high
    assert warmed.points[1]["batch_size"] == 32
    assert all(lr.contains(p["lr"]) for p in warmed.points if "lr" in p)


def test_noisy_history_keeps_the_range_at_least_as_wide_as_shipped():
    space = load_space(dataset="sst5")
    lrs = [1e-6, 1e-4, 1e-5, 1e-3, 3e-6, 3e-4]
    trials = [t for i, lr in enumerate(lrs) for t in _search(f"s{i}", [{"lr": lr}] * 4)]
    warmed = warm_space(_rec(advise(TARGET, trials)), space)
    old, new = space.param("lr"), warmed.param("lr")
    assert math.log(new.high / new.low) >= math.log(old.high / old.low)


def test_dissimilar_history_barely_moves_the_space():
    space = load_space(dataset="sst5")
    other = TaskProfile(0.6, "multi_label", 10_000, "vit-base", None)
    advice = advise(TARGET, _search("far", [{"lr": 1e-2, "epochs": 1}] * 40, other))
    assert advice.weight < 0.001
    warmed = warm_space(_rec(advice), space)
    assert warmed.points[0]["lr"] == pytest.approx(2e-5, rel=0.01)
    assert warmed.param("lr").high == pytest.approx(5e-5, rel=0.01)
    assert len(warmed.points) == len(space.points) + 1  # no trial points of its own


def test_switches_take_historys_mode_once_it_dominates():
    space = load_space(dataset="default")  # as_speed searched: true / false
    cfg = {"loss": "as_softmax", "lr": 5e-5, "as_speed": True, "lam": 1.5, "max_accum_steps": 4}
    trials = [t for i in range(12) for t in _search(f"s{i}", [cfg] * 4)]
    advice = advise(TARGET, trials)
    assert advice.weight > 0.5
    first = warm_space(_rec(advice), space).points[0]
    assert first["as_speed"] is True and first["lam"] == 1.5 and first["max_accum_steps"] == 4


def _with_sample_levers(space):
    """``space`` also searching AS-Skip, its skip policy and the length window."""
    from astune.space.params import named, parse_param

    def choice(key, choices, where):
        return parse_param(key, {"type": "categorical", "choices": choices}, f"{where}.{key}")

    with named(space.source):
        speed = {"as_skip": choice("as_skip", [True, False], "speed_params")}
        speed["skip_policy"] = choice("skip_policy", ["zero", "soft"], "speed_params")
        window = choice("length_window", [0, 8], "params")
    return dataclasses.replace(
        space,
        speed_params={**space.speed_params, **speed},
        params={**space.params, "length_window": window},
    )


@pytest.mark.parametrize("as_skip", [True, False])
def test_the_skip_policy_and_length_grouping_transfer_as_switches(as_skip):
    """History's best trials grouped by length and pruned as InfoBatch does (AS-Skip's soft
    policy): the first point does the same; without AS-Skip in history, no policy is set."""
    space = _with_sample_levers(load_space(dataset="default"))
    cfg = {"loss": "as_softmax", "lr": 5e-5, "as_skip": as_skip, "length_window": 8}
    cfg["skip_policy"] = "soft"  # logged either way; it applies only with AS-Skip on
    trials = [t for i in range(12) for t in _search(f"s{i}", [cfg] * 4)]
    advice = advise(TARGET, trials)
    first = warm_space(_rec(advice), space).points[0]
    assert first["length_window"] == 8 and first["as_skip"] is as_skip
    assert first.get("skip_policy") == ("soft" if as_skip else None)
    assert ("skip_policy" in advice.centre) is as_skip


def test_reference_file_round_trip_exclusion_and_one_line_errors(tmp_path):
    trials = _search("x", [{"lr": 1e-4}, {"lr": 2e-4}] * 2, dataset="sst5")
    entry = {
        "dataset": "sst5",
        "task": "single_label",
        "difficulty": 0.9,
        "train_size": 1000,
        "backbone": "minilm",
        "num_layers": 2,
        "ranked": 4,
        "trials": [{"config": t.config, "rank": t.rank, "score": 0.4} for t in trials],
    }
    path = write_reference(tmp_path / "ref.json", [entry], made_by="test")
    loaded = load_reference(path)
    assert [t.config for t in loaded] == [t.config for t in trials]
    assert loaded[0].profile == TARGET and loaded[0].search_size == 4
    assert load_reference(path, exclude=["sst5"]) == []
    (tmp_path / "old.json").write_text(json.dumps({"format": 0, "searches": []}))
    with pytest.raises(ValueError, match="expected format 1, got 0"):
        load_reference(tmp_path / "old.json")
    del entry["backbone"]
    write_reference(tmp_path / "bad.json", [entry])
    with pytest.raises(ValueError, match=r"searches\[0\] lacks backbone"):
        load_reference(tmp_path / "bad.json")


def test_the_packaged_prior_loads_and_each_search_is_keyed_by_backbone_and_size():
    raw = json.loads(PRIOR_FILE.read_text())
    trials = load_reference()  # the tables' searches: not those recorded at full size
    tables = [e for e in raw["searches"] if "recorded" not in e]
    assert len({t.source for t in trials}) == len(tables) < len(raw["searches"])
    for entry in raw["searches"]:
        assert entry["backbone"] and entry["train_size"] > 0 and entry["trials"]
        ranks = [t["rank"] for t in entry["trials"]]
        assert ranks == sorted(ranks) and ranks[0] == 0.0
    assert isinstance(trials, list) and all(isinstance(t, ReferenceTrial) for t in trials)


def test_a_categorical_lr_keeps_its_choices_and_the_point_takes_the_nearest(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text(
        "extends: default\nlosses: [as_softmax]\n"
        "params:\n  lr: {type: categorical, choices: [1.0e-5, 1.0e-4, 1.0e-3]}\n"
        "seed_points:\n  - {loss: as_softmax, lr: 1.0e-5}\n"
    )
    space = load_space(path)
    trials = [t for i in range(12) for t in _search(f"s{i}", [{"lr": 1e-3}] * 4)]
    advice = advise(TARGET, trials)
    warmed = warm_space(_rec(advice), space)
    assert warmed.param("lr").choices == (1e-5, 1e-4, 1e-3)
    blended = math.exp(advice.weight * math.log(1e-3) + (1 - advice.weight) * math.log(1e-5))
    nearest = min((1e-5, 1e-4, 1e-3), key=lambda c: abs(math.log(c / blended)))
    assert warmed.points[0]["lr"] == nearest != 1e-5


def test_the_shipped_seed_lr_anchors_the_move_when_delta_drops_its_point():
    """SST-5's shipped AS-Softmax points have delta 0.3; a range of 0.15-0.25 from delta's
    history drops them, but the lr history moves from is still theirs (2e-5), not the range's
    middle."""
    space = load_space(dataset="sst5")
    advice = advise(TARGET, _search("a", [{"lr": 1e-3}] * 8))
    rec = _rec(advice, delta=0.2)
    rec.low, rec.high = 0.15, 0.25
    rec.fit_delta, rec.history_weight = 0.2, 1.0  # delta's history alone: its range is taken
    first = warm_space(rec, space).points[0]
    h = advice.weight
    expected = math.exp(h * math.log(advice.centre["lr"]) + (1 - h) * math.log(2e-5))
    assert first["delta"] == 0.2 and first["lr"] == pytest.approx(expected, rel=5e-3)


def test_delta_and_r_move_from_the_shipped_values_by_historys_weight_alone():
    """The paper's rule (no fit) leaves SST-5's shipped delta 0.3, r 0 and their ranges; a fit
    moves them by history's weight; a space shipping no delta takes the recommendation's."""
    space = load_space(dataset="sst5")  # delta [0.1, 0.5] step 0.05, seed 0.3
    rule = _rec(None, delta=0.2)
    rule.low, rule.high = 0.15, 0.25
    warmed = warm_space(rule, space)
    assert warmed.param("delta", "as_softmax") == space.param("delta", "as_softmax")
    assert warmed.points[0]["delta"] == 0.3 and warmed.points[0]["warmup_ratio"] == 0.0
    fitted = _rec(None, delta=0.2)
    fitted.low, fitted.high = 0.1, 0.2
    fitted.fit_delta, fitted.history_weight = 0.1, 0.5
    moved = warm_space(fitted, space)
    assert moved.points[0]["delta"] == pytest.approx(0.2)  # 0.5 * 0.1 + 0.5 * 0.3
    delta = moved.param("delta", "as_softmax")
    assert (delta.low, delta.high) == (0.1, 0.35)  # halfway from [0.1, 0.5] to [0.1, 0.2]
    bare = dataclasses.replace(space, points=())
    assert warm_space(rule, bare).points[0]["delta"] == 0.2
    assert warm_space(rule, bare).param("delta", "as_softmax").high == 0.25
