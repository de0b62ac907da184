"""``astune.train``: one training run with the one training loop (``python -m astune train``).

The config is a ``train`` config (a file ``export`` wrote, a mapping or a :class:`TrainConfig`)
with fields given as keywords laid over it; ``resume=True`` continues the run in its
``output_dir`` from its last checkpoint, with the settings it was started with.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astune.config import TRAIN_DIR, TrainConfig
from astune.run_folder import CHECKPOINT_DIR, clear, held, next_free

if TYPE_CHECKING:
    from astune.training import Run
    from astune.training.hooks import LoopHooks

# Where a resumed run reads its data, writes and trains may change (another mount, machine or
# GPU, and the loss kernel that suits it); the rest of its settings may not, or the resume
# would not be exact.
RESUME_MAY_CHANGE = ("output_dir", "data_dir", "device", "loss_kernel", "compile")

ConfigSource = TrainConfig | Mapping[str, Any] | str | PathLike[str]
Spelling = Callable[[str], str]  # a parameter's name as an error message gives it


def as_keyword(name: str) -> str:
    """A parameter as the Python API spells it."""
    return name


@dataclass(frozen=True)
class TrainResult:
    """A finished run: its ``config``, its folder (``output_dir``: ``metrics.jsonl``,
    ``final.json``, ``checkpoint/``) and ``metrics``, what ``final.json`` holds: ``val_<metric>``
    of the best evaluation, ``test_<metric>`` of its weights, ``optimizer_steps``,
    ``train_seconds``, ``samples_seen`` and ``samples_computed``."""

    config: TrainConfig
    output_dir: Path
    metrics: dict[str, Any]

    @classmethod
    def of(cls, run: Run, final: dict[str, Any]) -> TrainResult:
        """The result of ``run``, whose ``train()`` returned ``final``."""
        return cls(config=run.config, output_dir=Path(run.config.output_dir), metrics=final)


def train(
    config: ConfigSource | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    **fields: Any,
) -> TrainResult:
    """Train once, as ``python -m astune train`` does: ``config`` (a file ``export`` wrote, a
    mapping or a :class:`~astune.config.TrainConfig`) with ``fields`` (the config's field names,
    docs/contract.md) laid over it; without either, ``dataset`` is required. The run writes to
    ``output_dir`` (default ``astune-runs/train/<dataset>``, or the first of ``<dataset>-2``,
    ``<dataset>-3``, ... that holds no run); ``resume=True`` continues the run there from its
    last checkpoint, refusing a field given with another value than it was started with
    (``data_dir``, ``device``, ``loss_kernel``, ``compile`` may change). An ``output_dir`` that
    holds a run is refused, unless ``overwrite=True`` replaces that run. ``progress``: a
    progress bar on stderr.

    Raises ValueError (one line) for a bad or unknown field, data or backbone, before the run
    starts, and :class:`astune.TrainingStopped` when SIGTERM or Ctrl-C stopped it after an
    optimizer step (its folder keeps the checkpoints written so far; ``resume=True`` goes on).
    """
    if resume and overwrite:
        raise ValueError("resume continues the run in output_dir, overwrite replaces it: give one")
    if not resume:  # bad fields, and a folder that holds a run, refused before torch loads
        config = train_config(config, fields, overwrite=overwrite)
    from astune.training.hooks import ProgressBar
    from astune.training.stop import stop_after_step

    bar = ProgressBar() if progress else None
    with stop_after_step() as stop:  # SIGTERM, Ctrl-C: the step under way ends, then the run
        hooks = [h for h in (bar, stop) if h]
        run = build_run(config, fields, resume=resume, overwrite=overwrite, hooks=hooks)
        try:
            final = run.train()
        finally:
            if bar is not None:
                bar.close()
    return TrainResult.of(run, final)


def build_run(
    config: ConfigSource | None,
    fields: Mapping[str, Any],
    *,
    resume: bool,
    hooks: list[LoopHooks],
    overwrite: bool = False,
    spell: Spelling = as_keyword,
) -> Run:
    """The :class:`~astune.training.Run` of ``config`` with ``fields`` (restored from its
    checkpoint with ``resume``; with ``overwrite``, in a folder cleared of the run it held);
    ValueError or OSError (bad input) when the config, the data or the backbone is bad: the run
    itself has not started. ``spell``: how an error names a field (the command: as its flag)."""
    if resume:
        built, state = resumed_config(config, fields, spell=spell)
    else:
        built = train_config(config, fields, spell=spell, overwrite=overwrite)
        state = None
    from astune.training import Run

    run = Run(built, hooks=hooks)
    if state is not None:
        run.restore(Path(built.output_dir) / CHECKPOINT_DIR, state=state)
    elif overwrite:  # the data and the backbone loaded: the run is about to start
        clear(built.output_dir)
    return run


def train_config(
    config: ConfigSource | None,
    fields: Mapping[str, Any],
    *,
    spell: Spelling = as_keyword,
    overwrite: bool = False,
) -> TrainConfig:
    """``config`` with ``fields`` laid over it, validated (ValueError, one line, on a bad one),
    for a new run: into a folder that holds none (:func:`_new_run_folder`)."""
    from astune.backbones.registry import DEFAULT_BACKBONE

    values = _given(config, fields)
    if not values.get("dataset"):
        raise ValueError(f"{spell('dataset')} is required (or {spell('config')} that names one)")
    values["output_dir"] = _new_run_folder(values, spell, overwrite=overwrite)
    if config is None and fields.get("backbone") is None:
        values["backbone"] = DEFAULT_BACKBONE
    return TrainConfig.from_dict(values).validate()


def _given(config: ConfigSource | None, fields: Mapping[str, Any]) -> dict[str, Any]:
    """``config``'s values with ``fields`` laid over them (paths as strings)."""
    values = _config_values(config)
    values.update({k: str(v) if isinstance(v, PathLike) else v for k, v in fields.items()})
    return values


def _run_folder(values: Mapping[str, Any], spell: Spelling) -> str:
    """``output_dir``, else ``astune-runs/train/<dataset>`` (an exported config holds
    ``output_dir: null``)."""
    if values.get("output_dir"):
        return str(values["output_dir"])
    if not values.get("dataset"):
        raise ValueError(f"{spell('resume')}: give the {spell('output_dir')} of the run")
    return f"{TRAIN_DIR}/{values['dataset']}"


def _new_run_folder(values: Mapping[str, Any], spell: Spelling, *, overwrite: bool) -> str:
    """A new run's folder: ``output_dir``, refused when it holds a run (unless ``overwrite``);
    else the first of ``astune-runs/train/<dataset>``, ``<dataset>-2``, ... that holds none."""
    if not values.get("output_dir"):
        return str(next_free(_run_folder(values, spell)))
    out = str(values["output_dir"])
    found = held(out)
    if found and not overwrite:
        raise ValueError(
            f"{spell('output_dir')} {out} holds a run already ({', '.join(found)}); continue it "
            f"with {spell('resume')}, replace it with {spell('overwrite')}, or give another "
            f"{spell('output_dir')}"
        )
    return out


def _config_values(config: ConfigSource | None) -> dict[str, Any]:
    if config is None:
        return {}
    if isinstance(config, TrainConfig):
        return config.to_dict()
    if isinstance(config, Mapping):
        return dict(config)
    return TrainConfig.from_yaml(config).to_dict()


def resumed_config(
    config: ConfigSource | None, fields: Mapping[str, Any], *, spell: Spelling = as_keyword
) -> tuple[TrainConfig, dict[str, Any]]:
    """The config the run in the given ``output_dir`` was started with and the checkpoint it
    came from (read once: it holds the weights); a value given now (``config`` or ``fields``)
    that differs from the run's is refused (ValueError naming it as ``spell`` does: the resume
    would not be exact)."""
    from astune.training.state import STATE_FILE, read_checkpoint

    given = _given(config, fields)
    out = _run_folder(given, spell)
    folder = Path(out) / CHECKPOINT_DIR
    if not (folder / STATE_FILE).is_file():
        raise ValueError(
            f"{spell('resume')}: no checkpoint in {folder}; give the {spell('output_dir')} of a "
            f"run that wrote one (each evaluation writes one unless {spell('checkpoint_every')} "
            "says otherwise)"
        )
    state = read_checkpoint(folder)
    before = state["config"]
    for key, value in given.items():
        if key in RESUME_MAY_CHANGE or value is None or key not in before:
            continue
        if value != before[key]:
            raise ValueError(
                f"{spell('resume')}: cannot change {spell(key)} (the run was started with "
                f"{before[key]!r}, now {value!r}); leave it out, or train into another "
                f"{spell('output_dir')}"
            )
    now = {k: given[k] for k in RESUME_MAY_CHANGE if given.get(k) is not None}
    resumed = {**before, **now, "output_dir": out}
    return TrainConfig.from_dict(resumed).validate(), state
