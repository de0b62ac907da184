"""The configuration of one training run: what `train`, a search trial and `export` share.

Unset budget fields (``epochs``, ``batch_size``, ``lr``) take the paper's value for the dataset
(its Table "Information of universal hyper-parameters") when the run starts.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from astune._checks import check_choice
from astune._moved import REMOVED_IN
from astune._text import plural
from astune.backbones.registry import DEFAULT_BACKBONE
from astune.checkpoint_policy import TRAIN_DEFAULT, CheckpointPolicy
from astune.losses.catalogue import (
    AS_LOSSES,
    DELTA,
    DELTA_CONTROL,
    LOSS_KERNELS,
    LOSS_PARAM_NAMES,
    WARMUP_RATIO,
    ParamSpec,
    loss_info,
)
from astune.losses.delta import DeltaSchedule, build_delta_schedule
from astune.plugins import load_plugins, plugin_names
from astune.speed.accumulation import ASSpeed

PRECISIONS = ("auto", "fp32", "bf16")
SKIP_POLICIES = ("zero", "soft")
"""AS-Skip's policies: ``zero`` leaves out the samples with exactly zero loss (re-checked, see
astune/speed/skip.py); ``soft`` also prunes low-loss ones at random, rescaling the kept ones
(astune/speed/prune.py)."""
DEVICES = ("auto", "cpu", "cuda")
TRAIN_DIR = "astune-runs/train"
"""Where a run without ``output_dir`` writes (the command and ``astune.train``: ``/<dataset>``)."""

_FIELD_SPECS = (
    ParamSpec("num_layers", int, None, 1),
    ParamSpec("max_length", int, 128, 8),
    # Audio clips longer than this are cut (one padded batch holds the longest); 0: refused.
    ParamSpec("max_audio_seconds", float, 30.0, 0.0),
    ParamSpec("max_train_samples", int, None, 1),
    ParamSpec("max_eval_samples", int, None, 1),
    ParamSpec("validation_fraction", float, 0.1, 0.0, 1.0, low_open=True, high_open=True),
    ParamSpec("epochs", float, None, 0.0, low_open=True),  # fractional epochs are allowed
    ParamSpec("batch_size", int, None, 1),
    ParamSpec("lr", float, None, 0.0, 1.0, low_open=True),
    ParamSpec("weight_decay", float, 0.01, 0.0),
    ParamSpec("lr_warmup_ratio", float, 0.0, 0.0, 1.0),
    ParamSpec("max_grad_norm", float, 1.0, 0.0, low_open=True),
    ParamSpec("dropout", float, None, 0.0, 1.0, high_open=True),
    # Spelling correction: the head over the candidate characters starts from the backbone's
    # word embeddings of those characters (its tied masked-LM output layer); True: random.
    ParamSpec("fresh_head", bool, False),
    DELTA,
    WARMUP_RATIO,
    *DELTA_CONTROL,
    ParamSpec("as_speed", bool, False),
    ParamSpec("lam", float, 1.0, 0.0, low_open=True),
    ParamSpec("max_accum_steps", int, 4, 1),
    # AS-Skip (astune/speed/skip.py); defaults from benchmarks/RESULTS.md, "AS-Skip".
    ParamSpec("as_skip", bool, False),
    ParamSpec("skip_keep", float, 0.2, 0.0, 1.0),
    ParamSpec("skip_anneal", float, 0.1, 0.0, 1.0),
    # Re-check zero-loss samples by a forward pass without gradient (False: train on them, v1).
    ParamSpec("skip_probe", bool, True),
    # The cap of the re-check back-off (astune/speed/skip.py); 1: every zero sample has chance
    # skip_keep.
    ParamSpec("skip_backoff", float, 8.0, 1.0),
    ParamSpec("skip_policy", str, "zero", choices=SKIP_POLICIES),
    # The chance a low-loss sample (below the mean loss) is left out of an epoch, with the soft
    # policy; InfoBatch's r, whose paper default is 0.5.
    ParamSpec("skip_prune", float, 0.5, 0.0, 1.0, high_open=True),
    # InfoBatch (Qin et al., ICLR 2024) on any loss: the baseline AS-Skip is measured against.
    ParamSpec("infobatch", bool, False),
    ParamSpec("infobatch_prune", float, 0.5, 0.0, 1.0, high_open=True),
    # The last share of training that uses every sample: InfoBatch's 1 - delta, delta = 0.875.
    ParamSpec("infobatch_anneal", float, 0.125, 0.0, 1.0),
    # Micro-batches grouped by length (astune/training/buckets.py); 0: none. Text only.
    ParamSpec("length_window", int, 0, 0),
    ParamSpec("seed", int, 42, 0),
    ParamSpec("eval_every", int, None, 1),
)
TRAIN_FIELDS: Mapping[str, ParamSpec] = MappingProxyType({s.name: s for s in _FIELD_SPECS})
"""The numeric and switch fields of :class:`TrainConfig`: default and accepted range, the one
table that ``TrainConfig.validate`` and the search space's parameter checks read. A field whose
default is None may stay unset (None: the paper's value for the dataset, or no limit)."""


def _default(name: str) -> Any:
    return TRAIN_FIELDS[name].default


SKIP_FIELDS = (
    "skip_keep", "skip_anneal", "skip_probe", "skip_backoff", "skip_policy", "skip_prune"
)  # fmt: skip
"""AS-Skip's parameters (they apply only with ``as_skip``)."""
AS_SPEED_FIELDS = ("lam", "max_accum_steps")
"""AS-Speed's parameters (they apply only with ``as_speed``)."""
SPEED_FIELDS = ("as_speed", *AS_SPEED_FIELDS, "as_skip", *SKIP_FIELDS)
"""The AS-Speed and AS-Skip parameter names (AS losses only): config fields, search-space
``speed_params``."""
INFOBATCH_FIELDS = ("infobatch", "infobatch_prune", "infobatch_anneal")
"""InfoBatch's fields: any loss takes them (a space's ``params``)."""
PAPER_BUDGET = ("epochs", "batch_size", "lr")
"""The fields an unset value of takes the paper's value for the dataset."""


@dataclass
class TrainConfig:
    """Everything one run needs. Field names are the MLflow param names and the YAML keys.

    ``validation_fraction``: the share of train carved out (seeded, stratified) as the validation
    split of a user folder that has none.
    """

    dataset: str = "sst5"
    _: KW_ONLY
    data_dir: str | None = None
    backbone: str = DEFAULT_BACKBONE  # image and audio entries: see Run (default_backbone)
    num_layers: int | None = _default("num_layers")
    max_length: int = _default("max_length")
    max_audio_seconds: float = _default("max_audio_seconds")
    max_train_samples: int | None = _default("max_train_samples")
    max_eval_samples: int | None = _default("max_eval_samples")
    validation_fraction: float = _default("validation_fraction")
    epochs: float | None = _default("epochs")
    batch_size: int | None = _default("batch_size")
    lr: float | None = _default("lr")
    weight_decay: float = _default("weight_decay")
    lr_warmup_ratio: float = _default("lr_warmup_ratio")
    max_grad_norm: float = _default("max_grad_norm")
    dropout: float | None = _default("dropout")
    fresh_head: bool = _default("fresh_head")
    loss: str = "as_softmax"
    delta: float = _default("delta")
    warmup_ratio: float = _default("warmup_ratio")
    delta_schedule: str = _default("delta_schedule")
    mask_target: float = _default("mask_target")
    delta_gain: float = _default("delta_gain")
    delta_max_step: float = _default("delta_max_step")
    delta_min: float = _default("delta_min")
    delta_momentum: float = _default("delta_momentum")
    as_speed: bool = _default("as_speed")
    lam: float = _default("lam")
    max_accum_steps: int = _default("max_accum_steps")
    as_skip: bool = _default("as_skip")
    skip_keep: float = _default("skip_keep")
    skip_anneal: float = _default("skip_anneal")
    skip_probe: bool = _default("skip_probe")
    skip_backoff: float = _default("skip_backoff")
    skip_policy: str = _default("skip_policy")
    skip_prune: float = _default("skip_prune")
    infobatch: bool = _default("infobatch")
    infobatch_prune: float = _default("infobatch_prune")
    infobatch_anneal: float = _default("infobatch_anneal")
    loss_params: dict[str, float] = field(default_factory=dict)
    length_window: int = _default("length_window")
    seed: int = _default("seed")
    eval_every: int | None = _default("eval_every")
    checkpoint_every: str = TRAIN_DEFAULT  # see astune.checkpoint_policy
    precision: str = "auto"
    loss_kernel: str = "auto"  # AS-Softmax: the fused Triton kernel or torch's
    compile: bool = False  # the model through torch.compile (astune/training/compiled.py)
    device: str = "auto"
    # modules that register losses (astune.plugins), imported before the config is checked
    plugins: list[str] = field(default_factory=list)
    output_dir: str | None = None

    def validate(self) -> "TrainConfig":
        """Check every field; ValueError naming the field, its value and the accepted range.
        The config's plugins are imported first: their losses are names it may use."""
        load_plugins(plugin_names(self.plugins), installed=True)
        for name, spec in TRAIN_FIELDS.items():
            value = getattr(self, name)
            if value is not None or spec.default is not None:
                spec.check(value)
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("loss_kernel", self.loss_kernel, LOSS_KERNELS)
        check_choice("compile", self.compile, (False, True))
        check_choice("device", self.device, DEVICES)
        CheckpointPolicy(self.checkpoint_every)
        if self.as_speed and self.loss not in AS_LOSSES:
            raise ValueError(
                f"as_speed needs an AS loss ({', '.join(AS_LOSSES)}), but loss is {self.loss!r}."
            )
        if self.as_skip and self.loss not in AS_LOSSES:
            raise ValueError(
                f"as_skip needs an AS loss ({', '.join(AS_LOSSES)}), but loss is {self.loss!r}."
            )
        if self.delta_schedule != "fixed":
            if self.loss not in AS_LOSSES:
                raise ValueError(
                    f"delta_schedule {self.delta_schedule!r} needs an AS loss "
                    f"({', '.join(AS_LOSSES)}), but loss is {self.loss!r}."
                )
            self.build_delta(1)  # the schedule's own checks (delta_min at most delta)
        if self.as_skip and self.infobatch:
            raise ValueError(
                "as_skip and infobatch are two ways of leaving samples out; use one (as_skip "
                "with skip_policy 'soft' also prunes low-loss samples as InfoBatch does)."
            )
        info = loss_info(self.loss)  # checks the name
        for key, value in self.loss_params.items():
            info.param(key).check(value)
        return self

    @property
    def speed(self) -> TrainConfig:
        """The config itself, whose speed fields are its own: scripts exported before they were
        declared once call ``config.speed.build_speed()``."""
        warnings.warn(
            "TrainConfig.speed is the config itself: call config.build_speed() and read "
            "config.as_skip and the other speed fields directly (TrainConfig.speed goes in "
            f"astune {REMOVED_IN})",
            DeprecationWarning,
            stacklevel=2,
        )
        return self

    def build_speed(self) -> ASSpeed | None:
        """The AS-Speed controller, or None when AS-Speed is off."""
        return ASSpeed(self.lam, self.max_accum_steps) if self.as_speed else None

    def build_delta(self, total_steps: int) -> DeltaSchedule | None:
        """The loss's delta over ``total_steps`` (warm-up, then fixed or adaptive); None for a
        loss that is not an AS loss."""
        if self.loss not in AS_LOSSES:
            return None
        controls = {p.name: getattr(self, p.name) for p in DELTA_CONTROL}
        name = controls.pop("delta_schedule")
        return build_delta_schedule(
            name,
            delta=self.delta,
            warmup_ratio=self.warmup_ratio,
            total_steps=total_steps,
            **controls,
        )

    def with_paper_defaults(self, spec: Any) -> "TrainConfig":
        """A copy whose unset ``epochs``, ``batch_size`` and ``lr`` take ``spec``'s (the
        dataset's paper values); ValueError naming the flag when the dataset has none."""
        filled = {}
        for name in PAPER_BUDGET:
            if getattr(self, name) is None:
                paper = getattr(spec, name, None)
                if paper is None:
                    raise ValueError(
                        f"dataset {spec.name!r} has no paper value for {name}; "
                        f"pass --{name.replace('_', '-')}."
                    )
                filled[name] = paper
        return dataclasses.replace(self, **filled)

    def loss_kwargs(self) -> dict[str, Any]:
        """The parameters :func:`astune.losses.build_loss` takes for ``loss``."""
        info = loss_info(self.loss)
        if info.fused:
            return {"delta": self.delta, "kernel": self.loss_kernel}
        if info.is_as:  # a plugin's AS loss may take parameters of its own besides delta
            own = {k: v for k, v in self.loss_params.items() if k in info.param_names}
            return {"delta": self.delta, **{k: v for k, v in own.items() if v is not None}}
        return dict(self.loss_params)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def accepted_keys(cls) -> frozenset[str]:
        """The keys a config mapping may hold: the fields and the flat baseline parameters."""
        return frozenset(f.name for f in dataclasses.fields(cls)) | frozenset(LOSS_PARAM_NAMES)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "TrainConfig":
        """Build from a mapping; baseline parameters may sit flat (``tau: 5``) or under
        ``loss_params``. Unknown keys are an error naming them."""
        values = dict(values)
        if values.get("plugins"):  # their losses' parameters may sit flat below
            values["plugins"] = list(plugin_names(values["plugins"]))
            load_plugins(values["plugins"], installed=True)
        loss_params = dict(values.pop("loss_params", None) or {})
        for key in LOSS_PARAM_NAMES:
            if key in values:
                loss_params[key] = values.pop(key)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            keys = plural(len(unknown), "unknown config key")
            raise ValueError(
                f"{keys} {', '.join(map(repr, unknown))}; accepted: "
                f"{', '.join(sorted(cls.accepted_keys()))}."
            )
        if values.get("loss") not in (None, *AS_LOSSES):
            loss_params = {k: v for k, v in loss_params.items() if v is not None}
        return cls(**values, loss_params=loss_params)

    @classmethod
    def from_yaml(cls, path: str | Path) -> "TrainConfig":
        import yaml

        path = Path(path)
        try:
            raw = yaml.safe_load(path.read_text())
        except FileNotFoundError:
            raise ValueError(f"config file {path} does not exist.") from None
        except yaml.YAMLError as err:
            raise ValueError(
                f"config file {path} is not valid YAML: {err}".splitlines()[0]
            ) from None
        if not isinstance(raw, dict):
            raise ValueError(f"config file {path} must hold a mapping of config keys.")
        return cls.from_dict(raw.get("config", raw))

    def to_yaml(self, path: str | Path) -> None:
        import yaml

        Path(path).write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))
