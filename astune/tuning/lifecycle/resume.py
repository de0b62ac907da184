"""`--resume` against the search it continues: the parent run's params are what the search was
started with (as an earlier resume changed them). A flag left out on resume takes its old value;
a flag given with another value is refused before Ray starts, since Ray restores its Tuner
(searcher, scheduler, concurrency) as pickled and the trials would mix old and new settings.
The exception is a larger ``--num-samples``: the restored search goes on to more trials, its
searcher (every trial it was told) and scheduler (its rungs) as they were."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astune._text import as_flag
from astune.tuning.searchers.samplers import sampler_name
from astune.tuning.settings import SearchError, SearchSettings

if TYPE_CHECKING:
    import pyarrow.fs

    from astune.space.space import SearchSpace

NUM_SAMPLES = "num_samples"  # the one param a resume may raise: the search goes on to more trials
SPACE_DIGEST = "space_sha256"  # the resolved space: a file edited in place is a changed space
# Param keys that come from the space, not from a flag: how a refusal names them.
_SPACE_KEYS = {"metric": "the space's metric", "mode": "the space's mode"}
_SPACE_KEYS[SPACE_DIGEST] = "the --space contents (sha256 of the resolved space)"

# Every SearchSettings field is recorded by search_params (restored by as_before when left out,
# refused by check_unchanged when changed) or named here, with why it is not
# (tests/test_resume_settings.py checks that no field is left undecided).
RESUME_MAY_CHANGE = ("address", "tracking_uri", "storage_path", "storage_timeout", "compile")
"""Where Ray, MLflow and the storage are reached: a resume may move them; and ``compile``, how
the trials run the model, which changes nothing they compute beyond rounding (a checkpoint
written compiled resumes eager and the other way round)."""
NOT_SEARCH_SETTINGS = {
    "name": "names the search: the experiment a resume finds",
    "resume": "the request to resume itself",
    "given": "which flags this command gave",
    "console": "how this driver shows progress, not what the trials do",
    "verbose": "whether this driver shows the libraries' own output, not what the trials do",
    "progress_every": "how often this driver says how far the search is, not what it does",
    "reference": "read at the start by --warm-start and the portfolio: their space is recorded",
    "probe_backbone": "read by --warm-start at the start: the warmed space is recorded",
}


def search_params(settings: SearchSettings, space: SearchSpace) -> dict[str, Any]:
    """The params of the parent run: every setting that shapes the search (a search started
    before a key was recorded lacks it: a resume keeps that setting's default)."""
    return {
        "dataset": settings.dataset,
        "space": space.source,
        "warm_start": settings.warm_start,
        "portfolio": settings.portfolio,
        NUM_SAMPLES: space.num_samples,
        "metric": space.metric,
        "mode": space.mode,
        "losses": ",".join(space.losses),
        "scheduler": space.scheduler_type
        if settings.scheduler_object is None
        else type(settings.scheduler_object).__name__,
        "objectives": ",".join(space.objectives),
        "sampler": sampler_name(settings.sampler),
        "backbone": settings.backbone,
        "num_layers": settings.num_layers,
        "max_train_samples": settings.max_train_samples,
        "max_eval_samples": settings.max_eval_samples,
        "max_length": settings.max_length,
        "max_audio_seconds": settings.max_audio_seconds,
        # as the user gave it (None: ASTUNE_DATA_DIR or the hub), so an export stays portable
        "data_dir": settings.data_dir,
        "validation_fraction": settings.validation_fraction,
        "epochs": settings.epochs,
        "max_concurrent": settings.max_concurrent,
        "cpus_per_trial": settings.cpus_per_trial,
        "gpus_per_trial": settings.gpus_per_trial or 0,
        "seed": settings.seed,
        "max_failures": settings.max_failures,
        "reuse_actors": settings.reuse_actors,
        "loss_kernel": settings.loss_kernel,
        "plugins": ",".join(settings.plugin_list) or None,  # files by their absolute paths
        "checkpoint_every": settings.checkpoint_every,
        "keep_checkpoints": settings.keep_checkpoints,
        # last: a change that a flag above names is refused by that name first
        SPACE_DIGEST: space_digest(space),
    }


def resume_command(settings: SearchSettings) -> str:
    """The command that resumes the search of ``settings``, pasted in the folder it ran from:
    its dataset and name as given, and the places it was found (``--address``,
    ``--tracking-uri``, ``--storage-path``) where the user gave them; every other setting is
    the search's own (:func:`as_before`). Each argument quoted for a POSIX shell."""
    argv = ["python", "-m", "astune", "search", "--dataset", settings.dataset]
    argv += ["--name", settings.experiment_name]
    for key in ("address", "tracking_uri", "storage_path"):
        value = getattr(settings, key)
        if value is not None:  # None: the default, found again from the same folder
            argv += [as_flag(key), str(value)]
    return shlex.join([*argv, "--resume"])


def space_digest(space: SearchSpace) -> str:
    """A short sha256 of the resolved space (its contents, not its path)."""
    text = json.dumps(space.to_dict(), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def parent_params(settings: SearchSettings, tracking_uri: str) -> dict[str, str]:
    """The params of the newest parent run of the resumed search ({} without --resume or when
    the store has none: the tracker then starts a new parent)."""
    if not settings.resume:
        return {}
    from astune.store.reader import Store, params_now

    search = Store(tracking_uri).latest_search(settings.experiment_name)
    return {} if search is None else params_now(search)


def check_not_running(settings: SearchSettings, tracking_uri: str) -> None:
    """SearchError (one line) when a live driver runs the search ``settings`` name: a second
    driver, new or resuming, would run its trials twice."""
    from astune.store.driver_lock import DriverBusy, check_free
    from astune.store.reader import Store

    store = Store(tracking_uri)
    experiment_id = store.experiment_id(settings.experiment_name)
    if experiment_id is None:
        return
    try:
        check_free(
            store.searches([experiment_id]),
            role="search",
            what=f"search {settings.experiment_name!r}",
        )
    except DriverBusy as err:
        raise SearchError(str(err)) from None


def as_before(settings: SearchSettings, old: Mapping[str, str]) -> SearchSettings:
    """``settings`` with every flag left out taken from the resumed search's ``old`` params."""
    from astune.store.reader import as_kind, field_kinds

    given = _given(settings)
    _check_no_object(settings, old, given)
    fields = {f.name for f in dataclasses.fields(SearchSettings)}
    kinds = field_kinds(SearchSettings)
    filled = {
        key: as_kind(value, kinds.get(key))
        for key, value in old.items()
        if key in fields and key not in given and not (key == "space" and value == "<memory>")
    }
    return dataclasses.replace(settings, **filled)


def _check_no_object(settings: SearchSettings, old: Mapping[str, str], given: set[str]) -> None:
    """SearchError (one line) for a search the Python API ran with a sampler or scheduler
    object (recorded by its class) resumed without one: a class name is no name to rebuild."""
    from astune.space.files import SCHEDULER_TYPES
    from astune.tuning.searchers.samplers import SAMPLERS

    for key, names in (("sampler", SAMPLERS), ("scheduler", SCHEDULER_TYPES)):
        value = old.get(key)
        if key not in given and value is not None and value not in names:
            name = settings.experiment_name
            raise SearchError(
                f"--resume: the search {name!r} ran with a {key} object ({value}) from the "
                f"Python API; resume it there with the same object: astune.search(..., "
                f"name={name!r}, resume=True, {key}=...)"
            )


def check_unchanged(settings: SearchSettings, space: SearchSpace, old: Mapping[str, str]) -> None:
    """Refuse (SearchError) a setting whose value differs from the resumed search's; but
    ``--num-samples`` may grow: the search goes on to more trials (:func:`more_trials`)."""
    skip = {"space"} if SPACE_DIGEST in old else set()  # same contents at another path: fine
    if more_trials(space, old):  # the rest must be the same: the digest at the old count
        skip.add(NUM_SAMPLES)
        space = space.with_settings(num_samples=int(_comparable(old[NUM_SAMPLES])))
    new = {k: str(v) for k, v in search_params(settings, space).items()}
    for key, value in new.items():
        if key in old and key not in skip and _comparable(old[key]) != _comparable(value):
            if key == NUM_SAMPLES:
                raise SearchError(
                    f"--resume cannot lower --num-samples: the search "
                    f"{settings.experiment_name!r} ran with {old[key]}, now {value}; give "
                    f"{old[key]} or more (more trials extend it)"
                )
            what = _SPACE_KEYS.get(key, as_flag(key))
            raise SearchError(
                f"--resume cannot change {what}: the search {settings.experiment_name!r} ran "
                f"with {old[key]}, now {value}; resume with the old value, or start a new "
                "search with another --name."
            )


def more_trials(space: SearchSpace, old: Mapping[str, str]) -> int:
    """How many trials more than the resumed search's ``num_samples`` (``old``: its params as
    a resume last left them) ``space`` asks for; 0 when it asks for no more."""
    if NUM_SAMPLES not in old:
        return 0
    return max(0, space.num_samples - int(_comparable(old[NUM_SAMPLES])))


def more_trials_note(space: SearchSpace, old: Mapping[str, str], extra: int) -> list[str]:
    """The console's line for a resume that extends the search by ``extra`` trials
    (:func:`more_trials`), if it does."""
    if not extra:
        return []
    return [
        f"--num-samples {space.num_samples}: the search ran with {old[NUM_SAMPLES]}; it goes on "
        f"to {space.num_samples} trials ({extra} more), its searcher and scheduler as they were"
    ]


def _given(settings: SearchSettings) -> set[str]:
    """The settings the user gave: those the CLI saw, else (API) those off their default."""
    if settings.given is not None:
        return set(settings.given)
    return {
        f.name
        for f in dataclasses.fields(SearchSettings)
        if f.default is dataclasses.MISSING or getattr(settings, f.name) != f.default
    }


def _comparable(value: str) -> Any:
    """Numbers as numbers (``"1"`` and ``"1.0"`` are one GPU), the rest as logged."""
    try:
        return float(value)
    except ValueError:
        return value


def experiment_saved(settings: SearchSettings) -> bool:
    """Whether Ray Tune saved the search's experiment state, which ``--resume`` restores."""
    from ray.tune import ExperimentAnalysis

    filesystem, path = settings.experiment_storage()
    try:
        ExperimentAnalysis(path, storage_filesystem=filesystem)
    except ValueError:  # "No experiment snapshot file ... was found"
        return False
    return True


def forget_experiment(settings: SearchSettings) -> None:
    """Delete the experiment folder of a new search stopped before its trials ran: it holds
    only the Tuner's own pickle, which ``Tuner.restore`` cannot resume (no experiment state)."""
    from pyarrow import fs

    filesystem, path = _experiment_folder(settings)
    if filesystem.get_file_info(path).type != fs.FileType.NotFound:
        filesystem.delete_dir(path)


def go_on_to(settings: SearchSettings, total: int) -> None:
    """Let the search saved on the storage path run ``total`` trials in all, before its Tuner
    is restored (nothing changes when it ran for that many already)."""
    from astune._private import grow_saved_samples

    grow_saved_samples(*_experiment_folder(settings), total)


def _experiment_folder(settings: SearchSettings) -> tuple[pyarrow.fs.FileSystem, str]:
    """The search's experiment folder as ``(filesystem, path)``, a local one's too."""
    from pyarrow import fs

    filesystem, path = settings.experiment_storage()
    if filesystem is None:
        filesystem, path = fs.FileSystem.from_uri(path if "://" in path else Path(path).as_uri())
    return filesystem, path
