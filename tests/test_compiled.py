"""``compile``: the model through ``torch.compile`` (inductor runs on the CPU) trains as the
eager model does, step for step within float tolerance; a run written compiled resumes eager;
the padding a card's CUDA graphs need changes nothing of the batch's own rows and tokens.

The card's half (CUDA graphs, ``mode="reduce-overhead"``) runs in ``-m gpu`` and in
benchmarks/gpu_suite; the padding it relies on is tested here on the eager model.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from training_runs import LOOP_BASE, Snapshots, run_config, sst5_slice

from astune.backbones.models import build_model
from astune.data.encoded import load_encoded
from astune.training import Run, fit
from astune.training.compiled import length_bucket, padded
from astune.training.compute import forward

LOSS_KEYS = ("train_loss", "masked_ratio", "objective", "val_loss", "accum_steps")
# dropout 0: compiled dropout draws other masks than eager dropout (same distribution). delta
# 0.1 at lr 2e-3 masks: up to half the samples in the last evaluations, and AS-Speed's
# accumulation grows from 2 to 3, so both paths are compared on steps that mask.
RUN = dict(
    max_train_samples=160, max_eval_samples=32, epochs=3, batch_size=4, eval_every=24,
    loss="as_softmax", delta=0.1, lr=2e-3, as_speed=True, lam=1.5, max_accum_steps=3,
    dropout=0.0, device="cpu", checkpoint_every="eval",
)  # fmt: skip


@pytest.fixture(scope="module")
def sst5(data_dir):
    return sst5_slice(LOOP_BASE, data_dir, 160, 32)


@pytest.fixture(scope="module")
def eager_and_compiled(tmp_path_factory, data_dir, sst5):
    """The same run eager and compiled (its snapshots kept, to resume from)."""
    root = tmp_path_factory.mktemp("compiled")
    runs = {}
    for compiled in (False, True):
        name = "compiled" if compiled else "eager"
        config = run_config(LOOP_BASE, root, name, data_dir, **RUN, compile=compiled)
        snapshots = Snapshots(root / f"{name}-snapshots")
        records: list[dict] = []

        def keep(record, folder, snapshots=snapshots, records=records):
            records.append(record)
            snapshots(record, folder)

        runs[name] = (config, fit(config, data=sst5, callback=keep), records, snapshots)
    return runs


@pytest.mark.slow
def test_a_compiled_run_trains_as_the_eager_one(eager_and_compiled):
    _, eager_final, eager, _ = eager_and_compiled["eager"]
    _, compiled_final, compiled, _ = eager_and_compiled["compiled"]
    assert eager_final["samples_computed"] // RUN["batch_size"] == 120  # micro-batches
    assert max(r["masked_ratio"] for r in eager) > 0.3 and eager[-1]["accum_steps"] == 3
    assert [r["step"] for r in compiled] == [r["step"] for r in eager]
    for key in LOSS_KEYS:
        got, expected = [r[key] for r in compiled], [r[key] for r in eager]
        torch.testing.assert_close(got, expected, rtol=2e-3, atol=1e-4, msg=key)
    assert compiled_final["compile_seconds"] > 0 and "compile_seconds" not in eager_final


@pytest.mark.slow
def test_a_run_written_compiled_resumes_eager(eager_and_compiled, sst5):
    config, final, _, snapshots = eager_and_compiled["compiled"]
    _, resumed = snapshots.resume(dataclasses.replace(config, compile=False), 2, sst5)
    for key in ("val_accuracy", "test_accuracy", "optimizer_steps"):
        torch.testing.assert_close(resumed[key], final[key], rtol=2e-3, atol=1e-4, msg=key)


def test_a_compiled_run_refuses_a_bad_value(tmp_path, data_dir):
    with pytest.raises(ValueError, match=r"compile must be one of False, True, but got 'yes'"):
        run_config(LOOP_BASE, tmp_path, "bad", data_dir, compile="yes").validate()


@pytest.mark.parametrize("length, bucket", [(5, 16), (16, 16), (17, 32), (100, 128), (130, 130)])
def test_lengths_fall_in_a_few_buckets(length, bucket):
    assert length_bucket(length, max_length=128) == bucket  # never shorter than the batch


@pytest.mark.parametrize("dataset", ["sst5", "conll2003", "go_emotions"])
def test_padding_to_a_bucket_leaves_the_batch_own_logits_alone(dataset, data_dir, tmp_path):
    config = run_config(LOOP_BASE, tmp_path, dataset, data_dir, dataset=dataset,
                        max_train_samples=16, max_eval_samples=8)  # fmt: skip
    data = load_encoded(config)
    torch.manual_seed(0)
    model = build_model("minilm", task=data.spec.task, num_labels=data.spec.num_labels,
                        num_layers=1).eval()  # fmt: skip
    batch = data.collate("train", torch.arange(5))
    rows, length = batch["input_ids"].shape
    grown = padded(batch, rows=8, length=length_bucket(length, 128) + 16)
    cpu = torch.device("cpu")
    with torch.no_grad():
        plain, labels = forward(model, batch, device=cpu, dtype=None)
        logits, padded_labels = forward(model, grown, device=cpu, dtype=None)
    assert torch.isfinite(logits).all()  # padded rows attend to their first token
    cut = logits[:rows, :length] if logits.dim() == 3 else logits[:rows]
    torch.testing.assert_close(cut, plain, rtol=1e-4, atol=1e-5)
    token = labels.dim() == 2 and not labels.is_floating_point()
    assert torch.equal(padded_labels[:rows, :length] if token else padded_labels[:rows], labels)


PADDED_LOSSES = {
    "sst5": "as_softmax",
    "conll2003": "as_softmax",
    "go_emotions": "multilabel_as_softmax",
}


@pytest.mark.parametrize("dataset", sorted(PADDED_LOSSES))
def test_padded_rows_weigh_nothing_in_the_step(dataset, data_dir, tmp_path):
    """The card's padding through the step's own function (run eagerly here): the loss, its
    gradient, counts, margins and AS-Skip's rows of the batch's own rows are the unpadded ones."""
    from astune.losses.registry import build_loss
    from astune.training.compiled import CompiledStep
    from astune.training.compute import loss_counts
    from astune.training.evaluate import p_margin_rows

    config = run_config(LOOP_BASE, tmp_path, dataset, data_dir, dataset=dataset,
                        max_train_samples=16, max_eval_samples=8)  # fmt: skip
    data = load_encoded(config)
    torch.manual_seed(0)
    model = build_model("minilm", task=data.spec.task, num_labels=data.spec.num_labels,
                        num_layers=1, dropout=0.0)  # fmt: skip
    loss_fn = build_loss(PADDED_LOSSES[dataset], reduction="none", delta=0.3, kernel="torch")
    cpu = torch.device("cpu")
    step = CompiledStep(model, loss_fn, device=cpu, dtype=None, batch_size=8, max_length=128,
                        margins=True, rows=True)  # fmt: skip
    step.cuda, step.compiled = True, step._forward_and_loss  # the card's padding, uncompiled
    batch, weight = data.collate("train", torch.arange(5)), torch.rand(5) + 0.5
    out = step(batch, weight=weight)
    out.computed.loss.backward()
    padded_grad = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    logits, labels = forward(model, batch, device=cpu, dtype=None)
    plain = loss_counts(loss_fn, logits, labels, weight=weight)
    plain.loss.backward()
    close = dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.computed.loss, plain.loss, **close)
    assert torch.equal(out.computed.counts, plain.counts)
    torch.testing.assert_close(out.computed.sample_losses, plain.sample_losses, **close)
    width = labels.shape[1] if data.spec.task == "token" else 1  # a token row per token
    got_stats, plain_stats = out.computed.stats, plain.stats
    for got, expected in zip(got_stats.rows(), plain_stats.rows()):
        assert torch.equal(got.reshape(5, -1)[:, :width].reshape(-1), expected)
    headroom = got_stats.headroom_rows().reshape(5, -1)[:, :width].reshape(-1)
    torch.testing.assert_close(headroom, plain_stats.headroom_rows(), **close)
    margins = p_margin_rows(logits.detach(), labels)
    expected_margins = (torch.where(margins[1], margins[0], 0.0).sum(), margins[1].sum())
    torch.testing.assert_close(
        out.margins, expected_margins, rtol=1e-4, atol=1e-4, check_dtype=False
    )
    for got, expected in zip(padded_grad, (p.grad for p in model.parameters())):
        torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-5)


def test_a_compiled_run_passes_its_forward_through_the_compiled_model(tmp_path, data_dir, sst5):
    config = run_config(LOOP_BASE, tmp_path, "c", data_dir, **dict(RUN, compile=True))
    run = Run(config, data=sst5)
    assert run.compiled is not None and run.compiled.model is run.model
    assert not isinstance(run.model, torch._dynamo.eval_frame.OptimizedModule)


def test_the_flag_reaches_a_run_and_every_trial():
    from astune.cli.parser import build_parser
    from astune.cli.train import train_config
    from astune.tuning.settings import settings_from_args

    parser = build_parser()
    args = parser.parse_args(["train", "--dataset", "sst5", "--compile", "--lr", "1e-4"])
    assert train_config(args).compile is True
    args = parser.parse_args(["train", "--dataset", "sst5", "--lr", "1e-4"])
    assert train_config(args).compile is False
    search = settings_from_args(parser.parse_args(["search", "--dataset", "sst5", "--compile"]))
    assert search.compile is True and "compile" in search.given


@pytest.mark.gpu
@pytest.mark.parametrize("loss", ["softmax", "as_softmax"])
def test_on_cuda_the_graphed_run_trains_as_the_eager_one(loss, tmp_path, data_dir, sst5):
    """CUDA graphs over padded batches (the fused kernel after them for AS-Softmax), fp32."""
    finals, records = {}, {}
    for compiled in (False, True):
        name = f"{loss}-{compiled}"
        config = run_config(
            LOOP_BASE, tmp_path, name, data_dir,
            **dict(RUN, loss=loss, as_speed=loss != "softmax", device="cuda", precision="fp32",
                   compile=compiled),
        )  # fmt: skip
        kept: list[dict] = []
        finals[compiled] = fit(config, data=sst5, callback=lambda r, _f, kept=kept: kept.append(r))
        records[compiled] = kept
    for key in LOSS_KEYS:
        got, expected = [r[key] for r in records[True]], [r[key] for r in records[False]]
        torch.testing.assert_close(got, expected, rtol=5e-3, atol=1e-4, msg=key)
    assert finals[True]["compile_seconds"] > 0


# sparsemax and 1.5-entmax: entmax's own autograd functions do not trace (a graph break there)
TRACED_LOSSES = [
    *("softmax", "t_softmax", "label_smoothing", "sparse_softmax", "am_softmax", "as_variant"),
    *("as_softmax", "multilabel_softmax", "multilabel_as_softmax"),
]


@pytest.mark.slow
@pytest.mark.parametrize("name", TRACED_LOSSES)
def test_the_loss_with_its_counts_compiles_in_one_graph(name):
    """``loss_counts`` of each loss (the AS losses on torch's path) traces with
    ``fullgraph=True`` (no graph break: the host-only checks step aside while torch traces)
    and gives eager's loss, counts and gradient."""
    from astune.losses.registry import build_loss
    from astune.training.compute import loss_counts

    torch._dynamo.reset()
    kernel = {"kernel": "torch"} if name == "as_softmax" else {}
    loss_fn = build_loss(name, reduction="none", **kernel)
    torch.manual_seed(0)
    logits = (3 * torch.randn(8, 5)).requires_grad_()
    multi = name.startswith("multilabel")
    labels = (torch.rand(8, 5) > 0.6).float() if multi else torch.randint(0, 5, (8,))
    if not multi:
        labels[1] = -100

    def step(logits, labels):
        computed = loss_counts(loss_fn, logits, labels)
        return computed.loss, computed.counts, computed.sample_losses

    compiled = torch.compile(step, fullgraph=True)(logits, labels)
    compiled[0].backward()
    grad, logits.grad = logits.grad, None
    eager = step(logits, labels)
    eager[0].backward()
    for got, expected in zip(compiled, eager):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad, logits.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", ["as_softmax", "multilabel_as_softmax"])
def test_one_graph_serves_every_delta(name):
    """delta reaches the traced loss as a tensor: a warm-up's 1.0 and an adaptive schedule's
    every value run the first graph, with eager's loss at each."""
    from torch._dynamo.testing import CompileCounter

    from astune.losses.registry import build_loss
    from astune.training.compute import loss_counts

    torch._dynamo.reset()
    loss_fn = build_loss(name, reduction="none", kernel="torch")
    torch.manual_seed(0)
    logits = 3 * torch.randn(16, 6)
    multi = name.startswith("multilabel")
    labels = (torch.rand(16, 6) > 0.6).float() if multi else torch.randint(0, 6, (16,))
    counter = CompileCounter()
    step = torch.compile(lambda x, y: loss_counts(loss_fn, x, y)[:2], backend=counter)
    for delta in (1.0, 0.5, 0.4, 0.3, 0.31, 0.2, 0.25, 0.9):
        loss_fn.set_delta(delta)
        got, eager = step(logits, labels), loss_counts(loss_fn, logits, labels)[:2]
        torch.testing.assert_close(got[0], eager[0], rtol=1e-5, atol=1e-6)
        assert torch.equal(got[1], eager[1]), delta
    assert counter.frame_count == 1
