"""Counts in console lines: a word agreeing with its number."""

from __future__ import annotations

SIBILANT_ENDINGS = ("s", "x", "z", "ch", "sh")
"""A word ending so takes "es", not "s": ``searches``, ``passes``."""


def plural(count: int, word: str, *, verb: bool = False) -> str:
    """``word`` agreeing with ``count``: a noun's plural (``trials``, ``searches``), or a verb's
    third person singular (``runs``)."""
    if (count == 1) != verb:
        return word
    return word + ("es" if word.endswith(SIBILANT_ENDINGS) else "s")


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun`` agreeing with it: ``1 layer``, ``1,000 training rows``, ``2
    searches``."""
    return f"{count:,} {plural(count, noun)}"
