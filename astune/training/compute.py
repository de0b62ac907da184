"""The model's side of a step: device and precision, the forward pass, the loss with the rows it
counted, and the optimizer."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from astune._device import to_device
from astune.config import TrainConfig
from astune.data.encoding import model_inputs
from astune.data.spec import DatasetSpec
from astune.losses.as_base import MaskStats
from astune.metrics.scores import is_csc

FUSED_CPU_ADAMW_TORCH = (2, 4)
"""The first torch with ``AdamW(fused=True)`` on the CPU; ``pyproject.toml``'s lower bound."""


def choose_device(choice: str) -> torch.device:
    """``auto``: CUDA when there is one; ValueError for ``cuda`` on a machine without it."""
    if choice == "cuda" or (choice == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise ValueError(
                "device 'cuda' was asked for, but this machine has no CUDA GPU; use --device cpu."
            )
        return torch.device("cuda")
    return torch.device("cpu")


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of ``precision`` (None: float32 throughout)."""
    if precision == "bf16" and device.type != "cuda":
        raise ValueError("precision 'bf16' needs a CUDA GPU; on the CPU use precision 'fp32'.")
    if precision == "bf16" or (
        precision == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported()
    ):
        return torch.bfloat16
    return None


def forward(
    model: nn.Module, batch: dict[str, Tensor], *, device: torch.device, dtype: torch.dtype | None
) -> tuple[Tensor, Tensor]:
    """Logits ``(B, C)`` or ``(B, T, C)`` in the autocast dtype, and the labels, on ``device``
    (:func:`loss_input` upcasts them for a loss that needs it)."""
    inputs = device_inputs(model, batch, device)
    with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
        logits = model(**inputs).logits
    return logits, to_device(batch["labels"], device)


def device_inputs(model: nn.Module, batch: dict[str, Tensor], device: torch.device) -> dict:
    """``model``'s keyword inputs for ``batch`` on ``device``, sent without waiting, the text
    mask as :func:`attention_mask` builds it."""
    inputs = model_inputs(batch)
    text_mask = inputs.pop("attention_mask", None) if "input_ids" in inputs else None
    inputs = {k: to_device(v, device) for k, v in inputs.items()}
    if text_mask is not None:
        inputs["attention_mask"] = attention_mask(model, text_mask, device)
    return inputs


FOUR_D_MASK_MODELS = ("bert", "roberta", "xlm-roberta", "distilbert")
"""Model types whose SDPA attention takes a ready ``(B, 1, 1, T)`` mask as it is (transformers
5's ``create_bidirectional_mask`` returns a 4-D mask untouched)."""


def attention_mask(model: nn.Module, mask: Tensor, device: torch.device) -> Tensor | None:
    """The attention mask ``model`` gets for the host's 0/1 text ``mask`` ``(B, T)``, built so
    that transformers does not read it on the host (``padding_mask.all()``, a sync every
    forward): None for a batch without padding (read here, on the host, for free); for the
    :data:`FOUR_D_MASK_MODELS` with SDPA attention a boolean ``(B, 1, 1, T)`` mask; else the
    2-D mask as it is."""
    if bool(mask.all()):  # a host tensor: no device is asked
        return None
    config = getattr(model, "config", None)
    if (
        getattr(config, "model_type", None) in FOUR_D_MASK_MODELS
        and getattr(config, "_attn_implementation", None) == "sdpa"
    ):
        mask = mask.bool()[:, None, None, :]
    return to_device(mask, device)


def loss_input(loss_fn: nn.Module, logits: Tensor) -> Tensor:
    """``logits`` as ``loss_fn`` takes them: as they are for a loss that computes in float32
    itself (``upcasts_logits``: AS-Softmax, whose fused kernel upcasts in registers), else in
    float32."""
    if getattr(loss_fn, "upcasts_logits", False):
        return logits
    # float32: the baselines' softmax (and the multi-label threshold) compared in bf16 would
    # lose rows near their margins to its 8-bit mantissa.
    return logits.float()


class Computed(NamedTuple):
    """One micro-batch through the loss: the summed (weighted) ``loss`` (0-dim), ``counts``
    ``[n_active, n_masked]`` rows as a device tensor (no sync), the loss's ``stats`` (None for a
    loss without them) and each sample's unweighted loss ``(B,)``, detached; all float32."""

    loss: Tensor
    counts: Tensor
    stats: MaskStats | None
    sample_losses: Tensor


def loss_counts(
    loss_fn: nn.Module, logits: Tensor, labels: Tensor, *, weight: Tensor | None = None
) -> Computed:
    """``loss_fn`` (``reduction="none"``: a loss per row) summed per sample, then over the
    batch with each sample's ``weight`` ``(B,)`` (None: 1)."""
    rows = loss_fn(loss_input(loss_fn, logits), labels).float()
    per_sample = rows.reshape(len(labels), -1).sum(dim=1)
    loss = per_sample.sum() if weight is None else (per_sample * weight).sum()
    stats = getattr(loss_fn, "last_stats", None)
    if stats is not None:
        return Computed(loss, stats.counts(), stats, per_sample.detach())
    if labels.is_floating_point():  # multi-label: every row counts
        active = torch.full((), len(labels), dtype=torch.long, device=loss.device)
    else:
        active = (labels != -100).sum()
    return Computed(
        loss, torch.stack([active, torch.zeros_like(active)]), None, per_sample.detach()
    )


@torch.no_grad()
def mask_without_gradient(
    model: nn.Module,
    loss_fn: nn.Module,
    batch: dict[str, Tensor],
    *,
    device: torch.device,
    dtype: torch.dtype | None,
) -> Computed:
    """The AS loss of ``batch`` with its mask, by a forward pass without gradient, in train mode
    so that dropout masks the samples as training would (AS-Skip's re-check)."""
    model.train()
    computed = loss_counts(loss_fn, *forward(model, batch, device=device, dtype=dtype))
    if computed.stats is None:
        raise ValueError(f"re-checking samples needs an AS loss, not {type(loss_fn).__name__}")
    return computed


def adamw(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (no decay on biases and LayerNorm)."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if param.ndim < 2 or "LayerNorm" in name else decay).append(param)
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    # The fused kernel is 10-20x faster than the per-tensor loop on a CPU, where the embedding
    # table dominates the step.
    return torch.optim.AdamW(groups, lr=config.lr, fused=True)


class ModelParts(NamedTuple):
    model: nn.Module
    loss_fn: nn.Module
    optimizer: torch.optim.Optimizer


def model_parts(config: TrainConfig, spec: DatasetSpec, device: torch.device) -> ModelParts:
    """The backbone with its head for ``spec``'s task (the head seeded by ``config.seed``), the
    loss (per row: :func:`loss_counts` sums it, and a step divides by the rows it counted) and
    AdamW."""
    from astune.backbones.models import build_model
    from astune.losses.registry import build_loss

    torch.manual_seed(config.seed)  # the head's initialisation
    model = build_model(
        config.backbone,
        task=spec.task,
        num_labels=spec.num_labels,
        num_layers=config.num_layers,
        dropout=config.dropout,
    ).to(device)
    if spec.task == "token" and is_csc(spec.metric) and not config.fresh_head:
        _head_from_embeddings(model, config.backbone, spec)
    loss_fn = build_loss(config.loss, reduction="none", **config.loss_kwargs()).to(device)
    return ModelParts(model, loss_fn, adamw(model, config))


def check_loss_kernel(kernel: str, device: torch.device) -> None:
    """ValueError (one line) before training when ``kernel="triton"`` cannot run on ``device``
    (the CPU without ``TRITON_INTERPRET=1``, or triton not installed)."""
    if kernel != "triton":
        return
    from astune.losses.as_softmax_triton import kernel_module

    try:
        kernel_module(device)
    except RuntimeError as err:  # triton missing: bad input for this run, not a crash
        raise ValueError(f"loss_kernel 'triton': {err}") from None


def _head_from_embeddings(model: nn.Module, backbone: str, spec: DatasetSpec) -> None:
    """Spelling correction: the head starts from the candidates' embeddings; one warning
    counts the candidates the backbone's vocabulary lacks (their rows stay random)."""
    import warnings

    from astune.backbones.heads import init_head_from_embeddings

    copied, fresh = init_head_from_embeddings(
        model, backbone=backbone, candidates=spec.label_names or ()
    )
    if fresh:
        warnings.warn(
            f"{fresh} of {copied + fresh} candidate characters of {spec.name!r} are not in the "
            f"vocabulary of {backbone!r}: their head rows start random",
            stacklevel=3,
        )


def update_weights(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    rows: Tensor | int,
    max_grad_norm: float,
    lr: float,
) -> None:
    """One optimizer step on summed gradients: divide them by ``rows`` (at least 1; a 0-dim
    device tensor, so nothing waits for the device), clip their norm to ``max_grad_norm``, step
    at ``lr`` and clear them."""
    if isinstance(rows, Tensor):
        scale = rows.clamp(min=1).reciprocal().float()
    else:
        scale = 1.0 / max(1, rows)
    for p in model.parameters():
        if p.grad is not None:
            p.grad.mul_(scale)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
