"""`astune export`: the best trial of a search as a train config (YAML/JSON) or as code.

The best trial is found in MLflow: of the latest search (parent run) of the experiment, the
finished child run with the best ``objective`` (ties: :func:`astune.store.best.best_first`, the
rule the search chose its own by). Its config is the parent's ``best_config.yaml`` artifact
(the search's choice, with the settings every trial shared) when the two agree, else the
trial's params over the shared settings (a search cut short before it wrote the artifact).
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astune.exporting.pick import Pick, confirmed_front_point, pick_from_front
from astune.store.best import BestTrial
from astune.store.confirmed import ConfirmedConfig, confirmed_configs, confirmed_winner
from astune.store.conventions import ROLE_TAG, TRIAL_ID_TAG
from astune.store.reader import (
    Store,
    best_evaluation_metrics,
    best_trial,
    finished_trials,
    no_progress_bar,
    objective,
    param,
    search_mode,
)

if TYPE_CHECKING:
    from mlflow.entities import Run

FORMATS = ("yaml", "json", "python", "hf")
ARTIFACT = "best_config.yaml"
# Parent-run params that are TrainConfig fields (the settings every trial of a search shared).
_PARENT_KEYS = ("dataset", "backbone", "num_layers", "max_train_samples", "seed")


def find_best_trial(
    experiment: str, tracking_uri: str | None = None, *, pick: Pick | None = None
) -> BestTrial:
    """The best trial of the latest search of ``experiment``; with ``pick`` (a multi-objective
    search), the point of its Pareto front that ``pick`` names.

    Raises:
        ValueError: no such experiment (the message lists the astune experiments), no search
            in it, or no finished trial with an ``objective``.
    """
    store = Store(tracking_uri)
    parent = store.require_search(experiment)
    trials = finished_trials(store.trials(parent.info.run_id, [parent.info.experiment_id]))
    if not trials:
        raise ValueError(
            f"search {experiment!r} (parent run {parent.info.run_id}) has no finished trial with "
            "an objective yet; let a trial finish (or resume the search) and export again."
        )
    artifact = _artifact_config(store, parent.info.run_id)
    # Finished trials only: the artifact may name a trial that errored after a good evaluation.
    best, confirmed, why = _choose(store, parent, trials, pick)
    if artifact is not None and _agrees(best, artifact):
        config, source = artifact, ARTIFACT
    else:
        config, source = _config_from_params(parent, best, artifact), "trial params"
    if confirmed is not None:
        config["seed"] = param(parent, "seed") if param(parent, "seed") is not None else 0
    if why:
        source += f"; {why}"
    config = _portable(config, parent)
    metric, value = _best_metric(store, best) if best else (None, None)
    return BestTrial(
        experiment=experiment,
        tracking_uri=store.uri,
        parent_run_id=parent.info.run_id,
        run_id=best.info.run_id if best else None,
        objective=confirmed.mean if confirmed else objective(best),
        metric=metric,
        value=value,
        config=config,
        source=source,
        confirmed_seeds=len(confirmed.seeds) if confirmed else None,
        trial_id=_trial_id(best),
    )


def _trial_id(run: "Run | None") -> str | None:
    """The trial's name (its ``astune.trial_id``) when ``run`` is a trial run; None for a
    confirm run (the baseline's, whose tag is the confirm's own Ray trial) or no run."""
    if run is None or run.data.tags.get(ROLE_TAG) != "trial":
        return None
    return run.data.tags.get(TRIAL_ID_TAG)


def _choose(
    store: Store, parent: "Run", trials: list["Run"], pick: Pick | None
) -> tuple["Run", ConfirmedConfig | None, str]:
    """The run to export, its confirmed config (None: a single run's) and why it was chosen:
    the front point ``pick`` names, else (after ``confirm --front``) the fastest config
    confirmed faster at equal accuracy, else the confirmed winner, else the best trial (ties:
    :func:`astune.store.best.best_first`, as the search chose)."""
    by_id = {r.info.run_id: r for r in trials}
    if pick is not None and pick.on_front:
        run_id, why = pick_from_front(parent, trials, pick)
        return by_id[run_id], None, f"picked: {why}"
    mode = search_mode(parent)
    configs = confirmed_configs(store, parent)
    chosen = confirmed_front_point(configs, parent, trials) or _winner(configs, mode)
    if chosen is not None:  # the confirmed trial, else (the baseline) one of its confirm runs
        config, why = chosen
        return by_id.get(config.confirms, config.run), config, why
    return best_trial(trials, mode), None, ""


def _winner(configs: list[ConfirmedConfig], mode: str) -> tuple[ConfirmedConfig, str] | None:
    """The confirmed winner (best mean over seeds) and why, or None when nothing was confirmed."""
    winner = confirmed_winner(configs, mode)
    if winner is None:
        return None
    return winner, f"confirmed winner of `astune confirm` over {len(winner.seeds)} seeds"


def _artifact_config(store: Store, run_id: str) -> dict[str, Any] | None:
    """The parent's ``best_config.yaml`` as a mapping, or None when it has none."""
    import yaml

    if ARTIFACT not in {item.path for item in store.client.list_artifacts(run_id)}:
        return None
    with tempfile.TemporaryDirectory() as folder, no_progress_bar():
        path = store.client.download_artifacts(run_id, ARTIFACT, folder)
        loaded = yaml.safe_load(Path(path).read_text())
    return dict(loaded) if isinstance(loaded, Mapping) else None


def _portable(config: dict[str, Any], parent: "Run") -> dict[str, Any]:
    """No setting of the search machine the user did not give: the device a trial ran on (the
    rerun picks its own: ``auto``) and the data folder unless the search logged the user's."""
    out = {k: v for k, v in config.items() if k not in ("device", "data_dir", "checkpoint_every")}
    given = param(parent, "data_dir")
    if given is not None:
        out["data_dir"] = given
    return out


def _agrees(run: "Run", config: Mapping[str, Any]) -> bool:
    """Whether every param the trial logged (that applies) equals the config's value."""
    for key in run.data.params:
        value = param(run, key)
        if value is None or key not in config:
            continue
        if not _same(value, config[key]):
            return False
    return True


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return str(a) == str(b)


def _config_from_params(
    parent: "Run", trial: "Run", artifact: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The shared settings (the artifact's keys that the trial did not log, else those logged
    on the parent), overridden by the trial's params; a param the trial logged as "None" (not
    applicable) drops the key."""
    from astune.config import TrainConfig

    accepted = TrainConfig.accepted_keys()
    config = {k: param(parent, k) for k in _PARENT_KEYS}
    config.update({k: v for k, v in (artifact or {}).items() if k not in trial.data.params})
    config.update({k: param(trial, k) for k in trial.data.params})
    return {k: v for k, v in config.items() if k in accepted and v is not None}


def _best_metric(store: Store, run: "Run") -> tuple[str | None, float | None]:
    """The trial's ``val_<metric>`` that its objective is (the dataset's primary metric) and
    its value at the best evaluation."""
    values = best_evaluation_metrics(store, run)
    names = sorted(k for k in values if k != "val_loss")
    best = objective(run)
    for name in names:
        if best is not None and math.isclose(values[name], best, abs_tol=1e-12):
            return name, values[name]
    return (names[0], values[names[0]]) if names else (None, None)


# ----------------------------------------------------------------------------------- output
def render(best: BestTrial, fmt: str) -> str:
    """The export text of ``best`` in ``fmt`` (one of :data:`FORMATS`)."""
    from astune.exporting.code import hf_snippet, python_snippet

    renderers = {
        "yaml": render_yaml,
        "json": render_json,
        "python": python_snippet,
        "hf": hf_snippet,
    }
    if fmt not in renderers:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, but got {fmt!r}.")
    return renderers[fmt](best)


def render_yaml(best: BestTrial) -> str:
    """The config with a comment header: where it came from and how to run it."""
    import yaml

    header = (
        f"# astune export of {best.describe()}\n"
        f"# tracking URI: {best.tracking_uri}; config from: {best.source}\n"
        "# run it with: python -m astune train --config THIS_FILE\n"
    )
    return header + yaml.safe_dump(best.config, sort_keys=False)


def render_json(best: BestTrial) -> str:
    """``{"astune_export": {...}, "config": {...}}``: `train --config` reads the ``config`` key."""
    source = {
        "experiment": best.experiment,
        "tracking_uri": best.tracking_uri,
        "parent_run_id": best.parent_run_id,
        "run_id": best.run_id,
        "trial_id": best.trial_id,
        "objective": best.objective,
        best.metric or "metric": best.value,
        "config_from": best.source,
    }
    return json.dumps({"astune_export": source, "config": best.config}, indent=2) + "\n"


@dataclass(frozen=True)
class ExportResult:
    """What an export rendered: the ``text``, the file it wrote (``path``, None when not asked
    to) and the ``trial`` it came from (its run ids, objective and config)."""

    text: str
    path: Path | None
    trial: BestTrial

    @property
    def config(self) -> dict[str, Any]:
        """The ``train`` config of the trial (what ``astune.train(config=...)`` takes)."""
        return dict(self.trial.config)


def check_format(fmt: str) -> None:
    """ValueError (one line) unless ``fmt`` is one of :data:`FORMATS`."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, but got {fmt!r}.")


def export_best(
    experiment: str,
    fmt: str = "yaml",
    *,
    output: str | Path | None = None,
    tracking_uri: str | None = None,
    pick: Pick | None = None,
) -> ExportResult:
    """Render the best trial of ``experiment`` (or the front trial ``pick`` names) in ``fmt``;
    write it to ``output`` when given. ValueError (one line) for an unknown format or
    experiment, or a search without a finished trial."""
    check_format(fmt)
    trial = find_best_trial(experiment, tracking_uri, pick=pick)
    text = render(trial, fmt)
    path = None if output is None else Path(output)
    if path is not None:
        path.write_text(text)
    return ExportResult(text=text, path=path, trial=trial)


def export(
    experiment: str,
    fmt: str = "yaml",
    *,
    output: str | Path | None = None,
    tracking_uri: str | None = None,
    pick: Pick | None = None,
) -> str:
    """:func:`export_best`'s text."""
    return export_best(experiment, fmt, output=output, tracking_uri=tracking_uri, pick=pick).text
