"""Counts in console lines: a word agreeing with its number."""

from __future__ import annotations


def plural(count: int, word: str, *, verb: bool = False, many: str | None = None) -> str:
    """``word`` agreeing with ``count``: a noun's plural (``trials``; ``many`` where it is not
    the word and an s: ``searches``), or a verb's third person singular (``runs``)."""
    if many is not None and count != 1:
        return many
    return word + ("s" if (count == 1) == verb else "")


def counted(count: int, noun: str, *, many: str | None = None) -> str:
    """``count`` and ``noun`` agreeing with it: ``1 layer``, ``1,000 training rows``, ``2
    searches`` (``many``: the plural, where it is not the noun and an s)."""
    return f"{count:,} {plural(count, noun, many=many)}"
