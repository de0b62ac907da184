"""Evaluation of a model on a split: the dataset's metrics, the loss per sample and the
histogram of p_margins (the paper's analysis). Takes a model, not a run: the loop calls it."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import torch
from torch import Tensor, nn

from astune.losses.as_base import MaskStats, masked_sums
from astune.training.compute import forward, loss_counts

if TYPE_CHECKING:
    from astune.data.media_encoding import TrainData

MARGIN_EDGES = torch.linspace(-1.0, 1.0, 41)
EVAL_BATCH_MIN = 32
"""Evaluation batches hold at least this many samples (no gradients: larger is cheaper)."""


class Evaluation(NamedTuple):
    """``metrics`` by name, ``loss``: the mean loss per counted row, ``margins``: the
    p_margin histogram (:func:`margin_histogram`)."""

    metrics: dict[str, float]
    loss: float
    margins: dict[str, list]


def p_margins(logits: Tensor, labels: Tensor) -> Tensor:
    """``p_t - max_{i != t} p_i`` per active row (single-label ``(B, C)``, token ``(B, T, C)``);
    multi-label (float 0/1 ``labels``): the smallest positive minus the largest negative
    probability, for rows that have both. Softmax over classes, as AS-Softmax's criterion.
    Boolean indexing: for evaluation; a training step takes :func:`p_margin_rows`' sums."""
    values, valid = p_margin_rows(logits, labels)
    return values[valid]


def p_margin_rows(logits: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """:func:`p_margins` of every row ``(M,)`` with the rows it keeps (bool ``(M,)``), on the
    logits' device without a sync."""
    # float32: margins near 0 decide the histogram's bin; bf16 logits would blur them.
    probs = torch.softmax(logits.float(), dim=-1).reshape(-1, logits.shape[-1])
    if labels.is_floating_point():
        positive = labels.reshape(probs.shape) > 0.5
        both = positive.any(dim=1) & (~positive).any(dim=1)
        low_pos = probs.masked_fill(~positive, 2.0).amin(dim=1)
        high_neg = probs.masked_fill(positive, -1.0).amax(dim=1)
        return low_pos - high_neg, both
    flat = labels.reshape(-1)
    active = flat != -100
    target = flat.masked_fill(~active, 0).unsqueeze(1)
    p_target = probs.gather(1, target).squeeze(1)
    return p_target - probs.scatter(1, target, -1.0).amax(dim=1), active


def step_margin_sums(
    stats: MaskStats | None, logits: Tensor, labels: Tensor
) -> tuple[Tensor, Tensor]:
    """A training step's p-margins as ``(sum, count)`` device tensors, without a sync: those
    the loss's own pass computed (:meth:`MaskStats.margin_sums`), else from the logits."""
    sums = stats.margin_sums() if stats is not None else None
    return sums if sums is not None else masked_sums(*p_margin_rows(logits.detach(), labels))


def margin_histogram(margins: Tensor) -> dict[str, list]:
    """40 equal bins over [-1, 1] (the p_margin figure of the paper's analysis)."""
    counts = torch.histc(margins.clamp(-1.0, 1.0), bins=40, min=-1.0, max=1.0)
    return {"edges": MARGIN_EDGES.tolist(), "counts": [int(c) for c in counts]}


@torch.no_grad()
def evaluate(
    model: nn.Module,
    data: TrainData,
    split: str,
    *,
    loss_fn: nn.Module,
    device: torch.device,
    dtype: torch.dtype | None = None,
    batch_size: int = EVAL_BATCH_MIN,
) -> Evaluation:
    """The dataset's metrics on ``split``, the mean loss per counted row (at the delta
    ``loss_fn`` holds) and the histogram of p_margins; ``model`` is put in eval mode."""
    from astune.metrics.scores import compute_metrics, is_csc

    model.eval()
    spec = data.spec
    csc = spec.task == "token" and is_csc(spec.metric)
    outputs, golds, margins, total_loss, total_active = [], [], [], 0.0, 0
    sources: list[list[int]] = []
    for batch in data.batches(split, max(EVAL_BATCH_MIN, batch_size)):
        logits, labels = forward(model, batch, device=device, dtype=dtype)
        loss, counts, _, _ = loss_counts(loss_fn, logits, labels)
        total_loss, total_active = total_loss + loss.item(), total_active + int(counts[0])
        margins.append(p_margins(logits, labels).cpu())
        if spec.task == "token":  # a word cut by truncation: tag 0, or kept when correcting
            predicted = logits.argmax(-1).cpu()
            outputs += data.word_predictions(split, batch, predicted, fill=-1 if csc else 0)
            golds += data.gold_word_labels(split, batch["index"])
            if csc:
                sources += data.source_word_ids(split, batch["index"])
        else:
            outputs.append(logits.float().cpu())
            golds.append(batch["labels"])
    if spec.task != "token":
        outputs, golds = torch.cat(outputs).numpy(), torch.cat(golds).numpy()
    metrics = compute_metrics(
        spec.task,
        outputs,
        golds,
        label_names=spec.label_names,
        matthews=spec.metric == "matthews",
        sources=sources if csc else None,
    )
    margins_histogram = margin_histogram(torch.cat(margins))
    return Evaluation(metrics, total_loss / max(1, total_active), margins_histogram)
