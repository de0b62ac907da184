"""The one adapter for private third-party APIs: every call astune makes to a name starting with
``_`` in Ray, Optuna, torch, transformers, pyarrow or MLflow goes through here, so an upgrade
breaks in one place.

Checked with Ray 2.60, Optuna 5.0 and 5.1, torch 2.13, pyarrow 25 and MLflow 3.17
(``tests/test_private_api.py`` fails loudly when an upgrade removes one of them). Heavy packages
are imported inside the functions: importing this module costs nothing, and the torch-only floors
may use it without pulling in Ray.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess

    import optuna
    import pyarrow.fs
    from mlflow.entities import Run
    from ray.tune import RunConfig, Tuner
    from ray.tune.search.optuna import OptunaSearch


class PrivateAPIError(RuntimeError):
    """A private API astune relies on is gone: the installed version is newer than checked."""


def _attribute(owner: Any, name: str, what: str) -> Any:
    try:
        return getattr(owner, name)
    except AttributeError:
        raise PrivateAPIError(
            f"{what} has no attribute {name!r}: astune was checked against Ray 2.60, Optuna 5.1, "
            "torch 2.13 and MLflow 3.17; see astune/_private.py."
        ) from None


# -------------------------------------------------------------------- Ray's OptunaSearch
def optuna_study(searcher: OptunaSearch) -> optuna.Study:
    """The Optuna study behind Ray's ``OptunaSearch`` (``_ot_study``)."""
    return _attribute(searcher, "_ot_study", "OptunaSearch")


def optuna_trials(searcher: OptunaSearch) -> dict[str, optuna.Trial]:
    """Ray trial id -> the Optuna trial it asked for (``OptunaSearch._ot_trials``)."""
    return _attribute(searcher, "_ot_trials", "OptunaSearch")


def told_trials(searcher: OptunaSearch) -> set[str]:
    """Ray trial ids already told to Optuna (``OptunaSearch._completed_trials``)."""
    return _attribute(searcher, "_completed_trials", "OptunaSearch")


# --------------------------------------------------------------------------------- Optuna
def optuna_enqueued(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether ``trial`` runs values ``Study.enqueue_trial`` gave it (Optuna 5.0 and 5.1 keep
    them in the trial's system attribute ``fixed_params``)."""
    return "fixed_params" in trial.system_attrs


class _LockPickledFresh:
    """A ``threading.Lock`` that pickles as a new, unlocked one: what it guards is one process's
    cache, which a copy in another process (or a resumed search) rebuilds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> bool:
        return self._lock.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._lock.__exit__(*exc)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def __reduce__(self) -> tuple[type, tuple[()]]:
        return (_LockPickledFresh, ())


def picklable_sampler(sampler: optuna.samplers.BaseSampler) -> optuna.samplers.BaseSampler:
    """``sampler``, made picklable where Optuna left it not: Optuna 5.1's genetic samplers
    (NSGA-II and NSGA-III, ``BaseGASampler``) hold a ``threading.Lock`` in ``_thread_lock`` that
    neither Ray's Tuner (its ``tuner.pkl``) nor ``OptunaSearch.save`` can pickle. The lock, in
    place, becomes one that pickles fresh; a sampler without one (Optuna 5.0) is left as it is."""
    if isinstance(getattr(sampler, "_thread_lock", None), type(threading.Lock())):
        sampler._thread_lock = _LockPickledFresh()  # type: ignore[attr-defined]
    return sampler


# ------------------------------------------------------------------------------ Ray Tune
def restored_run_config(tuner: Tuner) -> RunConfig | None:
    """The ``RunConfig`` a restored ``Tuner`` unpickled, with its callbacks.

    ``Tuner.restore`` takes no ``RunConfig``; Ray keeps the restored one on the private
    ``Tuner._local_tuner``, which is absent under Ray Client: None then.
    """
    local = getattr(tuner, "_local_tuner", None)
    return None if local is None else local.get_run_config()


def restored_scheduler(tuner: Tuner) -> Any:
    """The trial scheduler a restored ``Tuner`` unpickled, the one its ``fit`` runs with
    (``Tuner._local_tuner._tune_config.scheduler``); None under Ray Client. ``Tuner.restore``
    brings it back as it was pickled when the search started: nothing it learned since."""
    local = getattr(tuner, "_local_tuner", None)
    if local is None:
        return None
    return _attribute(_attribute(local, "_tune_config", "TunerInternal"), "scheduler", "TuneConfig")


SEARCH_STATE_FILES = "search_gen_state-"
"""Ray 2.60's ``SearchGenerator`` state in an experiment folder: ``search_gen_state-<session>.json``
(a cloudpickled dict, despite its suffix), the newest by name restored."""


def grow_saved_samples(filesystem: pyarrow.fs.FileSystem, path: str, total: int) -> int:
    """Raise the trials the search saved at ``path`` runs to ``total`` (its newest
    ``SearchGenerator`` state's ``total_samples``, which a restore sets over the pickled
    ``TuneConfig.num_samples``), so that its restored Tuner goes on to more trials; returns
    the total it had. Rewritten whole under a temporary name, then moved over it."""
    import ray.cloudpickle as cloudpickle
    from pyarrow import fs

    found = filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True))
    states = sorted(i.path for i in found if i.base_name.startswith(SEARCH_STATE_FILES))
    if not states:
        raise PrivateAPIError(f"no {SEARCH_STATE_FILES}*.json in {path}: see astune/_private.py")
    with filesystem.open_input_stream(states[-1]) as stream:
        state = cloudpickle.loads(stream.read())
    if "total_samples" not in state:
        raise PrivateAPIError("Ray's search state has no 'total_samples': see astune/_private.py")
    before = int(state["total_samples"])
    if total > before:
        state["total_samples"] = total
        temporary = f"{path}/.astune-{SEARCH_STATE_FILES}tmp"
        with filesystem.open_output_stream(temporary) as stream:
            stream.write(cloudpickle.dumps(state))
        filesystem.move(temporary, states[-1])
    return before


def trial_storage() -> tuple[Any, str]:
    """The running trial's folder on the search's storage: ``(pyarrow filesystem, path)``.

    Ray's ``StorageContext`` (a DeveloperAPI, "may change without notice between minor
    versions") is reached through the private session module ``ray.train._internal.session``.
    """
    from ray.train._internal import session

    storage = _attribute(session, "get_storage", "ray.train._internal.session")()
    return storage.storage_filesystem, storage.trial_fs_path


def trial_folder(trial: Any) -> tuple[Any, str]:
    """``trial``'s folder on the search's storage, seen from the driver: ``(pyarrow filesystem,
    path)``, from ``Trial.storage``, Ray's ``StorageContext`` (a DeveloperAPI, "may change
    without notice between minor versions")."""
    storage = _attribute(trial, "storage", "ray.tune.experiment.Trial")
    return storage.storage_filesystem, storage.trial_fs_path


def checkpoint_gone(trial: Any) -> bool:
    """Whether Ray's latest checkpoint of ``trial`` is missing from storage (a driver that died
    between a checkpoint and the experiment snapshot naming it resumes onto a deleted one)."""
    from pyarrow import fs

    result = trial.run_metadata.checkpoint_manager.latest_checkpoint_result
    if result is None:
        return False
    checkpoint = result.checkpoint
    return checkpoint.filesystem.get_file_info(checkpoint.path).type == fs.FileType.NotFound


def s3_options(filesystem: Any) -> dict[str, Any]:
    """The constructor arguments of a pyarrow ``S3FileSystem`` (as ``FileSystem.from_uri`` made
    it from a URI's query and the environment), read from its pickling recipe
    ``S3FileSystem.__reduce__`` -> ``(S3FileSystem._reconstruct, (kwargs,))``. Checked with
    pyarrow 25; pyarrow has no public getter for them."""
    recipe = filesystem.__reduce__()
    options = recipe[1][0] if len(recipe) > 1 and recipe[1] else None
    if not isinstance(options, dict) or "endpoint_override" not in options:
        raise PrivateAPIError(
            "pyarrow's S3FileSystem no longer pickles as (_reconstruct, (kwargs,)): astune was "
            "checked against pyarrow 25; see astune/_private.py."
        )
    return dict(options)


def trial_statuses(results: Any) -> list[str]:
    """The driver's status of each trial of a ``ResultGrid`` ("TERMINATED", "ERROR", ...), in
    the grid's order, from its private ``_experiment_analysis``. ``Result.error`` alone is read
    back from the storage path, where a trial whose folder could not be written has none."""
    analysis = _attribute(results, "_experiment_analysis", "ray.tune.ResultGrid")
    return [trial.status for trial in analysis.trials]


def forget_checkpoints(trial: Any) -> None:
    """Make Ray restart ``trial`` from its start: clear its checkpoint bookkeeping, the private
    ``_latest_checkpoint_result`` and ``_checkpoint_results`` of Ray's ``_CheckpointManager``
    (Ray would otherwise retry a restore from a checkpoint that is gone, and fail again)."""
    manager = trial.run_metadata.checkpoint_manager
    what = "ray.train._internal.checkpoint_manager._CheckpointManager"
    _attribute(manager, "_latest_checkpoint_result", what)
    _attribute(manager, "_checkpoint_results", what)
    manager._latest_checkpoint_result = None
    manager._checkpoint_results = []


# ---------------------------------------------------------------------- Ray's local node
RAY_HEAD_PROGRAMS = ("gcs_server", "raylet")
"""The processes a local Ray cannot lose while its driver stops: the GCS and the raylet (which
holds the object store; a driver whose store connection breaks is ended by Ray's core worker)."""


@contextlib.contextmanager
def ray_processes_apart_from_job_signals() -> Iterator[None]:
    """Within the block, each process a local ``ray.init`` starts leads a process group of its
    own, so that a signal to the driver's group (``kill -TERM -- -PGID``, GNU ``timeout``, a
    terminal) reaches the driver alone; and the GCS and the raylet (with the workers and agents
    the raylet starts, which inherit its signal mask) start with SIGTERM blocked, so that a
    SIGTERM to every process of the job (Slurm's ``scancel``, a cgroup-wide stop) leaves them
    to the driver, which stops its trials through Tune and shuts Ray down (``ray.shutdown``
    sends SIGKILL a second after an unanswered SIGTERM). Ray starts them all through the
    private ``ray._private.services.ConsolePopen`` (Ray 2.60), swapped for the block; their
    fate-sharing with the driver (``PR_SET_PDEATHSIG``) is Ray's own and unchanged."""
    import os
    import signal

    from ray._private import services

    popen = _attribute(services, "ConsolePopen", "ray._private.services")

    class ApartPopen(popen):  # type: ignore[misc, valid-type]
        def __init__(self, args: Any, *rest: Any, preexec_fn: Any = None, **kwargs: Any):
            program = os.path.basename(str(args[0] if isinstance(args, (list, tuple)) else args))

            def apart() -> None:
                os.setpgid(0, 0)
                if program in RAY_HEAD_PROGRAMS:
                    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
                if preexec_fn is not None:
                    preexec_fn()

            super().__init__(args, *rest, preexec_fn=apart, **kwargs)

    services.ConsolePopen = ApartPopen
    try:
        yield
    finally:
        services.ConsolePopen = popen


def local_ray_processes(*, head_only: bool = False) -> list[subprocess.Popen]:
    """The processes this process's ``ray.init`` started (``head_only``: the GCS server and the
    raylet), as Ray's ``Popen`` objects (poll them: they are this process's children); empty when
    it joined a cluster or Ray is not running. From the private ``ray._private.worker.
    _global_node.all_processes`` (Ray 2.60)."""
    import sys

    if "ray" not in sys.modules:  # never imported: never started
        return []
    from ray._private import ray_constants, worker

    node = _attribute(worker, "_global_node", "ray._private.worker")
    if node is None or not getattr(node, "head", False):
        return []
    processes = _attribute(node, "all_processes", "ray._private.node.Node")
    kinds = (ray_constants.PROCESS_TYPE_GCS_SERVER, ray_constants.PROCESS_TYPE_RAYLET)
    return [
        info.process
        for kind, infos in list(processes.items())
        if kind in kinds or not head_only
        for info in infos
    ]


RAY_TOKEN_SETUP_LOGGER = "ray._private.authentication.authentication_token_setup"
"""The logger of Ray's token-authentication set-up (Ray 2.60), the private module whose
``_warn_token_auth_enabled`` says that a new local Ray enabled its token (its default)."""
RAY_TOKEN_NOTICE = "Token authentication is enabled for this Ray cluster"


class _TokenNoticeFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(RAY_TOKEN_NOTICE)


@contextlib.contextmanager
def ray_token_notice_off() -> Iterator[None]:
    """Within the block, Ray's notice that token authentication is enabled (the default of a
    local Ray since 2.60; a warning by level, with nothing to act on) is dropped from the
    logger of the private ``ray._private.authentication.authentication_token_setup``; its
    warning that authentication is *disabled* still shows."""
    logger, notice = logging.getLogger(RAY_TOKEN_SETUP_LOGGER), _TokenNoticeFilter()
    logger.addFilter(notice)
    try:
        yield
    finally:
        logger.removeFilter(notice)


# ---------------------------------------------------------------------------------- torch
def autograd_graph_is_kept() -> bool:
    """Whether the running backward keeps its graph (``retain_graph=True``, gradcheck): then a
    custom ``backward`` must not write over the tensors it saved. True when torch cannot say,
    and while ``torch.compile`` traces (the flag is no tensor it can follow; out of place is
    always right)."""
    import torch

    if torch.compiler.is_compiling():
        return True
    keep_graph = getattr(torch._C._autograd, "_get_current_graph_task_keep_graph", None)
    return True if keep_graph is None else bool(keep_graph())


def torch_dispatch_mode() -> type:
    """``torch.utils._python_dispatch.TorchDispatchMode`` (torch 2.13), the base of the sync
    audit's dispatch mode: documented, but in a private module."""
    from torch.utils import _python_dispatch

    return _attribute(_python_dispatch, "TorchDispatchMode", "torch.utils._python_dispatch")


def parse_to(*args: Any, **kwargs: Any) -> tuple[Any, Any, bool, Any]:
    """``(device, dtype, non_blocking, memory_format)`` of a ``Tensor.to`` call's arguments,
    as torch parses them (``torch._C._nn._parse_to``, torch 2.13)."""
    import torch

    return _attribute(torch._C._nn, "_parse_to", "torch._C._nn")(*args, **kwargs)


def tree_leaves(tree: Any) -> list[Any]:
    """The leaves of nested lists, tuples and dicts, as torch flattens an op's arguments
    (``torch.utils._pytree.tree_leaves``, torch 2.13)."""
    from torch.utils import _pytree

    return _attribute(_pytree, "tree_leaves", "torch.utils._pytree")(tree)


# --------------------------------------------------------------------------- transformers
@contextlib.contextmanager
def transformers_bars_off() -> Iterator[None]:
    """transformers' own progress bars (the per-tensor bar of weight loading) off for the block,
    Hub download bars left on. The public ``disable_progress_bar`` turns both off, so this flips
    the module flag ``transformers.utils.logging._tqdm_active`` and restores it after."""
    from transformers.utils import logging as hf_logging

    was_on = _attribute(hf_logging, "_tqdm_active", "transformers.utils.logging")
    hf_logging._tqdm_active = False
    try:
        yield
    finally:
        hf_logging._tqdm_active = was_on


# ------------------------------------------------------------------- Ray's internal KV store
PROGRESS_NAMESPACE = "astune"
"""The namespace of astune's keys in Ray's internal key-value store (the GCS's)."""


def kv_put(key: str, value: bytes) -> None:
    """``value`` under ``key`` in the GCS's key-value store of the Ray this process joined
    (``ray.experimental.internal_kv._internal_kv_put``: private, Ray 2.60)."""
    from ray.experimental import internal_kv

    put = _attribute(internal_kv, "_internal_kv_put", "ray.experimental.internal_kv")
    put(key.encode(), value, overwrite=True, namespace=PROGRESS_NAMESPACE)


def kv_get(key: str) -> bytes | None:
    """What :func:`kv_put` left under ``key`` (None: nothing, or no Ray joined)."""
    from ray.experimental import internal_kv

    if not _attribute(internal_kv, "_internal_kv_initialized", "ray.experimental.internal_kv")():
        return None
    get = _attribute(internal_kv, "_internal_kv_get", "ray.experimental.internal_kv")
    return get(key.encode(), namespace=PROGRESS_NAMESPACE)


# --------------------------------------------------------------------------------- MLflow
def latest_step(run: Run, key: str) -> int | None:
    """The step of ``run``'s latest ``key`` (the one of the highest step: what MLflow keeps as
    latest), None when the run has none. MLflow 3.17's ``RunData`` keeps the latest metrics'
    ``Metric`` objects, steps included, in ``_metric_objs``; its public ``metrics`` holds the
    values alone, and the history of one metric costs a request a run."""
    metrics = _attribute(run.data, "_metric_objs", "mlflow.entities.RunData")
    return max((m.step for m in metrics if m.key == key), default=None)
