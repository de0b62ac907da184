"""The code forms of `astune export`: a snippet for one's own PyTorch loop, and a Hugging Face
Trainer setup. Both are self-contained modules that only need astune (and transformers)."""

from __future__ import annotations

from typing import Any

from astune.losses.catalogue import AS_LOSSES
from astune.store.best import BestTrial


def snippet_values(best: BestTrial) -> dict[str, Any]:
    """The constants a snippet defines, from the best config (TrainConfig's defaults fill the
    keys it lacks; epochs, batch size and lr left unset take the paper's value for the dataset)."""
    from astune.config import TrainConfig

    config = TrainConfig.from_dict(best.config)
    _fill_paper_defaults(config)
    is_as = config.loss in AS_LOSSES
    return {
        "LOSS": config.loss,
        "LOSS_PARAMS": config.loss_kwargs(),
        "DELTA": config.delta if is_as else None,
        "WARMUP_RATIO": config.warmup_ratio if is_as else None,
        "AS_SPEED": config.as_speed,
        "LAM": config.lam if config.as_speed else None,
        "MAX_ACCUM_STEPS": config.max_accum_steps if config.as_speed else None,
        "AS_SKIP": config.as_skip,
        "SKIP_KEEP": config.skip_keep if config.as_skip else None,
        "SKIP_ANNEAL": config.skip_anneal if config.as_skip else None,
        "LR": config.lr,
        "BATCH_SIZE": config.batch_size,
        "EPOCHS": config.epochs,
        "WEIGHT_DECAY": config.weight_decay,
        "LR_WARMUP_RATIO": config.lr_warmup_ratio,
        "MAX_GRAD_NORM": config.max_grad_norm,
        "SEED": config.seed,
        "BACKBONE": config.backbone,
        "DATASET": config.dataset,
    }


def _fill_paper_defaults(config: Any) -> None:
    from astune.data.registry import REGISTRY

    spec = REGISTRY.get(config.dataset)
    for name in ("epochs", "batch_size", "lr"):
        if getattr(config, name) is None and spec is not None:
            setattr(config, name, getattr(spec, name))


def _constants(values: dict[str, Any]) -> str:
    return "\n".join(f"{name} = {value!r}" for name, value in values.items())


def _docstring(what: str) -> str:
    """The module docstring: fixed text only (the search's names go in :func:`_source`)."""
    return f'"""{what}, exported by `astune export` (source: EXPERIMENT, TRACKING_URI)."""'


def _source(best: BestTrial) -> str:
    """Where the values came from, as Python literals (``repr``): a quote, a backslash or a
    newline in a name or a Windows path cannot break the module."""
    return _constants(
        {"EXPERIMENT": best.experiment, "TRACKING_URI": best.tracking_uri, "RUN_ID": best.run_id}
    )


def python_snippet(best: BestTrial) -> str:
    """A module that builds the loss, the delta warm-up, AS-Speed and AS-Skip with the best
    values, and training-loop sketches showing where ``delta_at()``, ``speed.update()`` and
    AS-Skip's ``plan_for()``/``visits()``/``record()`` go."""
    values = snippet_values(best)
    doc = _docstring("The best AS-Softmax settings for your own PyTorch training loop")
    body = f"{_source(best)}\n{_constants(values)}"
    return f"{doc}\n\n{_PYTHON_IMPORTS}\n{body}\n\n{_PYTHON_BODY}"


def hf_snippet(best: BestTrial) -> str:
    """A module with a ``compute_loss_func`` and a delta warm-up ``TrainerCallback`` for the
    Hugging Face Trainer (transformers >= 4.46)."""
    values = snippet_values(best)
    doc = _docstring("A Hugging Face Trainer setup with the best AS-Softmax settings")
    left_out = []
    if values["AS_SPEED"]:
        left_out.append(
            f"AS-Speed (lam={values['LAM']}, max_accum_steps={values['MAX_ACCUM_STEPS']})"
        )
    if values["AS_SKIP"]:
        left_out.append(
            f"AS-Skip (skip_keep={values['SKIP_KEEP']}, skip_anneal={values['SKIP_ANNEAL']})"
        )
    note = f"# The best trial used {' and '.join(left_out)}; left out here.\n" if left_out else ""
    body = f"{_source(best)}\n{_constants(values)}"
    return f"{doc}\n\n{_HF_NOTE}{note}\n{_HF_IMPORTS}\n{body}\n\n{_HF_BODY}"


_PYTHON_IMPORTS = """import torch

from astune.losses import DeltaSchedule, build_loss
from astune.losses.catalogue import AS_LOSSES
from astune.skip import ASSkip
from astune.speed import ASSpeed
"""

_PYTHON_BODY = '''IS_AS = LOSS in AS_LOSSES

# reduction="sum": each optimizer step divides by the rows it counted, as astune's loop does, so
# that the rows AS-Softmax masks (zero loss) do not dilute the gradient of the others.
loss_fn = build_loss(LOSS, reduction="sum", **LOSS_PARAMS)
speed = ASSpeed(lam=LAM, max_steps=MAX_ACCUM_STEPS) if AS_SPEED else None


def delta_schedule(total_micro_batches):
    """delta = 1 for the first WARMUP_RATIO of training, then DELTA. Counted in micro-batches:
    with AS-Speed the number of optimizer steps is not known in advance."""
    return DeltaSchedule(DELTA, WARMUP_RATIO, total_micro_batches) if IS_AS else None


def row_counts(labels):
    """(rows the loss counted, rows it masked) of the last call."""
    stats = getattr(loss_fn, "last_stats", None)
    if stats is not None:
        return stats.n_active, stats.n_masked
    return (len(labels) if labels.is_floating_point() else int((labels != -100).sum())), 0


def optimizer_step(model, optimizer, n_active):
    for p in model.parameters():
        if p.grad is not None:
            p.grad.div_(max(1, n_active))
    torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def train(model, batches, optimizer, epochs=EPOCHS):
    """A sketch of the loop: ``batches`` is a list of ``(inputs, labels)``; ``model(inputs)``
    returns logits (N, C), or (N, T, C) for token labels. Returns the optimizer steps taken.
    Build the optimizer with lr=LR and weight_decay=WEIGHT_DECAY."""
    schedule = delta_schedule(max(1, round(epochs * len(batches))))
    accum, active, masked, in_window, micro, steps = 1, 0, 0, 0, 0, 0
    for _ in range(max(1, round(epochs))):
        for inputs, labels in batches:
            if schedule is not None:
                loss_fn.set_delta(schedule.delta_at(micro))  # the delta warm-up
            loss_fn(model(inputs), labels).backward()
            n_active, n_masked = row_counts(labels)
            active, masked = active + n_active, masked + n_masked
            in_window, micro = in_window + 1, micro + 1
            if in_window >= accum:
                optimizer_step(model, optimizer, active)
                steps += 1
                if speed is not None:
                    # AS-Speed: micro-batches for the next step
                    accum = speed.update(active, masked)
                active, masked, in_window = 0, 0, 0
    if in_window:
        optimizer_step(model, optimizer, active)
        steps += 1
    return steps


def skip_policy(n_samples, epochs=EPOCHS):
    """AS-Skip's per-sample state: a sample whose loss was exactly zero when last computed is left
    out of forward and backward, except a SKIP_KEEP share re-checked each time; every sample is
    used in the last SKIP_ANNEAL of training. None when the best trial did not use AS-Skip."""
    if not AS_SKIP:
        return None
    return ASSkip(n_samples, SKIP_KEEP, SKIP_ANNEAL, max(1, round(epochs * n_samples)), SEED)


def train_skipping(model, inputs, labels, optimizer, epochs=EPOCHS):
    """The loop with AS-Skip: ``inputs`` (N, ...) and ``labels`` (N,), (N, T) or (N, C) tensors;
    micro-batches of BATCH_SIZE are filled from the samples kept. Skipped samples advance the
    delta warm-up and count as masked for AS-Speed; a step divides by the rows computed.
    Returns (optimizer steps, samples computed)."""
    n = len(labels)
    skip = skip_policy(n, epochs)
    if skip is None:
        raise ValueError("the best trial did not use AS-Skip; use train()")
    schedule = delta_schedule(max(1, round(epochs * n)))  # counted in samples here
    accum, active, masked, skipped, in_window = 1, 0, 0, 0, 0
    seen, computed, steps = 0, 0, 0
    for epoch in range(max(1, round(epochs))):
        order = torch.randperm(n, generator=torch.Generator().manual_seed(SEED + epoch))
        for visit in skip.visits(order, skip.plan_for(epoch, order, seen), BATCH_SIZE, 0):
            if len(visit.index):
                if schedule is not None:
                    loss_fn.set_delta(schedule.delta_at(seen))
                batch_labels = labels[visit.index]
                loss_fn(model(inputs[visit.index]), batch_labels).backward()
                skip.record(visit.index, *loss_fn.last_stats.rows(), seen)
                n_active, n_masked = row_counts(batch_labels)
                active, masked, in_window = active + n_active, masked + n_masked, in_window + 1
                computed += len(visit.index)
            skipped += int(skip.skipped_rows(visit.skipped))
            seen += visit.visited
            if in_window >= accum:
                optimizer_step(model, optimizer, active)
                steps += 1
                if speed is not None:
                    accum = speed.update(active + skipped, masked + skipped)
                active, masked, skipped, in_window = 0, 0, 0, 0
    if in_window:
        optimizer_step(model, optimizer, active)
        steps += 1
    return steps, computed
'''

_HF_NOTE = """# AS-Speed and AS-Skip need astune's own loop: the Trainer fixes
# gradient_accumulation_steps before training, while AS-Speed changes the number of accumulated
# micro-batches between optimizer steps, and its sampler cannot fill batches from the samples
# AS-Skip keeps. For them, run
# `python -m astune export --experiment EXPERIMENT --format yaml -o best.yaml` and
# `python -m astune train --config best.yaml`. The delta warm-up below works with the Trainer.
"""

_HF_IMPORTS = """import inspect

from transformers import Trainer, TrainerCallback, TrainingArguments

from astune.losses import build_loss
from astune.losses.catalogue import AS_LOSSES
"""

_HF_BODY = '''IS_AS = LOSS in AS_LOSSES

loss_fn = build_loss(LOSS, reduction="sum", **LOSS_PARAMS)


def compute_loss_func(outputs, labels, num_items_in_batch=None):
    """Trainer(compute_loss_func=...): the summed loss over the labelled items of the
    accumulated batch (the Trainer counts labels != -100 across its micro-batches)."""
    logits = outputs["logits"] if isinstance(outputs, dict) else outputs.logits
    loss = loss_fn(logits, labels)
    if labels.is_floating_point():  # multi-label 0/1 targets (N, C): normalise by rows
        rows = labels.shape[0]
        if num_items_in_batch is not None:
            rows = num_items_in_batch / labels.shape[-1]
        return loss / rows
    if num_items_in_batch is not None:
        return loss / num_items_in_batch
    return loss / (labels != -100).sum().clamp(min=1)


class DeltaWarmupCallback(TrainerCallback):
    """delta = 1 (plain softmax) for the first ``warmup_ratio`` of ``state.max_steps``, then
    ``delta`` (the paper's warm-up for easy tasks)."""

    def __init__(self, loss=loss_fn, delta=DELTA, warmup_ratio=WARMUP_RATIO):
        self.loss, self.delta, self.warmup_ratio = loss, delta, warmup_ratio

    def on_step_begin(self, args, state, control, **kwargs):
        warming_up = state.global_step < self.warmup_ratio * state.max_steps
        self.loss.set_delta(1.0 if warming_up else self.delta)


def lr_warmup():
    """The learning-rate warm-up argument: transformers 5 takes the ratio as a float
    ``warmup_steps`` in [0, 1) and has no ``warmup_ratio``; earlier versions take the latter."""
    if "warmup_ratio" in inspect.signature(TrainingArguments).parameters:
        return {"warmup_ratio": LR_WARMUP_RATIO}
    return {"warmup_steps": min(float(LR_WARMUP_RATIO), 0.999)}


def training_arguments(output_dir="astune-hf", **overrides):
    """TrainingArguments with the best trial's budget; keep gradient_accumulation_steps = 1."""
    values = dict(
        output_dir=output_dir, learning_rate=LR, per_device_train_batch_size=BATCH_SIZE,
        num_train_epochs=EPOCHS, weight_decay=WEIGHT_DECAY, max_grad_norm=MAX_GRAD_NORM,
        lr_scheduler_type="linear", seed=SEED, eval_strategy="epoch", save_strategy="epoch",
        load_best_model_at_end=True, **lr_warmup(),
    )
    return TrainingArguments(**{**values, **overrides})


def make_trainer(model, train_dataset, eval_dataset, output_dir="astune-hf", **kwargs):
    """The Trainer: the loss above and, for AS-Softmax, the delta warm-up callback."""
    callbacks = [DeltaWarmupCallback()] if IS_AS else []
    return Trainer(
        model=model, args=training_arguments(output_dir), train_dataset=train_dataset,
        eval_dataset=eval_dataset, compute_loss_func=compute_loss_func, callbacks=callbacks,
        **kwargs,
    )
'''
