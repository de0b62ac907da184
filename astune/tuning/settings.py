"""What a search is asked for and what it hands back: the types every module of the search
floor shares (so that none of them imports another in a loop)."""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astune._checks import check_choice, check_int, check_range
from astune.backbones.registry import DEFAULT_BACKBONE
from astune.checkpoint_policy import SEARCH_DEFAULT, CheckpointPolicy
from astune.config import TRAIN_FIELDS
from astune.losses.catalogue import LOSS_KERNELS
from astune.metrics.objectives import PRIMARY, parse_objectives
from astune.store.storage_retry import DEFAULT_STORAGE_TIMEOUT
from astune.tuning.searchers.samplers import check_sampler
from astune.tuning.searchers.scheduler_checks import check_scheduler

if TYPE_CHECKING:
    import pyarrow.fs

    from astune.config import TrainConfig
    from astune.data.media_encoding import TrainData
    from astune.space.space import SearchSpace
    from astune.store.pareto import FrontPoint

DEFAULT_STORAGE = "astune-runs/ray"
PROGRESS_EVERY_S = 60.0
"""The default interval of the progress line outside a terminal (``--progress-every``), and at
most that of MLflow's ``progress`` metric of a running trial (every minute at the least)."""


class SearchError(ValueError):
    """Bad search settings, found before any trial starts."""


@dataclass
class SearchSettings:
    """What `astune search` was asked for (the CLI flags of docs/contract.md)."""

    dataset: str
    _: KW_ONLY
    space: str | None = None
    warm_start: bool = False  # search the space `recommend` warms (search/warm_start.py)
    portfolio: bool = True  # run what won on past tasks first (tuning/portfolio_start.py)
    reference: str | None = None  # --warm-start's and the portfolio's (None: the packaged prior)
    probe_backbone: str | None = None  # --warm-start's probe (None: recommend's default)
    num_samples: int | None = None
    max_concurrent: int | None = None
    cpus_per_trial: float = 1.0
    gpus_per_trial: float | None = None
    address: str | None = None
    tracking_uri: str | None = None
    storage_path: str | None = None
    storage_timeout: float = DEFAULT_STORAGE_TIMEOUT  # s3: seconds a call waits out an outage
    name: str | None = None
    resume: bool = False
    backbone: str = DEFAULT_BACKBONE  # image and audio entries: their paper backbone
    num_layers: int | None = None
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    epochs: float | None = None
    data_dir: str | None = None
    validation_fraction: float | None = None
    losses: str | None = None
    plugins: str | None = None  # modules that register losses (astune.plugins), comma-separated
    scheduler: Any = None  # a name of SCHEDULER_TYPES, or (API) a Ray Tune scheduler object
    objectives: str | None = None  # "objective,train_seconds": astune.metrics.objectives
    sampler: Any = "tpe"  # a name of searchers.samplers.SAMPLERS, or an Optuna sampler object
    seed: int = 0
    max_failures: int = 1
    max_length: int = 128
    loss_kernel: str = "auto"  # AS-Softmax's implementation (TrainConfig.loss_kernel)
    compile: bool = False  # the trials' model through torch.compile (TrainConfig.compile)
    max_audio_seconds: float | None = None  # None: the config's default (TrainConfig)
    checkpoint_every: str = SEARCH_DEFAULT  # astune.checkpoint_policy: eval, end or minutes
    keep_checkpoints: bool = False  # False: a finished trial's checkpoints leave the storage path
    reuse_actors: bool = True
    console: bool = True
    progress_every: float = PROGRESS_EVERY_S  # seconds between progress lines outside a terminal
    # --verbose: Ray's and MLflow's own console output (astune.tuning.notices). Not a setting
    # that shapes the search: not among the parent run's params, free to change on --resume.
    verbose: bool = False
    # The fields the user gave (the CLI's flags); None: every field off its default counts.
    # On --resume the others take the resumed search's values.
    given: frozenset[str] | None = dataclasses.field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        """What Python callers may give as they like: paths as ``PathLike``, and ``losses`` and
        ``objectives`` as lists, kept as their flags spell them (``as_softmax,softmax``)."""
        for name in ("dataset", "space", "data_dir", "reference", "storage_path"):
            if isinstance(getattr(self, name), os.PathLike):
                setattr(self, name, os.fspath(getattr(self, name)))
        for name in ("losses", "objectives", "plugins"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                setattr(self, name, ",".join(os.fspath(item) for item in value))

    @property
    def scheduler_object(self) -> Any:
        """The Ray Tune scheduler object the Python API was given; None for a name (or none),
        which the space's ``scheduler`` section takes."""
        return None if self.scheduler is None or isinstance(self.scheduler, str) else self.scheduler

    @property
    def plugin_list(self) -> list[str]:
        """The plugins as a list (file paths made absolute: a trial runs elsewhere)."""
        from astune.plugins import plugin_names

        return list(plugin_names(self.plugins)) if self.plugins else []

    def validate(self) -> "SearchSettings":
        for name in (
            "num_samples",
            "max_concurrent",
            "num_layers",
            "max_train_samples",
            "max_eval_samples",
        ):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1)
        check_range("cpus_per_trial", self.cpus_per_trial, 0.0, None, low_open=True)
        check_range("progress_every", self.progress_every, 0.0, None, low_open=True)
        if self.gpus_per_trial is not None:
            check_range("gpus_per_trial", self.gpus_per_trial, 0.0)
        if self.epochs is not None:
            check_range("epochs", self.epochs, 0.0, None, low_open=True)
        if self.max_audio_seconds is not None:  # the range is the config's
            TRAIN_FIELDS["max_audio_seconds"].check(self.max_audio_seconds)
        TRAIN_FIELDS["max_length"].check(self.max_length)
        check_int("seed", self.seed, 0)
        check_int("max_failures", self.max_failures, 0)
        check_range("storage_timeout", self.storage_timeout, 0.0)
        check_sampler(self.sampler, objectives=1)  # the count is the space's: checked again then
        check_scheduler(self.scheduler, objectives=1)  # so are the schedulers'
        check_choice("loss_kernel", self.loss_kernel, LOSS_KERNELS)
        cpu = not (self.gpus_per_trial or 0) > 0
        if self.loss_kernel == "triton" and cpu and os.environ.get("TRITON_INTERPRET") != "1":
            raise SearchError(
                "--loss-kernel triton: kernel='triton' needs CUDA tensors (or TRITON_INTERPRET=1), "
                "but the trials run on the CPU (no --gpus-per-trial); use --loss-kernel auto"
            )
        self.parsed_objectives()
        CheckpointPolicy(self.checkpoint_every)
        self._check_reference()
        return self

    def _check_reference(self) -> None:
        if self.probe_backbone is not None and not self.warm_start:
            raise SearchError("--probe-backbone is read by --warm-start only; add --warm-start")
        if self.reference is None or self.reference.strip().lower() == "none":
            return
        if not (self.warm_start or self.portfolio):
            raise SearchError(
                "--reference is read by --warm-start and the portfolio; add --warm-start or "
                "leave out --no-portfolio"
            )
        from astune.history.reference import reference_file

        try:
            reference_file(self.reference)
        except ValueError as exc:
            raise SearchError(str(exc)) from None

    def parsed_objectives(self, metric: str = PRIMARY) -> tuple[str, ...] | None:
        """``--objectives`` as names, ``metric`` first (None when not given); SearchError (one
        line, naming the flag) on a bad one."""
        if self.objectives is None:
            return None
        try:
            return parse_objectives(self.objectives, metric=metric)
        except ValueError as err:
            raise SearchError(f"--objectives: {err}") from None

    @functools.cached_property
    def experiment_name(self) -> str:
        """``--name``, else ``astune-<dataset>`` (the display name of
        :func:`astune.data.resolve.resolve_dataset`: a folder by its resolved name, so that
        ``./data/x/`` and ``data/x`` are one search)."""
        if self.name:
            return self.name
        from astune.data.resolve import resolve_dataset

        return f"astune-{resolve_dataset(self.dataset).name}"

    def experiment_path(self) -> str:
        root = self.storage_path or DEFAULT_STORAGE
        if "://" not in root:
            root = str(Path(root).resolve())
        return f"{root.rstrip('/')}/{self.experiment_name}"

    def storage(self) -> tuple[pyarrow.fs.FileSystem | None, str]:
        """``(filesystem, path on it)`` of the folder that holds the search's Ray experiment, for
        Ray's ``storage_filesystem`` and ``storage_path`` (None: Ray resolves the path; an
        ``s3://`` one gets calls retried for ``storage_timeout`` s while storage is away)."""
        from astune.store.object_storage import storage_filesystem

        parent = self.experiment_path().rsplit("/", 1)[0]
        return storage_filesystem(parent, timeout_s=self.storage_timeout)

    def experiment_storage(self) -> tuple[pyarrow.fs.FileSystem | None, str]:
        """:meth:`storage` of the search's experiment folder itself."""
        filesystem, parent = self.storage()
        return filesystem, f"{parent}/{self.experiment_name}"


@dataclass(kw_only=True)
class SearchResult:
    """What a finished search hands back: the best trial, and where everything is."""

    experiment: str
    tracking_uri: str
    experiment_path: str
    best_config: dict[str, Any]
    best_objective: float | None
    metric: str
    num_trials: int
    trial_states: dict[str, int]
    parent_run_id: str
    experiment_id: str | None = None
    objectives: tuple[str, ...] = ("objective",)
    front: list[FrontPoint] = dataclasses.field(default_factory=list)  # several objectives
    resume_command: str = ""  # the command that resumes it (tuning.lifecycle.resume; "": none)

    @property
    def optuna_storage(self) -> str:
        """The Optuna storage URL of the search's study (``optuna-dashboard`` opens it)."""
        from astune.tuning.optuna_storage import storage_url

        return storage_url(self.tracking_uri)


@dataclass(kw_only=True)
class PreparedSearch:
    """A search checked and ready for Ray: every bad input has failed by now."""

    settings: SearchSettings
    space: SearchSpace
    base: dict[str, Any]  # the settings every trial shares, as given (artifacts show these)
    train_base: TrainConfig  # the same, built and validated once: each trial derives from it
    data: TrainData
    tracking_uri: str
    notes: tuple[str, ...] = ()  # what was decided before Ray starts (--warm-start's report)
    portfolio_points: int = 0  # the space's first seed points that are the portfolio's
    more_trials: int = 0  # a resume's trials beyond those the search was to run (--num-samples)


def settings_from_args(args: Any) -> SearchSettings:
    """The CLI namespace as settings: flags the user left out keep the defaults."""
    fields = {f.name for f in dataclasses.fields(SearchSettings)}
    values = {k: v for k, v in vars(args).items() if k in fields and v is not None}
    return SearchSettings(**values, given=frozenset(values))
