"""The search-efficiency benchmark's verdicts on a replayed dataset (issue 44): whether it
counts (item 2), whether a warm start costs time (item 4), whether astune-fast meets the
target (item 6), and whether the portfolio arms meet issue 62's (its item 6)."""

from __future__ import annotations

from typing import Any

from benchmarks.search_efficiency import replay, settings

WARM_PAIRS = (("astune-warm", "astune"), ("astune-fast", "astune-fast-cold"))
"""Each warm arm and the cold arm it is the recommendation away from (issue 44 item 4)."""
PORTFOLIO_TARGET, PORTFOLIO_STRETCH = 0.35, 0.25
"""Issue 62 item 6: astune's default search in at most 0.35x by-hand's trial-seconds to the
target (medians), 0.25x the stretch goal."""
TARGET_FIELDS = {"T_common": "seconds_to_target", "T_se": "seconds_to_target_se"}
"""Each target issue 62 reports, and the field of an arm's result holding its times."""
COUNTS_WHEN = {"reached_share": 0.8, "median_trial_lengths": 8.0}
"""Issue 44 item 2: a dataset counts when by-hand reaches T_common in at least 80% of its
repetitions with a median of at least 8 trial-lengths."""


def paired_difference(warm: dict[str, Any], cold: dict[str, Any]) -> dict[str, Any]:
    """(warm minus cold) seconds to ``T_common``, paired by repetition (repetition i of both
    arms shares its seed): the median difference and its percentile-bootstrap 95% interval, and
    whether the interval lies wholly above 0 (warm slower: item 4 forbids it). Differences are
    read to ``SECONDS_DECIMALS``."""
    ours, theirs = (arm["seconds_to_target"]["per_repetition"] for arm in (warm, cold))
    differences = [round(w - c, settings.SECONDS_DECIMALS) for w, c in zip(ours, theirs)]
    stats = replay.median_interval(differences)
    return {**stats, "per_repetition": differences, "wholly_above_zero": stats["low"] > 0}


def target_check(
    results: dict[str, dict[str, Any]], *, budget: float, trial_length: float
) -> dict[str, Any]:
    """Item 2's rule for whether the dataset counts, and item 6's: ``astune-fast`` reaches
    T_common in at most 1/4 of by-hand's trial-seconds (medians) with a final regret no worse."""
    hand, fast = results.get("by-hand"), results.get("astune-fast")
    if hand is None:
        return {"counts": None, "why": "by-hand was not replayed"}
    reached = hand["seconds_to_target"]["reached"]
    share = sum(reached) / len(reached)
    median_lengths = hand["seconds_to_target"]["median"] / trial_length
    counts = (
        share >= COUNTS_WHEN["reached_share"]
        and median_lengths >= COUNTS_WHEN["median_trial_lengths"]
    )
    out: dict[str, Any] = {
        "counts": counts,
        "by_hand_reached_share": share,
        "by_hand_median_trial_lengths": median_lengths,
        "budget_trial_lengths": budget / trial_length,
    }
    if fast is not None:
        ratio = fast["seconds_to_target"]["median"] / hand["seconds_to_target"]["median"]
        regret_ok = fast["final_regret"]["median"] <= hand["final_regret"]["median"]
        out.update(fast_over_by_hand=ratio, regret_no_worse=regret_ok,
                   met=bool(counts and ratio <= 0.25 and regret_ok))  # fmt: skip
    return out


def paired_ratio(ours: dict[str, Any], hand: dict[str, Any], field: str) -> dict[str, Any]:
    """``ours`` / ``hand`` seconds to a target (``field``), paired by repetition (repetition i
    of both arms shares its seed): the median ratio and its percentile-bootstrap 95% interval,
    and whether the interval lies wholly above 1 (slower than by-hand beyond doubt)."""
    mine, theirs = (arm[field]["per_repetition"] for arm in (ours, hand))
    ratios = [m / h for m, h in zip(mine, theirs, strict=True)]
    stats = replay.median_interval(ratios)
    return {**stats, "wholly_above_one": stats["low"] > 1.0}


def portfolio_check(results: dict[str, dict[str, Any]], *, counts: bool | None) -> dict[str, Any]:
    """Issue 62 item 6 for each portfolio arm replayed: per target, the ratio of its median
    seconds to by-hand's, the paired ratio, final regret no worse, and whether the target
    (at most :data:`PORTFOLIO_TARGET`x, the interval not wholly above 1) and the stretch
    (:data:`PORTFOLIO_STRETCH`x) are met on a dataset that counts."""
    hand = results.get("by-hand")
    out: dict[str, Any] = {}
    for name, arm in results.items():
        if hand is None or not name.startswith("astune-portfolio"):
            continue
        regret_ok = arm["final_regret"]["median"] <= hand["final_regret"]["median"]
        per_target = {}
        for target, field in TARGET_FIELDS.items():
            ratio = arm[field]["median"] / hand[field]["median"]
            paired = paired_ratio(arm, hand, field)
            ok = bool(counts and regret_ok and not paired["wholly_above_one"])
            per_target[target] = {
                "ratio_of_medians": ratio,
                "paired_ratio": paired,
                "met": ok and ratio <= PORTFOLIO_TARGET,
                "stretch_met": ok and ratio <= PORTFOLIO_STRETCH,
            }
        out[name] = {"regret_no_worse": regret_ok, "counts": counts, **per_target}
    return out
