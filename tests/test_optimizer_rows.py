"""Packing an optimizer's moment tensors by their nonzero rows for a checkpoint, and back."""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn

from astune.training.optimizer_rows import PACKED_ROWS, pack_rows, unpack_rows

VOCAB, DIM = 1000, 8


def reference_rows(tensor: torch.Tensor) -> list[int]:
    """The rows of ``tensor`` holding any nonzero value, one row at a time."""
    return [i for i in range(tensor.shape[0]) if bool(tensor[i].ne(0).any())]


def embedding_trained_on(ids: torch.Tensor) -> tuple[nn.Embedding, torch.optim.AdamW]:
    """An embedding table after two AdamW steps on batches of ``ids``; row 0 is padding."""
    torch.manual_seed(0)
    table = nn.Embedding(VOCAB, DIM, padding_idx=0)
    optimizer = torch.optim.AdamW(table.parameters(), lr=1e-2, weight_decay=0.1)
    for batch in ids:
        table(batch).square().sum().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return table, optimizer


IDS = torch.tensor([[[0, 5, 7, 7], [999, 0, 0, 0]], [[5, 12, 0, 0], [3, 3, 0, 0]]])


def test_the_moments_keep_exactly_the_rows_a_batch_touched() -> None:
    _, optimizer = embedding_trained_on(IDS)
    state = optimizer.state_dict()
    packed = pack_rows(state)["state"][0]
    for name in ("exp_avg", "exp_avg_sq"):
        assert packed[name][PACKED_ROWS].tolist() == reference_rows(state["state"][0][name])
        assert packed[name][PACKED_ROWS].tolist() == [3, 5, 7, 12, 999]  # not padding row 0
        assert packed[name]["values"].shape == (5, DIM)
    assert torch.equal(packed["step"], state["state"][0]["step"])


def test_a_run_resumed_from_packed_moments_steps_exactly_as_the_original() -> None:
    table, optimizer = embedding_trained_on(IDS)
    buffer = io.BytesIO()  # through a file, as a checkpoint: no tensor shared with the optimizer
    torch.save(pack_rows(optimizer.state_dict()), buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)
    twin = nn.Embedding(VOCAB, DIM, padding_idx=0)
    twin.load_state_dict(table.state_dict())
    resumed = torch.optim.AdamW(twin.parameters(), lr=1e-2, weight_decay=0.1)
    resumed.load_state_dict(unpack_rows(saved))
    for module, opt in ((table, optimizer), (twin, resumed)):
        module(torch.tensor([[7, 8, 0]])).square().sum().backward()
        opt.step()
    assert torch.equal(table.weight, twin.weight)
    for name in ("exp_avg", "exp_avg_sq"):
        assert torch.equal(optimizer.state[table.weight][name], resumed.state[twin.weight][name])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_unpacking_gives_back_every_tensor_bit_for_bit(dtype) -> None:
    sparse = torch.zeros(50, 3, 2, dtype=dtype)
    sparse[[4, 41]] = torch.randn(2, 3, 2).to(dtype)
    dense = torch.randn(6, 4).to(dtype)
    state = {
        "state": {0: {"step": torch.tensor(3.0), "m": sparse, "v": dense, "b": torch.ones(9)}},
        "param_groups": [{"lr": 0.1, "params": [0]}],
    }
    packed = pack_rows(state)
    assert packed["state"][0]["m"][PACKED_ROWS].tolist() == [4, 41]
    assert packed["state"][0]["v"] is dense  # more than half its rows hold values: kept
    back = unpack_rows(packed)["state"][0]
    assert back["m"].dtype == dtype and torch.equal(back["m"], sparse)
    assert all(torch.equal(back[k], state["state"][0][k]) for k in ("step", "v", "b"))
    assert packed["param_groups"] == state["param_groups"]


def test_an_unpacked_state_from_an_older_checkpoint_loads_as_it_is() -> None:
    _, optimizer = embedding_trained_on(IDS)
    state = optimizer.state_dict()
    assert unpack_rows(state)["state"][0]["exp_avg"] is state["state"][0]["exp_avg"]
    all_zero = {"state": {0: {"m": torch.zeros(10, 2)}}, "param_groups": []}
    restored = unpack_rows(pack_rows(all_zero))["state"][0]["m"]
    assert torch.equal(restored, torch.zeros(10, 2))
