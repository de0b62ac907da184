"""The configuration of one training run: what `train`, a search trial and `export` share.

Unset budget fields (``epochs``, ``batch_size``, ``lr``) take the paper's value for the dataset
(its Table "Information of universal hyper-parameters") when the run starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astune._checks import check_choice, check_int, check_range

AS_LOSSES = ("as_softmax", "multilabel_as_softmax")
PRECISIONS = ("auto", "fp32", "bf16")
DEVICES = ("auto", "cpu", "cuda")
# Parameters of the baseline losses that a config carries flat (as a search trial proposes them).
LOSS_PARAM_KEYS = ("tau", "epsilon", "k", "s", "m", "margin")


@dataclass
class TrainConfig:
    """Everything one run needs. Field names are the MLflow param names and the YAML keys."""

    dataset: str = "sst5"
    data_dir: str | None = None
    backbone: str = "bert-base-cased"
    num_layers: int | None = None
    max_length: int = 128
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    epochs: float | None = None
    batch_size: int | None = None
    lr: float | None = None
    weight_decay: float = 0.01
    lr_warmup_ratio: float = 0.0
    max_grad_norm: float = 1.0
    dropout: float | None = None
    loss: str = "as_softmax"
    delta: float = 0.3
    warmup_ratio: float = 0.0
    as_speed: bool = False
    lam: float = 1.0
    max_accum_steps: int = 4
    loss_params: dict[str, float] = field(default_factory=dict)
    seed: int = 42
    eval_every: int | None = None
    precision: str = "auto"
    device: str = "auto"
    output_dir: str | None = None

    def validate(self) -> "TrainConfig":
        """Check every field; ValueError naming the field, its value and the accepted range."""
        for name in (
            "num_layers",
            "max_train_samples",
            "max_eval_samples",
            "batch_size",
            "eval_every",
        ):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1)
        check_int("max_length", self.max_length, 8)
        check_int("seed", self.seed, 0)
        if self.epochs is not None:
            check_range("epochs", self.epochs, 0.0, None, low_open=True)
        if self.lr is not None:
            check_range("lr", self.lr, 0.0, 1.0, low_open=True)
        check_range("weight_decay", self.weight_decay, 0.0)
        check_range("lr_warmup_ratio", self.lr_warmup_ratio, 0.0, 1.0)
        check_range("max_grad_norm", self.max_grad_norm, 0.0, None, low_open=True)
        if self.dropout is not None:
            check_range("dropout", self.dropout, 0.0, 1.0, high_open=True)
        check_range("delta", self.delta, 0.0, 1.0)
        check_range("warmup_ratio", self.warmup_ratio, 0.0, 1.0)
        check_range("lam", self.lam, 0.0, None, low_open=True)
        check_int("max_accum_steps", self.max_accum_steps, 1)
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("device", self.device, DEVICES)
        if self.as_speed and self.loss not in AS_LOSSES:
            raise ValueError(
                f"as_speed needs an AS loss ({', '.join(AS_LOSSES)}), but loss is {self.loss!r}."
            )
        from astune.losses.registry import loss_spec  # checks the name and the parameters

        spec = loss_spec(self.loss)
        for key, value in self.loss_params.items():
            if key not in spec.param_names:
                raise ValueError(
                    f"loss {self.loss!r} takes no parameter {key!r}; it takes: "
                    f"{', '.join(spec.param_names) or 'none'}."
                )
            next(p for p in spec.params if p.name == key).check(value)
        return self

    def loss_kwargs(self) -> dict[str, Any]:
        """The parameters :func:`astune.losses.build_loss` takes for ``loss``."""
        if self.loss in AS_LOSSES:
            return {"delta": self.delta}
        return dict(self.loss_params)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "TrainConfig":
        """Build from a mapping; baseline parameters may sit flat (``tau: 5``) or under
        ``loss_params``. Unknown keys are an error naming them."""
        values = dict(values)
        loss_params = dict(values.pop("loss_params", None) or {})
        for key in LOSS_PARAM_KEYS:
            if key in values:
                loss_params[key] = values.pop(key)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"unknown config key(s) {', '.join(map(repr, unknown))}; accepted: "
                f"{', '.join(sorted(known | set(LOSS_PARAM_KEYS)))}."
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
