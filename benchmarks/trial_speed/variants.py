"""The variants of benchmarks/trial_speed/as_speed.py and the run config of each (see its
docstring)."""

from __future__ import annotations

import argparse
from pathlib import Path

from torch import Tensor

from astune.config import TrainConfig
from astune.training import Run
from astune.training.progress import Window
from benchmarks.common.harness import config_from_args

SKIP_VARIANTS = (
    "as_skip",
    "as_speed_skip",
    "as_skip_represented",
    "as_skip_v1",
    "as_skip_flat",
    "as_skip_grouped",
    "as_skip_soft",
)
PORTFOLIO_FIRST = dict(loss="as_softmax", lr=3e-4, batch_size=16, epochs=4.0, delta=0.2,
                       warmup_ratio=0.15)  # fmt: skip
"""The config a search of SST-5 on MiniLM runs first from history (the portfolio's first, as
``astune recommend --dataset sst5 --backbone minilm`` printed it on 2026-11-29), fixed before
the runs: issue 69 measures it at the paper's size beside the paper's setting (``as_softmax``
with the paper's flags)."""
VARIANTS = (
    *("softmax", "as_softmax", "as_speed", *SKIP_VARIANTS, "softmax_grouped", "infobatch"),
    "portfolio_first",
)
SOFTMAX_VARIANTS = ("softmax", "softmax_grouped", "infobatch")
GROUPED_VARIANTS = ("as_skip_grouped", "softmax_grouped")
SPEED_VARIANTS = ("as_speed", "as_speed_skip")


def base_config(args: argparse.Namespace) -> TrainConfig:
    """Softmax at the scale of ``args``; each variant's config starts from it."""
    return config_from_args(TrainConfig, args, loss="softmax")


def variant_config(
    base: TrainConfig, variant: str, args: argparse.Namespace, output_dir: Path
) -> TrainConfig:
    config = TrainConfig.from_dict({**base.to_dict(), "output_dir": str(output_dir)})
    if variant in GROUPED_VARIANTS or (args.group_all and variant != "softmax"):
        config.length_window = args.length_window
    if variant == "portfolio_first":
        return TrainConfig.from_dict({**config.to_dict(), **PORTFOLIO_FIRST}).validate()
    if variant in SOFTMAX_VARIANTS:
        config.loss = "softmax"
        if variant == "infobatch":
            config.infobatch, config.infobatch_prune = True, args.prune
            if args.infobatch_anneal is not None:
                config.infobatch_anneal = args.infobatch_anneal
    else:
        config.loss, config.delta = "as_softmax", args.delta
        if variant in SPEED_VARIANTS:
            config.as_speed, config.lam, config.max_accum_steps = (
                True,
                args.lam,
                args.max_accum_steps,
            )
        if variant in SKIP_VARIANTS:
            config.as_skip = True
            for name in ("skip_keep", "skip_anneal", "skip_backoff"):
                if getattr(args, name) is not None:
                    setattr(config, name, getattr(args, name))
            # v1: the samples due for a re-check are trained on, not probed without gradient
            config.skip_probe = variant != "as_skip_v1"
            if variant in ("as_skip_v1", "as_skip_flat"):
                config.skip_backoff = 1.0
            if variant == "as_skip_soft":
                config.skip_policy, config.skip_prune = "soft", args.prune
    return config.validate()


class RepresentedRun(Run):
    """AS-Skip's alternative normalisation: each step divides the summed gradient by the rows
    represented (computed + skipped, as if the skipped samples had added their zero), so the
    step shrinks as skipping grows."""

    def gradient_rows(self, window: Window) -> Tensor:
        return window.device_sum("active") + window.device_sum("skipped")


def run_class(variant: str) -> type[Run]:
    return RepresentedRun if variant == "as_skip_represented" else Run
