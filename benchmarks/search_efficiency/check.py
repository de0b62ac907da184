"""Item 3's check of the replay against the real searches (issue 44): each real time-to-target
against the replay's 10-90% range of its arm, and the arms' order by median time, real against
replayed. Each real search is saved by :mod:`benchmarks.search_efficiency.real`.

How much either reading can say with a few real searches is reported beside it: the share of
real searches outside the range against the 20% a calibrated replay leaves there by chance,
and how often the ranking would agree were the real searches drawn from the replay itself
(:func:`ranking_agreement_by_chance`). A median of three searches spread from a quarter of the
budget to all of it orders two arms that replay alike either way about as often as not.

    python -m benchmarks.search_efficiency check
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import provenance
from benchmarks.search_efficiency import settings
from benchmarks.search_efficiency.real import REAL

AGREEMENT_DRAWS = 4000
"""Draws of :func:`ranking_agreement_by_chance` (its generator seeded 0): the chance is then
known to about +-0.008 (one standard error at 0.5)."""


def replay_check(
    dataset: str, arms_result: dict[str, Any], *, table: str, folder: Path = REAL
) -> dict[str, Any]:
    """Item 3's check of the replay against the real searches of ``dataset`` saved in
    ``folder``: per arm, each real time-to-target against the replay's 10-90% range, and the
    arms' order by median time, real against replayed. Only searches run on the replayed
    table (``table``: its digest) are compared; the others are counted apart."""
    real: dict[str, list[float]] = {}
    other_table = 0
    for path in sorted(folder.glob(f"{dataset}-*.json")):
        saved = json.loads(path.read_text())
        if saved.get("table") != table:
            other_table += 1
            continue
        real.setdefault(saved["arm"], []).append(saved["seconds_to_target"])
    arms = {}
    for name, seconds in real.items():
        if name not in arms_result:
            continue
        replayed = arms_result[name]["seconds_to_target"]["per_repetition"]
        low, high = (float(x) for x in np.percentile(replayed, [10, 90]))
        arms[name] = {
            "real": seconds,
            "replay_10_90": [low, high],
            "within": all(low <= x <= high for x in seconds),
            "replay_share_below": [share_below(x, replayed) for x in seconds],
        }
    compared = [n for n in arms if len(arms[n]["real"]) >= 3]
    real_median = {n: float(np.median(arms[n]["real"])) for n in compared}
    replay_median = {n: arms_result[n]["seconds_to_target"]["median"] for n in compared}
    crossed = discordant_pairs(real_median, replay_median)
    counts = {n: len(arms[n]["real"]) for n in compared}
    return {
        "arms": arms,
        "same_ranking": not crossed if len(compared) > 1 else None,
        "discordant_pairs": crossed,
        "same_ranking_by_chance": (
            ranking_agreement_by_chance(arms_result, counts) if len(compared) > 1 else None
        ),
        "searches": {n: len(v) for n, v in real.items()},
        "searches_of_another_table": other_table,
        "outside_10_90": outside_10_90(arms),
    }


def share_below(seconds: float, replayed: list[float]) -> float:
    """Where a real time lies among the replayed ones: the share of repetitions below it, ties
    counted half (0.5: the replay's median; a calibrated replay puts real searches anywhere in
    [0, 1] alike)."""
    below = sum(x < seconds for x in replayed) + 0.5 * sum(x == seconds for x in replayed)
    return below / len(replayed)


def outside_10_90(arms_checked: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """How many real searches lie outside their arm's replayed 10-90% range, against the share
    a calibrated replay leaves outside by chance (at most 20%: less where the range's ends
    are ties, as the budget of searches that never reach the target is), and the chance of at
    least that many outside were 20% the rate (binomial, one-sided)."""
    flags = [
        not low <= x <= high
        for entry in arms_checked.values()
        for x in entry["real"]
        for low, high in [entry["replay_10_90"]]
    ]
    n, k = len(flags), sum(flags)
    p = sum(math.comb(n, i) * 0.2**i * 0.8 ** (n - i) for i in range(k, n + 1))
    return {"searches": n, "outside": k, "expected_at_most": 0.2 * n, "binomial_p": p}


def discordant_pairs(real: dict[str, float], replayed: dict[str, float]) -> list[tuple[str, str]]:
    """The pairs of arms that the real medians and the replayed ones (seconds) order the other
    way round. A tie on either side (equal to a tenth of a second, ``SECONDS_DECIMALS``)
    orders nothing: two arms that replay alike, as ``astune`` and ``astune-warm`` do where
    the warm start has nothing to learn from, may finish their real searches in either
    order, and two real searches that both spend the budget tie."""

    def sign(medians: dict[str, float], a: str, b: str) -> int:
        d = round(medians[a] - medians[b], settings.SECONDS_DECIMALS)
        return (d > 0) - (d < 0)

    names = sorted(real)
    return [
        (a, b)
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if sign(real, a, b) * sign(replayed, a, b) < 0
    ]


def ranking_agreement_by_chance(
    arms_result: dict[str, Any], counts: dict[str, int], *, draws: int = AGREEMENT_DRAWS
) -> float:
    """How often real searches drawn from the replay itself (``counts[arm]`` repetitions of
    each arm, with replacement) would order the arms as the replay's medians do: the chance
    that "the same ranking" holds where the replay is exact."""
    rng = np.random.default_rng(0)
    times = {n: arms_result[n]["seconds_to_target"] for n in counts}
    replayed = {n: np.asarray(times[n]["per_repetition"]) for n in counts}
    medians = {n: times[n]["median"] for n in counts}
    agree = 0
    for _ in range(draws):
        drawn = {n: float(np.median(rng.choice(replayed[n], counts[n]))) for n in counts}
        agree += not discordant_pairs(drawn, medians)
    return agree / draws


def replay_checks(result: dict[str, Any], folder: Path | None = None) -> dict[str, Any]:
    """Item 3's check of each replayed dataset of ``result`` against its real searches saved
    in ``folder`` (default: benchmarks/search_efficiency/results/real)."""
    return {
        d: replay_check(d, entry["arms"], table=entry["table"], folder=folder or REAL)
        for d, entry in result["datasets"].items()
    }


def check(args: Any) -> None:
    """``check``: item 3's check again, into the saved replay ``--output``, after more real
    searches (the replay itself unchanged)."""
    if not args.output.exists():
        raise SystemExit(f"no replay at {args.output}: run `search_efficiency.py replay` first")
    result = json.loads(args.output.read_text())
    result["replay_check"] = replay_checks(result, args.real)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    real = args.real or REAL
    inputs = {f"tables/{d}": entry["table"] for d, entry in result["datasets"].items()}
    inputs |= {f"real/{p.name}": provenance.sha256_of(p) for p in sorted(real.glob("*.json"))}
    provenance.record(args.output, inputs=inputs, machine=result["machine"])
    for dataset, entry in result["replay_check"].items():
        outside = entry["outside_10_90"]
        chance = entry["same_ranking_by_chance"]
        odds = f" (were the replay exact it would hold {chance:.2f})" if chance is not None else ""
        print(
            f"{dataset}: {entry['searches']} real searches; same ranking "
            f"{entry['same_ranking']}{odds}; {outside['outside']} of {outside['searches']} "
            f"outside the replay's 10-90% range (a calibrated replay: at most "
            f"{outside['expected_at_most']:.1f}; P(at least as many) {outside['binomial_p']:.2f})"
        )
