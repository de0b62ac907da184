"""Counts in console lines: a word agreeing with its number."""

from __future__ import annotations


def plural(count: int, word: str, *, verb: bool = False) -> str:
    """``word`` agreeing with ``count``: a noun's plural (``trials``), or a verb's third person
    singular (``runs``)."""
    return word + ("s" if (count == 1) == verb else "")


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun`` agreeing with it: ``1 layer``, ``1,000 training rows``."""
    return f"{count:,} {plural(count, noun)}"
