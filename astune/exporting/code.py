"""The code forms of `astune export`: a script that trains the best config with astune's one
training loop (and hands out its loss, delta warm-up and AS-Speed for one's own loop), and a
Hugging Face Trainer setup. Both are self-contained modules that only need astune (and
transformers)."""

from __future__ import annotations

from typing import Any

from astune.losses.catalogue import AS_LOSSES
from astune.store.best import BestTrial


def snippet_values(best: BestTrial) -> dict[str, Any]:
    """The constants a snippet defines, from the best config (TrainConfig's defaults fill the
    keys it lacks; epochs, batch size and lr left unset take the paper's value for the dataset)."""
    from astune.config import TrainConfig
    from astune.data.registry import REGISTRY

    config = TrainConfig.from_dict(best.config)
    spec = REGISTRY.get(config.dataset)
    if spec is not None:  # a registry dataset: its paper budget (a folder's is read at training)
        config = config.with_paper_defaults(spec)
    is_as = config.loss in AS_LOSSES
    return {
        "PLUGINS": list(config.plugins),
        "LOSS": config.loss,
        "LOSS_PARAMS": config.loss_kwargs(),
        "DELTA": config.delta if is_as else None,
        "WARMUP_RATIO": config.warmup_ratio if is_as else None,
        "DELTA_SCHEDULE": config.delta_schedule if is_as else None,
        "AS_SPEED": config.as_speed,
        "LAM": config.lam if config.as_speed else None,
        "MAX_ACCUM_STEPS": config.max_accum_steps if config.as_speed else None,
        "AS_SKIP": config.as_skip,
        "SKIP_KEEP": config.skip_keep if config.as_skip else None,
        "SKIP_ANNEAL": config.skip_anneal if config.as_skip else None,
        "SKIP_POLICY": config.skip_policy if config.as_skip else None,
        "INFOBATCH": config.infobatch,
        "INFOBATCH_PRUNE": config.infobatch_prune if config.infobatch else None,
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


def _constants(values: dict[str, Any]) -> str:
    return "\n".join(f"{name} = {value!r}" for name, value in values.items())


def _docstring(what: str) -> str:
    """The module docstring: fixed text only (the search's names go in :func:`_source`)."""
    return f'"""{what}, exported by `astune export` (source: EXPERIMENT, TRACKING_URI)."""'


def _source(best: BestTrial) -> str:
    """Where the values came from, as Python literals (``repr``): a quote, a backslash or a
    newline in a name or a Windows path cannot break the module."""
    return _constants(
        {
            "EXPERIMENT": best.experiment,
            "TRACKING_URI": best.tracking_uri,
            "RUN_ID": best.run_id,
            "TRIAL_ID": best.trial_id,  # the trial's name in the search's tables and run names
            "CONFIG_FROM": best.source,  # which trial, and why (a Pareto-front pick says so)
        }
    )


def python_snippet(best: BestTrial) -> str:
    """A script that trains the best config with astune's one training loop (``astune.train``,
    exactly as ``train --config`` does: same seed, same metrics, same run folders), and the best
    loss, delta warm-up and AS-Speed objects as building blocks for your own loop."""
    values = snippet_values(best)
    doc = _docstring("The best AS-Softmax settings, trained by astune's loop")
    config = f"CONFIG = {dict(best.config)!r}"
    body = f"{_source(best)}\n{_constants(values)}\n{config}"
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
            f"AS-Skip (skip_keep={values['SKIP_KEEP']}, skip_anneal={values['SKIP_ANNEAL']}, "
            f"skip_policy={values['SKIP_POLICY']!r})"
        )
    if values["DELTA_SCHEDULE"] not in (None, "fixed"):
        left_out.append(f"the {values['DELTA_SCHEDULE']!r} delta schedule (delta stays DELTA)")
    if values["INFOBATCH"]:
        left_out.append(f"InfoBatch (infobatch_prune={values['INFOBATCH_PRUNE']})")
    note = f"# The best trial used {' and '.join(left_out)}; left out here.\n" if left_out else ""
    body = f"{_source(best)}\n{_constants(values)}"
    return f"{doc}\n\n{_HF_NOTE}{note}\n{_HF_IMPORTS}\n{body}\n\n{_HF_BODY}"


_PYTHON_IMPORTS = """import argparse
import json

import astune
from astune.config import TrainConfig
from astune.losses import DeltaSchedule, build_loss
from astune.plugins import load_plugins
"""

_PYTHON_BODY = '''def train_config(**overrides):
    """The best trial's config (what `astune train --config` reads), ``overrides`` laid over it."""
    return TrainConfig.from_dict({**CONFIG, **overrides})


# Building blocks for your own loop, with the best values; astune's loop below uses the same.
# reduction="sum": each optimizer step divides by the rows it counted, so that the rows
# AS-Softmax masks (zero loss) do not dilute the gradient of the others.
load_plugins(PLUGINS)  # the modules that register a loss of your own (none for a built-in)
loss_fn = build_loss(LOSS, reduction="sum", **LOSS_PARAMS)
speed = train_config().build_speed()  # AS-Speed: speed.update(n_active, n_masked)


def delta_schedule(total):
    """delta = 1 for the first WARMUP_RATIO of ``total`` (samples or micro-batches), then DELTA;
    None for a loss that is not an AS loss."""
    return None if DELTA is None else DeltaSchedule(DELTA, WARMUP_RATIO, total)


def main(argv=None):
    """Train the best config as `astune train --config` does (astune.train); prints and returns
    ``final.json``'s record."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--output-dir",
        help="the run's folder (default: the first of astune-runs/train/<dataset>, "
        "<dataset>-2, ... that holds no run)",
    )
    parser.add_argument("--data-dir", help="a folder holding <dataset>/{train,validation,test}")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--resume", action="store_true", help="continue the run in --output-dir")
    how.add_argument("--overwrite", action="store_true", help="replace the run in --output-dir")
    args = parser.parse_args(argv)
    given = {"output_dir": args.output_dir, "data_dir": args.data_dir}
    overrides = {name: value for name, value in given.items() if value}
    try:
        result = astune.train(
            CONFIG, resume=args.resume, overwrite=args.overwrite, progress=True, **overrides
        )
    except ValueError as error:  # bad input (a folder that holds a run, say): one line
        parser.exit(2, f"{parser.prog}: error: {error}\\n")
    final = result.metrics
    print(json.dumps({k: v for k, v in final.items() if k != "p_margin_json"}, indent=2))
    return final


if __name__ == "__main__":
    main()
'''

_HF_NOTE = """# AS-Speed, AS-Skip and InfoBatch need astune's own loop: the Trainer fixes
# gradient_accumulation_steps before training, while AS-Speed changes the number of accumulated
# micro-batches between optimizer steps, and its sampler cannot fill batches from the samples
# AS-Skip or InfoBatch keeps. For them, run
# `python -m astune export --experiment EXPERIMENT --format yaml -o best.yaml` and
# `python -m astune train --config best.yaml`. The delta warm-up below works with the Trainer.
"""

_HF_IMPORTS = """import inspect

from transformers import Trainer, TrainerCallback, TrainingArguments

from astune.losses import build_loss
from astune.losses.catalogue import AS_LOSSES
from astune.plugins import load_plugins
"""

_HF_BODY = '''load_plugins(PLUGINS)  # modules that register a loss of your own (none: built-ins)
IS_AS = LOSS in AS_LOSSES

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
    ``delta`` (the paper's warm-up for easy tasks); nothing for a loss that is not an AS loss."""

    def __init__(self, loss=loss_fn, delta=DELTA, warmup_ratio=WARMUP_RATIO):
        self.loss, self.delta, self.warmup_ratio = loss, delta, warmup_ratio

    def on_step_begin(self, args, state, control, **kwargs):
        if self.delta is None:  # not an AS loss: no delta to warm up
            return
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
