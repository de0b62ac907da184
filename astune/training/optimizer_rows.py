"""An optimizer's state for a checkpoint with its mostly-zero moment tensors stored by their
nonzero rows, and back, exactly.

AdamW keeps two moments per parameter. A row of the word-embedding table that no batch has
touched never had a gradient, so its moments are exactly zero: fine-tuning on a few thousand
sentences touches a few percent of a 30k vocabulary, and the dense moments of that one table
are most of a checkpoint (94 of 166 MB for MiniLM cut to one layer). Packing keeps the rows
that are not all zero, with their indices; unpacking puts them back into zeros. Nothing is
rounded: a resumed run computes what the uninterrupted one computes.
"""

from __future__ import annotations

from typing import Any

import torch

PACKED_ROWS = "packed_rows"
"""The key that marks a packed tensor: ``{PACKED_ROWS: (K,) int64, "values": (K, ...),
"shape": [N, ...]}``, the K rows of an (N, ...) tensor that hold a nonzero value."""

PACK_BELOW = 0.5
"""Pack a tensor when fewer than this share of its rows hold a nonzero value."""


def pack_rows(state: dict[str, Any]) -> dict[str, Any]:
    """``optimizer.state_dict()`` with each per-parameter tensor of 2 or more dimensions whose
    nonzero rows are fewer than :data:`PACK_BELOW` stored as those rows. The input is left as
    it is (the optimizer's own tensors are not copied unless packed)."""
    packed = {
        param: {name: _packed(value) for name, value in moments.items()}
        for param, moments in state["state"].items()
    }
    return {**state, "state": packed}


def unpack_rows(state: dict[str, Any]) -> dict[str, Any]:
    """The optimizer state that :func:`pack_rows` packed, dense again; a state written without
    packing (an older checkpoint) comes back as it is."""
    dense = {
        param: {name: _dense(value) for name, value in moments.items()}
        for param, moments in state["state"].items()
    }
    return {**state, "state": dense}


def _packed(value: Any) -> Any:
    if not isinstance(value, torch.Tensor) or value.ndim < 2 or value.shape[0] == 0:
        return value
    rows = value.reshape(value.shape[0], -1).ne(0).any(dim=1).nonzero().squeeze(1)
    if rows.numel() >= PACK_BELOW * value.shape[0]:
        return value
    return {PACKED_ROWS: rows, "values": value[rows], "shape": list(value.shape)}


def _dense(value: Any) -> Any:
    if not (isinstance(value, dict) and PACKED_ROWS in value):
        return value
    values = value["values"]
    out = values.new_zeros(value["shape"])
    out[value[PACKED_ROWS]] = values
    return out
