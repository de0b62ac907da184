"""A classification head that starts from the backbone's word embeddings (spelling correction:
one class per candidate character), not at random."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from astune.backbones.models import load_tokenizer

if TYPE_CHECKING:
    from torch import nn


def init_head_from_embeddings(
    model: nn.Module, *, backbone: str, candidates: Sequence[str]
) -> tuple[int, int]:
    """Start the classification head over ``candidates`` (spelling correction: one class per
    candidate character) from the backbone's word embeddings of those characters, which
    BERT-style models tie to their masked-LM output layer (the layer's transform and bias are
    not part of a classification model: the bias starts at 0). A candidate the tokenizer maps
    to its unknown token keeps its random row. Returns (rows copied, rows left random)."""
    import torch

    head = _head_linear(model, len(candidates))
    tokenizer = load_tokenizer(backbone)
    ids = tokenizer.convert_tokens_to_ids(list(candidates))
    unknown = tokenizer.unk_token_id
    rows = [(row, i) for row, i in enumerate(ids) if i is not None and i != unknown]
    if rows:
        embeddings = model.get_input_embeddings().weight
        with torch.no_grad():
            index = torch.tensor([row for row, _ in rows], device=head.weight.device)
            token = torch.tensor([i for _, i in rows], device=embeddings.device)
            head.weight[index] = embeddings[token].to(head.weight)
            if head.bias is not None:
                head.bias.zero_()
    return len(rows), len(candidates) - len(rows)


def _head_linear(model: nn.Module, num_labels: int) -> nn.Linear:
    """The model's classification layer: its last Linear named ``classifier`` with
    ``num_labels`` outputs."""
    from torch import nn as torch_nn

    found = [
        m
        for name, m in model.named_modules()
        if isinstance(m, torch_nn.Linear)
        and name.split(".")[-1] == "classifier"
        and m.out_features == num_labels
    ]
    if not found:
        raise ValueError(
            f"{type(model).__name__} has no Linear 'classifier' with {num_labels} outputs, so "
            "its head cannot start from the embeddings; train it with fresh_head."
        )
    return found[-1]
