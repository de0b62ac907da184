"""The words of `astune recommend`: the rationale paragraph and the CLI's report."""

from __future__ import annotations

import textwrap

from astune._text import counted
from astune.history.portfolio import describe_portfolio
from astune.history.transfer import describe as describe_transfer
from astune.recommendation.prior import UNKNOWN_DIFFICULTY, prior_warmup
from astune.recommendation.result import Recommendation
from astune.recommendation.schedules import (
    FRACTIONS,
    ScheduleAdvice,
    ScheduleTally,
    median_trajectory,
)


def rationale(rec: Recommendation) -> str:
    """One paragraph: the evidence for the difficulty, the rule, the history, the result."""
    d = rec.difficulty
    if d.value is None:
        measured = (
            f"Nothing could be measured on {rec.dataset} ({'; '.join(d.notes)}), so it "
            f"counts as a medium task (difficulty {UNKNOWN_DIFFICULTY})."
        )
    else:
        pieces = "; ".join(e.describe() for e in d.evidence)
        measured = f"{rec.dataset} measures difficulty {d.describe()} from {pieces}."
    prior = (
        f"The paper's rule (delta about 0.35 for easy tasks, 0.3 for most, 0.2 for hard ones) "
        f"gives {rec.prior_delta:.2f} at this difficulty{_paper_context(rec.dataset)}."
    )
    if not rec.points:
        history = (
            "The MLflow store holds no search with finished AS-Softmax trials, so the "
            "recommendation is the paper prior alone."
        )
    else:
        seen = ", ".join(
            f"{p.experiment} (difficulty {p.difficulty:.2f}, best delta {p.delta:.2f})"
            for p in rec.points
        )
        which = "mostly the paper prior" if rec.history_weight < 0.5 else "mostly the history fit"
        searches = counted(len(rec.points), "search")
        history = (
            f"The store holds {searches} with AS-Softmax trials: {seen}; "
            f"their fit gives {rec.fit_delta:.2f}, blended with weight "
            f"{rec.history_weight:.2f} against the prior's {1 - rec.history_weight:.2f} "
            f"({which})."
        )
    warm = _warmup_words(rec)
    result = (
        f"Recommended: delta {rec.delta:.2f} (range {rec.low:.2f}-{rec.high:.2f}) and "
        f"r = {rec.warmup_ratio:.2f}, {warm}."
    )
    caveat = (
        "For multi-label tasks the rule is a weak guide: the paper used delta 0.05 on Eurlex "
        "and 0.35 on WOS-46985."
        if d.task == "multi_label"
        else ""
    )
    schedule = schedule_sentence(rec.schedule)
    parts = (measured, prior, history, result, schedule, caveat)
    return " ".join(part for part in parts if part)


def _warmup_words(rec: Recommendation) -> str:
    """Why r is what it is: the paper's warm-up, or the history fit's where the paper has none."""
    if rec.warmup_ratio <= 0:
        return "no warm-up (the paper uses one only for easy tasks with a high baseline)"
    keeping = "a warm-up keeping delta = 1 for the first r of training"
    d = rec.difficulty.value
    if prior_warmup(UNKNOWN_DIFFICULTY if d is None else d) > 0:
        return f"{keeping}, as the paper does for easy tasks with a high baseline"
    return (
        f"{keeping}, from the history fit (the paper uses one only for easy tasks with a high "
        "baseline)"
    )


def schedule_sentence(advice: ScheduleAdvice) -> str:
    """Why this delta schedule: the band's contests, or that there were none."""
    tally = advice.tallies[advice.band]
    if not advice.contested:
        return (
            f"No search of {article(advice.band)} {advice.band} task in the store compared delta "
            "schedules, so the schedule is the paper's: delta fixed after the warm-up."
        )
    wins = ", ".join(f"{name} {len(won)}" for name, won in sorted(tally.wins.items()))
    searches = counted(tally.contests, "search")
    return (
        f"Of the {searches} of {advice.band} tasks that compared delta "
        f"schedules, the best AS trial used: {wins}; the schedule recommended is "
        f"{describe_schedule(advice.schedule, advice.params)}."
    )


def article(word: str) -> str:
    """``an`` before a vowel (``an easy task``), else ``a``."""
    return "an" if word[:1].lower() in "aeiou" else "a"


def describe_schedule(name: str, params: dict[str, float]) -> str:
    """``ema (delta_momentum 0.9, delta_min 0.05)``; ``fixed`` alone."""
    if not params:
        return name
    return f"{name} ({', '.join(f'{k} {v:g}' for k, v in params.items())})"


def _paper_context(dataset: str) -> str:
    """What the paper itself said and used for a registry dataset."""
    from astune.data.registry import REGISTRY

    spec = REGISTRY.get(dataset)
    if spec is None or spec.delta is None:
        return ""
    said = f"calls {dataset} {spec.difficulty_hint} and " if spec.difficulty_hint else ""
    r = spec.warmup_ratio or 0.0
    return f" (the paper {said}trained {dataset} with delta {spec.delta:.2f}, r {r:.2f})"


# ------------------------------------------------------------------------------------ output
def format_recommendation(rec: Recommendation) -> str:
    """The CLI's report."""
    lines = [
        f"dataset:     {rec.dataset}",
        f"delta:       {rec.delta:.2f}  (range {rec.low:.2f} - {rec.high:.2f})",
        f"r:           {rec.warmup_ratio:.2f}  (delta = 1 for the first r of training)",
        f"difficulty:  {rec.difficulty.describe()}",
    ]
    lines += [f"  {e.describe()}" for e in rec.difficulty.evidence]
    lines += [f"  note: {n}" for n in rec.difficulty.notes]
    prior_share = 1 - rec.history_weight
    searches = counted(len(rec.points), "search")
    lines.append(
        f"history:     {searches} with AS-Softmax trials; "
        f"prior weight {prior_share:.2f}, fit weight {rec.history_weight:.2f}"
    )
    lines += [
        f"  {p.experiment}: {p.dataset}, difficulty {p.difficulty:.2f}, best delta "
        f"{p.delta:.2f}, r {p.warmup_ratio:.2f}, {p.schedule} ({p.n_trials} AS trials"
        + (f"; confirmed over {p.confirmed_seeds} seeds)" if p.confirmed_seeds else ")")
        for p in rec.points
    ]
    lines += [f"  note: {n}" for n in rec.notes]
    lines += schedule_lines(rec.schedule)
    if rec.transfer is not None:
        lines += describe_transfer(rec.transfer)
    if rec.backbone is not None:
        lines += describe_portfolio(rec.portfolio, rec.backbone)
        lines += [rec.portfolio_scale] if rec.portfolio_scale else []
    lines.append("rationale:")
    lines.append(textwrap.fill(rec.rationale, 99, initial_indent="  ", subsequent_indent="  "))
    return "\n".join(lines)


def schedule_lines(advice: ScheduleAdvice) -> list[str]:
    """The report's schedule, its tally by band and the band's delta trajectories."""
    tally = advice.tallies[advice.band]
    won = (
        f"won {len(tally.wins[advice.schedule])} of {tally.contests} {advice.band}-task "
        "searches that compared schedules"
        if advice.contested
        else f"no {advice.band}-task search compared schedules"
    )
    lines = [f"schedule:    {describe_schedule(advice.schedule, advice.params)}  ({won})"]
    lines.append("  by band: " + "; ".join(_tally_text(t) for t in advice.tallies.values()))
    if advice.trajectories or advice.notes:
        at = "/".join(f"{f:.0%}" for f in FRACTIONS)
        lines.append(f"trajectory:  delta on {advice.band} tasks at {at} of training")
    for t in advice.trajectories:
        how = (
            f"ema replayed on fixed delta {t.start:.2f}" if t.replayed else f"{t.schedule}, as run"
        )
        lines.append(f"  {t.experiment} ({how}): " + " ".join(f"{d:.2f}" for d in t.deltas))
    if len(advice.trajectories) > 1:
        median = median_trajectory(advice.trajectories)
        lines.append("  median: " + " ".join(f"{d:.2f}" for d in median))
    lines += [f"  note: {n}" for n in advice.notes]
    return lines


def _tally_text(tally: ScheduleTally) -> str:
    wins = ", ".join(f"{name} {len(won)}" for name, won in sorted(tally.wins.items()))
    alone = f"{tally.single_schedule} tried one schedule" if tally.single_schedule else ""
    return f"{tally.band}: " + ("; ".join(p for p in (wins, alone) if p) or "no search")
