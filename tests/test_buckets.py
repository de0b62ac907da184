"""Micro-batches grouped by length (``length_window``): against a reference written here, on the
real lengths of SST-5, inside AS-Skip's plan, and refused for images. A grouped skipping run
resumed mid-epoch: tests/test_skip.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from training_runs import sst5_slice

from astune.config import TrainConfig
from astune.data.media_encoding import encode_media
from astune.training import Run
from astune.training.batches import epoch_order
from astune.training.buckets import LENGTH_SEED_STRIDE, group_by_length
from astune.training.leave_out import SkipBatches, batch_source
from astune.training.progress import Position

BASE = dict(backbone="minilm", num_layers=1, max_length=64, seed=3, weight_decay=0.0)


@pytest.fixture(scope="module")
def sst5(data_dir):
    return sst5_slice(BASE, data_dir, n_train=160, n_eval=48)


def reference_grouping(samples, lengths, size, window, seed, epoch):
    """Plain Python: per window of ``window * size`` samples, a stable sort by length, cut into
    micro-batches; the full ones in the order of the seeded permutation, a short one last."""
    gen = torch.Generator().manual_seed(seed * LENGTH_SEED_STRIDE + epoch)
    out = []
    for lo in range(0, len(samples), window * size):
        chunk = samples[lo : lo + window * size]
        ranked = sorted(chunk, key=lambda i: lengths[i])  # sorted() is stable
        batches = [ranked[b : b + size] for b in range(0, len(ranked), size)]
        full = [b for b in batches if len(b) == size]
        for i in torch.randperm(len(full), generator=gen).tolist():
            out += full[i]
        out += [i for b in batches[len(full) :] for i in b]
    return out


@pytest.mark.parametrize("size, window, n", [(4, 3, 50), (16, 8, 160), (5, 1, 23), (8, 100, 40)])
def test_grouping_equals_the_reference_and_keeps_every_sample_once(size, window, n):
    gen = torch.Generator().manual_seed(n)
    lengths = torch.randint(3, 60, (n,), generator=gen)
    samples = torch.randperm(n, generator=gen)
    got = group_by_length(samples, lengths, batch_size=size, window=window, seed=2, epoch=5)
    expected = reference_grouping(samples.tolist(), lengths.tolist(), size, window, 2, 5)
    assert got.tolist() == expected
    assert sorted(got.tolist()) == list(range(n))
    for lo in range(0, n, window * size):  # each window keeps its own samples
        assert sorted(got[lo : lo + window * size].tolist()) == sorted(
            samples[lo : lo + window * size].tolist()
        )


def test_window_zero_leaves_the_order_alone():
    samples = torch.randperm(30)
    same = group_by_length(samples, torch.arange(30), batch_size=4, window=0, seed=0, epoch=0)
    assert same is samples


def test_grouping_cuts_the_padding_of_real_sst5_batches(sst5):
    lengths = sst5.splits["train"].lengths()
    order = epoch_order(len(lengths), seed=3, epoch=0)

    def padded_tokens(samples: torch.Tensor) -> int:  # a batch pads to its longest sample
        return sum(int(lengths[b].max()) * len(b) for b in samples.split(16))

    grouped = group_by_length(order, lengths, batch_size=16, window=10, seed=3, epoch=0)
    assert padded_tokens(grouped) < 0.85 * padded_tokens(order)  # real text: much less padding
    assert int(lengths.sum()) <= padded_tokens(grouped)


def test_as_skip_regroups_only_the_kept_samples_and_keeps_its_spans(sst5):
    def skip_source(window: int) -> SkipBatches:
        config = TrainConfig(
            "sst5", as_skip=True, skip_keep=0.0, skip_anneal=0.0, length_window=window
        )
        source = batch_source(
            sst5,
            batch_size=8,
            seed=3,
            config=config,
            total_samples=10 * 160,
            device=torch.device("cpu"),
            length_window=window,
        )
        assert isinstance(source, SkipBatches)
        source.skip.zero[::3] = True  # a third of the samples known to have zero loss
        return source

    plain = list(skip_source(0).epoch(Position(epoch=1)))
    grouped = list(skip_source(4).epoch(Position(epoch=1)))
    assert [v.visited for _, v in grouped] == [v.visited for _, v in plain]
    for (_, a), (_, b) in zip(plain, grouped):
        assert torch.equal(a.skipped, b.skipped)
    kept = sorted(i for _, v in plain for i in v.index.tolist())
    assert sorted(i for _, v in grouped for i in v.index.tolist()) == kept
    assert all(i % 3 != 0 for i in kept)  # the zero-loss samples stay skipped
    assert [v.index.tolist() for _, v in grouped] != [v.index.tolist() for _, v in plain]


def test_grouping_images_by_length_is_refused_in_one_line(digits_dir, tiny_vit_dir, tmp_path):
    from astune.backbones import load_processor
    from astune.data import load_dataset_splits

    data = encode_media(load_dataset_splits(digits_dir), load_processor(str(tiny_vit_dir), "image"))
    config = TrainConfig(
        str(digits_dir),
        backbone=str(tiny_vit_dir),
        length_window=4,
        epochs=1,
        batch_size=8,
        lr=1e-3,
        output_dir=str(Path(tmp_path, "run")),
    )
    with pytest.raises(ValueError, match="length_window groups text by length") as err:
        Run(config, data=data)
    assert "\n" not in str(err.value) and "use length_window 0" in str(err.value)
