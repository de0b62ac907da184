"""Console grammar: a word agreeing with its number, a list as a sentence, a parameter as a flag,
a value as written."""

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


def listed(items: list[str]) -> str:
    """``items`` as a sentence lists them: ``a``, ``a and b``, ``a, b and c``."""
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def as_flag(name: str) -> str:
    """A parameter as a command line spells it: ``num_samples`` -> ``--num-samples``."""
    return "--" + name.replace("_", "-")


def value_text(value: object) -> str:
    """A config value as a person writes it: ``1`` for ``1.0``, ``0.0003``, ``False``."""
    return f"{value:g}" if isinstance(value, float) else str(value)
