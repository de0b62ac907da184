"""The console's grammar (astune/_text.py): a count and its noun agree, and no message hedges
with "trial(s)" or "search(es)"."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import astune
from astune._text import counted, listed, plural, value_text


def test_a_count_and_its_word_agree():
    assert [counted(n, "layer") for n in (0, 1, 2, 1000)] == [
        "0 layers", "1 layer", "2 layers", "1,000 layers"
    ]  # fmt: skip
    assert [counted(n, "search") for n in (1, 3)] == ["1 search", "3 searches"]
    assert [counted(2, word) for word in ("box", "pass", "match", "wish")] == [
        "2 boxes", "2 passes", "2 matches", "2 wishes"
    ]  # fmt: skip
    assert [plural(n, "search", verb=True) for n in (1, 2)] == ["searches", "search"]
    assert [plural(n, "run", verb=True) for n in (1, 2)] == ["runs", "run"]
    assert [plural(n, "become", verb=True) for n in (1, 2)] == ["becomes", "become"]


def test_a_value_reads_as_written():
    assert [value_text(v) for v in (1.0, 3e-4, 16, False, None)] == [
        "1", "0.0003", "16", "False", "None"
    ]  # fmt: skip


def test_a_list_reads_as_a_sentence():
    assert [listed(["a", "b", "c"][:n]) for n in range(4)] == ["", "a", "a and b", "a, b and c"]


def test_no_message_hedges_its_plural():
    """Every string in the package (f-string parts too): "word(s)" and "word(es)" are
    :func:`counted`'s to write."""
    hedged = re.compile(r"\w\((e?s)\)")
    found = []
    for path in Path(astune.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if hedged.search(text) and not _is_docstring_like(text):
                    found.append(f"{path.name}:{node.lineno}: {text.strip()[:60]}")
    assert found == []


def _is_docstring_like(text: str) -> bool:
    """A docstring or comment-like block (several lines) may name "the seed(s)" in prose."""
    return "\n" in text.strip()
