"""Search overhead: wall time of a real search against the compute its trials do.

A search of ``--num-samples`` short trials (SST-5, a 1-layer MiniLM on a training subset, FIFO,
``--max-concurrent`` trials of ``--cpus-per-trial`` CPUs) runs through ``run_search`` exactly as
``astune search`` runs it: a local Ray started (and stopped) by the search itself, Optuna TPE,
a sqlite MLflow store, one checkpoint per evaluation. It runs once with ``reuse_actors=True`` and
once with ``False``, in one process, each in its own folder.

Definitions (all times are wall-clock seconds):

- wall W: the ``run_search(...)`` call, from validation and tokenization through Ray start-up,
  the trials, the MLflow summary artifacts, to ``ray.shutdown()``.
- compute C_i of trial i: what ``astune.training.fit`` does for the trial, minus checkpointing
  and reporting: ``Run.__init__`` (model and optimizer construction, backbone read from disk)
  plus ``Run.train`` (training steps, every validation evaluation, the test evaluation of the
  best checkpoint), minus the checkpoint writes (``checkpointing.write_checkpoint``: the state
  with the optimizer, and the best weights when they improved) and minus the time inside
  ``tune.report`` (Ray copying the checkpoint folder into its storage, then the hand-off: the
  trial thread waits until the driver has processed the result, MLflow callback included).
  ``final.json``'s ``train_seconds`` (training steps only: evaluations, checkpoint writes and
  reports excluded, and so are the model build and the test evaluation) is shown beside it.
- ideal wall = sum(C_i) / K with K = ``--max-concurrent``: K slots busy with compute only.
- overhead = W - sum(C_i) / K, and its share of W. Exact decomposition, in slot-seconds
  (divide by K for wall seconds): K*W - sum(C_i) = in-fit checkpoint writes + in-fit Ray
  checkpoint copies + in-fit hand-offs + the time each slot spends outside any fit, split by
  what it waits for: the driver alone (before ``Tuner.fit``: validation, tokenization,
  ``ray.init``, the MLflow store and parent run; after it: summary artifacts, ``ray.shutdown``),
  a new worker process (spawn, Ray worker, imports) before its first fit, trial turnover between
  two fits (final report, completion, MLflow, Optuna, actor reset, data fetch), and the tail (the
  slot's last fit is over, another slot still works). Fits never overlap more than K at a time
  (a trial holds its CPU), so fits are assigned to slots by start time.
- For reference, one trial's fit alone in this process with 1 thread (``--reference``): the
  calibration of ``--train-samples``, and the compute a trial would take without the driver,
  Ray and the other trial on the same cores.

How it is measured: the driver wraps astune's and Ray Tune's driver-side functions (in this
process); the trial processes are instrumented through Ray's ``worker_process_setup_hook``
(installed with ``RAY_RUNTIME_ENV_HOOK``, so ``run_search`` still starts Ray itself), which
wraps ``Run.__init__``, ``Run.train``, ``write_checkpoint``, Ray's checkpoint copy and
``tune.report`` and appends timestamps to one JSON-lines file per worker process. The hook
imports no torch (torch fixes its thread count when imported, and Ray sets ``OMP_NUM_THREADS``
only when the trial's actor starts); what a process's first ``Run`` imports lazily
(transformers) is imported, timed, just before it and counted as worker start-up. Nothing astune
computes is changed. ``--no-probe`` runs the searches without the worker hook (wall time only)
to check that the probe itself costs nothing visible. The driver also samples the CPU time of
the machine and of its own process tree: what other users took tells whether a run was disturbed.

Usage (this machine: 2 cores; about 10 minutes on a quiet machine):
  HF_HUB_OFFLINE=1 ASTUNE_DATA_DIR=../shared/data python benchmarks/search_overhead.py \\
      --num-samples 16 --max-concurrent 2 --cpus-per-trial 1 --json /tmp/search_overhead.json \\
      --results benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_PLOT = HERE / "search_overhead.png"
SECTION = "## Search overhead (benchmarks/search_overhead.py)"
PROBE_ENV = "ASTUNE_BENCH_PROBE_DIR"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--num-samples", type=int, default=16, help="trials per search")
    p.add_argument("--max-concurrent", type=int, default=2, help="trials at once (K)")
    p.add_argument("--cpus-per-trial", type=float, default=1.0)
    p.add_argument(
        "--reuse",
        default="both",
        choices=["both", "on", "off"],
        help="reuse_actors of the searches",
    )
    p.add_argument("--order", default="on,off", help="order of the two searches with --reuse both")
    p.add_argument("--dataset", default="sst5")
    p.add_argument("--data-dir", default=None, help="default: $ASTUNE_DATA_DIR")
    p.add_argument("--backbone", default="minilm")
    p.add_argument("--num-layers", type=int, default=1)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument(
        "--train-samples",
        type=int,
        default=1200,
        help="training subset; sized so that one trial computes about 30 s here",
    )
    p.add_argument("--eval-samples", type=int, default=200, help="validation and test subsets")
    p.add_argument(
        "--epochs", type=int, default=2, help="per trial; one evaluation and checkpoint per epoch"
    )
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--reference",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="first time one trial's fit alone in this process (1 thread): the calibration",
    )
    p.add_argument(
        "--probe",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="instrument the trial processes (off: wall time only)",
    )
    p.add_argument(
        "--output-dir",
        default=None,
        help="searches' folders (default: a temporary folder, removed)",
    )
    p.add_argument(
        "--keep-checkpoints", action="store_true", help="keep the *.pt files of the searches"
    )
    p.add_argument("--plot", default=str(DEFAULT_PLOT), help="PNG timeline ('' to skip)")
    p.add_argument("--json", default=None, help="write every number to this file ('-': stdout)")
    p.add_argument(
        "--results",
        default=None,
        help=f"write/replace the section '{SECTION}' of this markdown file",
    )
    p.add_argument(
        "--from-json",
        default=None,
        help="run nothing: print, plot and write the section from the numbers of an earlier --json",
    )
    args = p.parse_args(argv)
    if args.num_samples < 1 or args.max_concurrent < 1 or args.train_samples < 1 or args.epochs < 1:
        p.error("--num-samples, --max-concurrent, --train-samples and --epochs must be >= 1")
    order = [v.strip() for v in args.order.split(",") if v.strip()]
    if sorted(order) != ["off", "on"]:
        p.error(f"--order must name on and off once each, got {args.order!r}")
    args.variants = order if args.reuse == "both" else [args.reuse]
    return args


# ----------------------------------------------------------------------------- worker probe
def worker_probe_setup() -> None:
    """Runs once in every Ray worker process as it starts (``worker_process_setup_hook``).

    Self-contained (cloudpickle ships it by value): wraps the trial-side functions and appends
    one JSON line per call to ``$ASTUNE_BENCH_PROBE_DIR/worker-<pid>.jsonl``.

    It must not import torch: torch fixes its thread count from ``OMP_NUM_THREADS`` when it is
    imported, and Ray sets that variable (to the trial's CPUs) only when the trial's actor
    starts, after this hook. So astune's modules are wrapped when the trial imports them (a
    post-import hook), and what the first ``Run`` of a process imports lazily (transformers, the
    BERT modules) is imported, timed, just before that ``Run`` is built, so that the first
    trial of a process is not charged for it."""
    import importlib.abc
    import json as _json
    import os as _os
    import re as _re
    import sys as _sys
    import threading
    import time as _time

    folder = _os.environ.get("ASTUNE_BENCH_PROBE_DIR")
    if not folder:
        return
    hook_start = _time.time()
    with open("/proc/self/stat") as fh:  # the process's start, in clock ticks after boot
        started = int(fh.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as fh:
        boot = next(int(line.split()[1]) for line in fh if line.startswith("btime"))
    created = boot + started / _os.sysconf("SC_CLK_TCK")
    path = _os.path.join(folder, f"worker-{_os.getpid()}.jsonl")
    lock = threading.Lock()

    def emit(**event: Any) -> None:
        event["pid"] = _os.getpid()
        with lock, open(path, "a") as fh:
            fh.write(_json.dumps(event) + "\n")

    import ray.tune as tune  # imports no torch
    from ray.train._internal.storage import StorageContext

    def trial_of(text: Any) -> str | None:
        found = _re.search(r"trial_([^/\\]+)", str(text or ""))
        return found.group(1) if found else None

    def context_trial() -> str | None:
        try:
            return tune.get_context().get_trial_id()
        except Exception:
            return None

    def timed(
        kind: str,
        fn: Callable,
        trial: Callable[..., str | None],
        extra: Callable[..., dict] | None = None,
    ):
        def wrapper(*a: Any, **k: Any) -> Any:
            t = _time.time()
            try:
                return fn(*a, **k)
            finally:
                event = dict(
                    kind=kind, trial=trial(*a, **k) or context_trial(), start=t, end=_time.time()
                )
                if extra is not None:
                    try:
                        event.update(extra(*a, **k))
                    except Exception:
                        pass
                emit(**event)

        return wrapper

    def folder_bytes(folder: Any, *a: Any, **k: Any) -> dict:
        return {
            "bytes": sum(
                p.stat().st_size
                for p in __import__("pathlib").Path(folder).iterdir()
                if p.is_file()
            )
        }

    def threads(self: Any, *a: Any, **k: Any) -> dict:
        import torch

        return {
            "torch_threads": torch.get_num_threads(),
            "omp_num_threads": _os.environ.get("OMP_NUM_THREADS"),
            "nice": _os.nice(0),
        }

    imported = []

    def lazy_imports(config: Any) -> None:
        if imported:
            return
        imported.append(True)
        t = _time.time()


        emit(
            kind="imports",
            trial=trial_of(getattr(config, "output_dir", None)),
            start=t,
            end=_time.time(),
        )

    def patch_training(training: Any) -> None:
        original_init = training.Run.__init__

        def init_after_imports(self: Any, config: Any, *a: Any, **k: Any) -> None:
            lazy_imports(config)
            build(self, config, *a, **k)

        build = timed(
            "build",
            original_init,
            lambda self, config, *a, **k: trial_of(getattr(config, "output_dir", None)),
            threads,
        )
        training.Run.__init__ = init_after_imports
        training.Run.train = timed(
            "train", training.Run.train, lambda self, *a, **k: trial_of(self.out)
        )

    def patch_checkpointing(ckpt: Any) -> None:
        ckpt.write_checkpoint = timed(
            "ckpt_write",
            ckpt.write_checkpoint,
            lambda folder, *a, **k: trial_of(folder),
            folder_bytes,
        )

    class PostImport(importlib.abc.MetaPathFinder):
        """Calls ``patches[name](module)`` right after ``name`` is first imported."""

        def __init__(self, patches: dict) -> None:
            self.patches = patches

        def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
            if name not in self.patches:
                return None
            for finder in _sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
            else:
                return None
            loader, patch = spec.loader, self.patches.pop(name)
            original_exec = loader.exec_module

            def exec_module(module: Any) -> None:
                original_exec(module)
                patch(module)

            loader.exec_module = exec_module
            return spec

    patches = {"astune.training": patch_training, "astune.checkpointing": patch_checkpointing}
    for name in list(patches):
        if name in _sys.modules:
            patches.pop(name)(_sys.modules[name])
    if patches:
        _sys.meta_path.insert(0, PostImport(patches))
    StorageContext.persist_current_checkpoint = timed(
        "ckpt_persist", StorageContext.persist_current_checkpoint, lambda self, *a, **k: None
    )
    tune.report = timed(
        "report",
        tune.report,
        lambda *a, **k: None,
        lambda metrics, checkpoint=None, **k: {
            "checkpoint": checkpoint is not None,
            "final": bool(metrics.get("final")),
        },
    )
    emit(
        kind="worker",
        trial=None,
        created=created,
        start=hook_start,
        end=_time.time(),
        torch_imported="torch" in _sys.modules,
    )


def ray_runtime_env_hook(runtime_env: dict | None) -> dict:
    """``RAY_RUNTIME_ENV_HOOK``: ray.init (called by run_search) adds the worker probe."""
    runtime_env = dict(runtime_env or {})
    runtime_env["worker_process_setup_hook"] = worker_probe_setup
    return runtime_env


# ----------------------------------------------------------------------------- driver probe
class DriverProbe:
    """Wraps driver-side functions of astune and Ray Tune (this process) and records calls."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._installed = False

    def reset(self) -> None:
        self.events = []

    def _wrap(
        self, owner: Any, name: str, kind: str, trial_arg: Callable[..., str | None] | None = None
    ) -> None:
        original = getattr(owner, name)

        def wrapper(*a: Any, **k: Any) -> Any:
            t = time.time()
            try:
                return original(*a, **k)
            finally:
                trial = None
                if trial_arg is not None:
                    try:
                        trial = trial_arg(*a, **k)
                    except Exception:
                        trial = None
                self.events.append(dict(kind=kind, trial=trial, start=t, end=time.time()))

        setattr(owner, name, wrapper)

    def install(self) -> None:
        if self._installed:
            return
        import ray
        from ray import tune
        from ray.tune.execution.tune_controller import TuneController

        from astune.search import execution, runner, tracking

        def tid(trial: Any) -> str | None:
            return getattr(trial, "trial_id", None)

        def callback_trial(
            self_: Any, iteration: int = 0, trials: Any = None, trial: Any = None, **k: Any
        ):
            return tid(trial if trial is not None else k.get("trial"))

        self._wrap(runner, "_encode", "tokenize")
        self._wrap(execution, "init_ray", "ray_init")
        self._wrap(ray, "shutdown", "ray_shutdown")
        self._wrap(tracking.SearchTracker, "start", "mlflow_parent")
        self._wrap(tracking.SearchTracker, "finish", "mlflow_finish")
        self._wrap(tune.Tuner, "fit", "tuner_fit")
        self._wrap(execution, "_summarize", "summary")
        for hook in ("on_trial_start", "on_trial_result", "on_trial_complete"):
            self._wrap(tracking.MLflowTrialCallback, hook, f"mlflow.{hook}", callback_trial)
        self._wrap(TuneController, "checkpoint", "tune_experiment_checkpoint")
        self._wrap(
            TuneController,
            "_schedule_trial_actor",
            "schedule_actor",
            lambda s, trial, *a, **k: tid(trial),
        )
        self._wrap(
            TuneController,
            "_schedule_trial_reset",
            "reset_actor",
            lambda s, trial, *a, **k: tid(trial),
        )
        self._wrap(
            TuneController,
            "_process_trial_results",
            "process_results",
            lambda s, trial, *a, **k: tid(trial),
        )
        # Tune's experiment snapshot: the driver uploads its whole staging folder (where trials'
        # get_trial_dir() points) to the storage path, in a background thread; forced snapshots
        # wait for the previous upload on the driver's loop.
        from ray.train._internal import storage as ray_storage
        from ray.train._internal import syncer as ray_syncer

        original_upload = ray_storage._upload_to_fs_path

        def upload(local_path: str, *a: Any, **k: Any) -> Any:
            t = time.time()
            size = _tree_bytes(local_path)
            try:
                return original_upload(local_path, *a, **k)
            finally:
                self.events.append(
                    dict(
                        kind="staging_upload",
                        trial=None,
                        start=t,
                        end=time.time(),
                        bytes=size,
                        path=str(local_path),
                    )
                )

        ray_storage._upload_to_fs_path = upload
        self._wrap(ray_syncer._BackgroundSyncer, "wait", "sync_wait")
        self._installed = True

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == kind]

    def total(self, kind: str) -> float:
        return sum(e["end"] - e["start"] for e in self.of(kind))


def _tree_bytes(path: str) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(folder, name))
            except OSError:
                pass
    return total


class CpuMonitor:
    """Samples, every ``period`` s, the CPU time of the whole machine and of this process's tree
    (the driver, the Ray it starts, the trials): what other users took of the cores during a
    search tells whether it was disturbed."""

    def __init__(self, period: float = 2.0):
        import threading

        self.period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._mine: dict[int, float] = {}
        self.samples: list[list[float]] = []

    def _tree_cpu(self) -> float:
        """CPU seconds of this process and its live descendants (read from /proc); a process
        keeps the most it was seen with after it exits."""
        ticks = os.sysconf("SC_CLK_TCK")
        parent, cpu = {}, {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(entry)] = int(fields[1])
            cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / ticks
        me, tree = os.getpid(), set()
        for pid in parent:
            seen, p = [], pid
            while p and p not in tree and p != me and p in parent and p not in seen:
                seen.append(p)
                p = parent[p]
            if p == me or p in tree:
                tree.update(seen)
        tree.add(me)
        for pid in tree:
            self._mine[pid] = max(self._mine.get(pid, 0.0), cpu.get(pid, 0.0))
        return sum(self._mine.values())

    @staticmethod
    def _busy() -> float:
        """CPU seconds the whole machine has been busy (/proc/stat)."""
        values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        user, nice, system, idle, iowait, irq, softirq = values[:7]
        steal = values[7] if len(values) > 7 else 0
        return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            self.samples.append([time.time(), self._busy(), self._tree_cpu(), os.getloadavg()[0]])

    def __enter__(self) -> "CpuMonitor":
        self._start = [time.time(), self._busy(), self._tree_cpu(), os.getloadavg()[0]]
        self.samples.append(self._start)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append([time.time(), self._busy(), self._tree_cpu(), os.getloadavg()[0]])

    def summary(self) -> dict[str, Any]:
        (t0, busy0, mine0, _), (t1, busy1, mine1, _) = self.samples[0], self.samples[-1]
        cores, span = os.cpu_count() or 1, max(1e-9, t1 - t0)
        others = max(0.0, (busy1 - busy0) - (mine1 - mine0))
        return {
            "span_s": span,
            "machine_busy_cores": (busy1 - busy0) / span,
            "mine_cores": (mine1 - mine0) / span,
            "others_cores": others / span,
            "others_share_pct": 100.0 * others / (cores * span),
            "max_loadavg": max(s[3] for s in self.samples),
        }


# ----------------------------------------------------------------------------- the searches
def space_mapping(args: argparse.Namespace) -> dict[str, Any]:
    """tests/spaces/tiny.yaml's shape: FIFO, as_softmax (delta, AS-Speed) and softmax."""
    return {
        "extends": "default",
        "description": "benchmarks/search_overhead.py",
        "num_samples": args.num_samples,
        "losses": ["as_softmax", "softmax"],
        "scheduler": {"type": "none"},
        "params": {
            "lr": {"type": "fixed", "value": args.lr},
            "batch_size": {"type": "fixed", "value": args.batch_size},
            "epochs": {"type": "fixed", "value": args.epochs},
        },
        "loss_params": {
            "as_softmax": {
                "delta": {"type": "float", "low": 0.1, "high": 0.5, "step": 0.05},
                "warmup_ratio": {"type": "fixed", "value": 0.0},
            }
        },
        "speed_params": {
            "as_speed": {"type": "categorical", "choices": [True, False]},
            "lam": {"type": "float", "low": 1.0, "high": 2.0, "step": 0.5},
            "max_accum_steps": {"type": "int", "low": 2, "high": 3},
        },
        "seed_points": [],
    }


def run_variant(
    args: argparse.Namespace, variant: str, root: Path, probe: DriverProbe
) -> dict[str, Any]:
    import yaml

    from astune.search.runner import SearchSettings, run_search

    folder = root / f"reuse-{variant}"
    folder.mkdir(parents=True, exist_ok=True)
    space = folder / "space.yaml"
    space.write_text(yaml.safe_dump(space_mapping(args), sort_keys=False))
    probe_dir = folder / "probe"
    probe_dir.mkdir(exist_ok=True)
    if args.probe:
        os.environ[PROBE_ENV] = str(probe_dir)
        os.environ["RAY_RUNTIME_ENV_HOOK"] = f"{__name__}.ray_runtime_env_hook"
    else:
        os.environ.pop(PROBE_ENV, None)
        os.environ.pop("RAY_RUNTIME_ENV_HOOK", None)
    settings = SearchSettings(
        dataset=args.dataset,
        space=str(space),
        num_samples=args.num_samples,
        max_concurrent=args.max_concurrent,
        cpus_per_trial=args.cpus_per_trial,
        storage_path=str(folder / "ray"),
        tracking_uri=f"sqlite:///{folder / 'mlflow.db'}",
        name=f"overhead-reuse-{variant}",
        backbone=args.backbone,
        num_layers=args.num_layers,
        max_train_samples=args.train_samples,
        max_eval_samples=args.eval_samples,
        max_length=args.max_length,
        data_dir=args.data_dir,
        scheduler="none",
        seed=args.seed,
        reuse_actors=variant == "on",
        console=False,
    )
    probe.reset()
    load_before = os.getloadavg()
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    with CpuMonitor() as monitor:
        t0 = time.time()
        summary = run_search(settings)
        t_end = time.time()
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    load_after = os.getloadavg()
    os.environ.pop("RAY_RUNTIME_ENV_HOOK", None)
    os.environ.pop(PROBE_ENV, None)
    result = analyse(args, variant, t0, t_end, probe, probe_dir, summary)
    result["driver_cpu_s"] = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    result["loadavg_before"], result["loadavg_after"] = list(load_before), list(load_after)
    result["cpu"] = monitor.summary()
    result["storage"] = storage_sizes(folder / "ray")
    result["folder"] = str(folder)
    if not args.keep_checkpoints:
        # the searches' checkpoints: in the storage path, and in Ray's experiment folder under
        # /tmp/ray/session_*/artifacts (driver_artifacts/ and working_dirs/, where trials' run/
        # folders are), which ray.shutdown leaves behind
        staging = {Path(e["path"]).parent for e in probe.of("staging_upload") if e.get("path")}
        for place in [folder, *staging]:
            for pt in place.rglob("*.pt*"):
                pt.unlink(missing_ok=True)
    return result


def storage_sizes(folder: Path) -> dict[str, Any]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return {
        "files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "pt_bytes": sum(p.stat().st_size for p in files if p.suffix == ".pt"),
    }


# ----------------------------------------------------------------------------- analysis
def read_worker_events(probe_dir: Path) -> list[dict[str, Any]]:
    events = []
    for path in sorted(probe_dir.glob("worker-*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                events.append(json.loads(line))
    # report/persist events name no trial when the context lookup failed: attribute by pid+time
    return events


def _dur(e: dict[str, Any]) -> float:
    return e["end"] - e["start"]


def mlflow_children(summary: Any) -> dict[str, dict[str, Any]]:
    from mlflow import MlflowClient

    client = MlflowClient(summary.tracking_uri)
    exp = client.get_experiment_by_name(summary.experiment)
    found = client.search_runs(
        [exp.experiment_id], "tags.`astune.role` = 'trial'", max_results=1000
    )
    out = {}
    for run in found:
        out[run.data.tags["astune.trial_id"]] = {
            "start": run.info.start_time / 1000,
            "end": (run.info.end_time or 0) / 1000,
            "status": run.info.status,
            "train_seconds": run.data.metrics.get("train_seconds"),
            "loss": run.data.params.get("loss"),
            "as_speed": run.data.params.get("as_speed"),
        }
    return out


def analyse(
    args: argparse.Namespace,
    variant: str,
    t0: float,
    t_end: float,
    probe: DriverProbe,
    probe_dir: Path,
    summary: Any,
) -> dict[str, Any]:
    K = args.max_concurrent
    wall = t_end - t0
    runs = mlflow_children(summary)
    out: dict[str, Any] = {
        "variant": variant,
        "reuse_actors": variant == "on",
        "wall_s": wall,
        "t0": t0,
        "t_end": t_end,
        "num_trials": summary.num_trials,
        "trial_states": summary.trial_states,
        "K": K,
        "driver": driver_phases(probe, t0, t_end),
    }
    out["driver_totals"] = {
        "mlflow_callback_s": sum(
            probe.total(f"mlflow.{h}")
            for h in ("on_trial_start", "on_trial_result", "on_trial_complete")
        ),
        "mlflow_on_trial_result_s": probe.total("mlflow.on_trial_result"),
        "mlflow_on_trial_result_calls": len(probe.of("mlflow.on_trial_result")),
        "mlflow_on_trial_start_s": probe.total("mlflow.on_trial_start"),
        "mlflow_on_trial_complete_s": probe.total("mlflow.on_trial_complete"),
        "tune_experiment_checkpoint_s": probe.total("tune_experiment_checkpoint"),
        "tune_experiment_checkpoint_calls": len(probe.of("tune_experiment_checkpoint")),
        "process_results_s": probe.total("process_results"),
        "staging_uploads": len(probe.of("staging_upload")),
        "staging_upload_s": probe.total("staging_upload"),
        "staging_upload_gb": sum(e.get("bytes", 0) for e in probe.of("staging_upload")) / 1e9,
        "sync_wait_s": probe.total("sync_wait"),
        "actors_created": len(probe.of("schedule_actor")),
        "actors_reset": len(probe.of("reset_actor")),
    }
    out["uploads"] = [[e["start"], e["end"], e.get("bytes", 0)] for e in probe.of("staging_upload")]
    if not args.probe:
        out["trials"] = {tid: {"mlflow": r} for tid, r in runs.items()}
        out["summed_train_seconds"] = sum(r["train_seconds"] or 0 for r in runs.values())
        return out
    events = read_worker_events(probe_dir)
    trials = per_trial(events, runs)
    out["trials"] = trials
    complete = {
        tid: t
        for tid, t in trials.items()
        if t.get("fit_start") is not None and t.get("fit_end") is not None
    }
    compute = sum(t["compute_s"] for t in complete.values())
    out["summed_compute_s"] = compute
    out["summed_train_seconds"] = sum((t.get("train_seconds") or 0.0) for t in complete.values())
    out["ideal_wall_s"] = compute / K
    out["overhead_s"] = wall - compute / K
    out["overhead_pct"] = 100.0 * out["overhead_s"] / wall
    out["mean_compute_s"] = compute / max(1, len(complete))
    out["compute_s"] = sorted(t["compute_s"] for t in complete.values())
    workers = [dict(e) for e in events if e["kind"] == "worker"]
    for w in workers:  # ready: the process has started and imported what a trial needs
        imports = [e for e in events if e["kind"] == "imports" and e["pid"] == w["pid"]]
        w["imports_s"] = sum(_dur(e) for e in imports)
        w["ready"] = max([w["end"], *(e["end"] for e in imports)])
    builds = [e for e in events if e["kind"] == "build"]
    out["torch_threads"] = sorted(
        {e.get("torch_threads") for e in builds if e.get("torch_threads")}
    )
    out["worker_nice"] = sorted({e.get("nice") for e in builds if e.get("nice") is not None})
    out["slots"], slot_parts = slot_accounting(complete, t0, t_end, K, out["driver"], workers)
    in_fit = {
        k: sum(t[k] for t in complete.values())
        for k in ("ckpt_write_s", "ckpt_persist_s", "handoff_s")
    }
    parts = {**in_fit, **slot_parts}
    out["breakdown_slot_s"] = parts
    out["breakdown_wall_s"] = {k: v / K for k, v in parts.items()}
    out["breakdown_check_s"] = K * wall - compute - sum(parts.values())  # ~0 by construction
    out["workers"] = workers
    out["gaps"] = gap_details(out["slots"], complete, probe, runs)
    out["checkpoints"] = {
        "writes": sum(t["ckpt_writes"] for t in complete.values()),
        "mean_write_s": _safe_mean([w for t in complete.values() for w in t["ckpt_write_each"]]),
        "mean_persist_s": _safe_mean(
            [w for t in complete.values() for w in t["ckpt_persist_each"]]
        ),
        "mean_bytes": _safe_mean([b for t in complete.values() for b in t["ckpt_bytes_each"]]),
    }
    return out


def _safe_mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def per_trial(
    events: list[dict[str, Any]], runs: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Per trial: its fit interval, compute, and the checkpoint/report time inside it."""
    trials: dict[str, dict[str, Any]] = {}
    builds = [e for e in events if e["kind"] == "build" and e.get("trial")]
    trains = [e for e in events if e["kind"] == "train" and e.get("trial")]
    for e in builds:
        trials.setdefault(e["trial"], {})["build"] = e
    for e in trains:
        trials.setdefault(e["trial"], {})["train"] = e
    # report/persist events: attribute to the trial whose fit (same pid) contains them
    out: dict[str, dict[str, Any]] = {}
    for tid, parts in trials.items():
        build, train = parts.get("build"), parts.get("train")
        if build is None or train is None:
            out[tid] = {"fit_start": None, "fit_end": None, "mlflow": runs.get(tid)}
            continue
        pid, lo, hi = train["pid"], build["start"], train["end"]

        def inside(e: dict[str, Any]) -> bool:
            return e["pid"] == pid and lo <= e["start"] and e["end"] <= hi + 1e-6

        writes = [
            e
            for e in events
            if e["kind"] == "ckpt_write"
            and (e.get("trial") == tid or (not e.get("trial") and inside(e)))
        ]
        persists = [e for e in events if e["kind"] == "ckpt_persist" and inside(e)]
        reports = [e for e in events if e["kind"] == "report" and inside(e)]
        final = [
            e
            for e in events
            if e["kind"] == "report"
            and e["pid"] == pid
            and e.get("final")
            and e["start"] >= hi - 1e-6
        ]
        final = min(final, key=lambda e: e["start"]) if final else None
        write_s = sum(_dur(e) for e in writes)
        persist_s = sum(_dur(e) for e in persists)
        report_s = sum(_dur(e) for e in reports)
        build_s, train_s = _dur(build), _dur(train)
        mlrun = runs.get(tid) or {}
        out[tid] = {
            "pid": pid,
            "fit_start": lo,
            "fit_end": hi,
            "build_s": build_s,
            "train_s": train_s,
            "compute_s": build_s + train_s - write_s - report_s,
            "ckpt_write_s": write_s,
            "ckpt_persist_s": persist_s,
            "handoff_s": report_s - persist_s,
            "ckpt_writes": len(writes),
            "ckpt_write_each": [_dur(e) for e in writes],
            "ckpt_persist_each": [_dur(e) for e in persists],
            "ckpt_bytes_each": [e.get("bytes", 0) for e in writes],
            "reports": len(reports),
            "final_report": [final["start"], final["end"]] if final else None,
            "segments": {
                "ckpt_write": [[e["start"], e["end"]] for e in writes],
                "ckpt_persist": [[e["start"], e["end"]] for e in persists],
                "handoff": [[e["start"], e["end"]] for e in reports],  # persist drawn over it
            },
            "train_seconds": mlrun.get("train_seconds"),
            "mlflow": mlrun,
        }
    return out


def slot_accounting(
    trials: dict[str, dict[str, Any]],
    t0: float,
    t_end: float,
    K: int,
    driver: dict[str, Any],
    workers: list[dict[str, Any]],
):
    """Assign fits to K slots by start time, then split the slot time outside fits by what the
    slot waits for: the driver alone (before ``Tuner.fit``: validation, tokenization, Ray start,
    MLflow; after it: summary, shutdown), a new worker process starting (spawn to imports done)
    before its first fit, trial turnover between two fits (the rest of a gap: final report,
    completion, MLflow, Optuna, actor reset, data fetch), and the end of the other slots' work
    (the rest of the tail)."""
    slots: list[list[str]] = []
    ends: list[float] = []
    for tid, t in sorted(trials.items(), key=lambda kv: kv[1]["fit_start"]):
        free = [i for i, e in enumerate(ends) if e <= t["fit_start"] + 1e-6]
        if free:
            i = min(free, key=lambda j: ends[j])
        else:
            slots.append([])
            ends.append(t0)
            i = len(slots) - 1
        slots[i].append(tid)
        ends[i] = t["fit_end"]
    if len(slots) > K:
        print(
            f"warning: fits overlapped {len(slots)} at a time (K = {K}); slot accounting is approximate",
            file=sys.stderr,
        )
    fit_start = t0 + driver.get("tuner_fit_start", 0.0)
    fit_end = t0 + driver.get("tuner_fit_end", t_end - t0)
    by_pid = {w["pid"]: w for w in workers}

    def overlap(a: float, b: float, lo: float, hi: float) -> float:
        return max(0.0, min(b, hi) - max(a, lo))

    parts = dict(
        driver_startup_s=0.0, worker_start_s=0.0, turnover_s=0.0, tail_wait_s=0.0, driver_end_s=0.0
    )
    for slot in slots:
        idle = [(t0, trials[slot[0]]["fit_start"], slot[0])]
        idle += [(trials[a]["fit_end"], trials[b]["fit_start"], b) for a, b in zip(slot, slot[1:])]
        idle.append((trials[slot[-1]]["fit_end"], t_end, None))
        for a, b, nxt in idle:
            before = overlap(a, b, t0, fit_start)
            after = overlap(a, b, fit_end, t_end)
            worker = 0.0
            w = by_pid.get(trials[nxt]["pid"]) if nxt else None
            if w is not None and w["created"] >= a - 1.0 and w["ready"] <= b + 1e-6:
                worker = overlap(a, b, max(w["created"], fit_start), min(w["ready"], fit_end))
            rest = (b - a) - before - after - worker
            parts["driver_startup_s"] += before
            parts["driver_end_s"] += after
            parts["worker_start_s"] += worker
            parts["turnover_s" if nxt else "tail_wait_s"] += rest
    parts["unused_slots_s"] = max(0, K - len(slots)) * (t_end - t0)
    return slots, parts


def gap_details(
    slots: list[list[str]], trials: dict, probe: DriverProbe, runs: dict
) -> dict[str, Any]:
    """Each gap between two fits in a slot, cut at the driver's events: the previous trial's last
    report and completion (MLflow run end), the next trial's actor scheduled/reset and its
    MLflow run start, and its fit start."""
    starts = {e["trial"]: e for e in probe.of("mlflow.on_trial_start")}
    completes = {e["trial"]: e for e in probe.of("mlflow.on_trial_complete")}
    scheduled = {}
    for kind in ("schedule_actor", "reset_actor"):
        for e in probe.of(kind):
            scheduled.setdefault(e["trial"], e)
    rows = []
    for slot in slots:
        for a, b in zip(slot, slot[1:]):
            pa, nb = trials[a], trials[b]
            row = {"prev": a, "next": b, "gap_s": nb["fit_start"] - pa["fit_end"]}
            if a in completes:
                row["prev_fit_end_to_complete_s"] = completes[a]["end"] - pa["fit_end"]
            if b in scheduled:
                row["next_scheduled"] = scheduled[b]["kind"]
                row["next_scheduled_to_fit_s"] = nb["fit_start"] - scheduled[b]["start"]
            if b in starts:
                row["next_trial_start_to_fit_s"] = nb["fit_start"] - starts[b]["start"]
            if a in completes and b in scheduled:
                row["complete_to_next_scheduled_s"] = scheduled[b]["start"] - completes[a]["end"]
            rows.append(row)

    def mean(key: str) -> float | None:
        return _safe_mean([r[key] for r in rows if key in r])

    return {
        "rows": rows,
        "count": len(rows),
        "mean_gap_s": mean("gap_s"),
        "mean_prev_fit_end_to_complete_s": mean("prev_fit_end_to_complete_s"),
        "mean_complete_to_next_scheduled_s": mean("complete_to_next_scheduled_s"),
        "mean_next_scheduled_to_fit_s": mean("next_scheduled_to_fit_s"),
        "mean_next_trial_start_to_fit_s": mean("next_trial_start_to_fit_s"),
    }


def driver_phases(probe: DriverProbe, t0: float, t_end: float) -> dict[str, Any]:
    def first(kind: str) -> dict[str, Any] | None:
        found = probe.of(kind)
        return found[0] if found else None

    phases: dict[str, Any] = {}
    ray_init, tok, fit, summ, shut, parent, fin = (
        first(k)
        for k in (
            "ray_init",
            "tokenize",
            "tuner_fit",
            "summary",
            "ray_shutdown",
            "mlflow_parent",
            "mlflow_finish",
        )
    )
    if tok:
        phases["tokenize_s"] = _dur(tok)
    if ray_init:
        phases["before_ray_s"] = (
            ray_init["start"] - t0
        )  # validation, space, backbone check, tokenization
        phases["ray_init_s"] = _dur(ray_init)
    if parent:
        phases["mlflow_parent_s"] = _dur(parent)
    if fit and ray_init:
        phases["ray_up_to_tuner_fit_s"] = fit["start"] - ray_init["end"]
        phases["tuner_fit_s"] = _dur(fit)
        phases["tuner_fit_start"] = fit["start"] - t0
        phases["tuner_fit_end"] = fit["end"] - t0
    if summ:
        phases["summary_s"] = _dur(summ)
    if fin:
        phases["mlflow_finish_s"] = _dur(fin)
    if shut:
        phases["ray_shutdown_s"] = _dur(shut)
        phases["ray_shutdown_start"] = shut["start"] - t0
    return phases


# ----------------------------------------------------------------------------- reference fit
def reference_fit(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """One trial's fit alone in this process with 1 thread (the trials' thread count): the
    calibration of --train-samples, and the compute a trial would take without neighbours."""
    import torch

    from astune.config import TrainConfig
    from astune.training import Run, load_encoded

    values = dict(
        dataset=args.dataset,
        data_dir=args.data_dir or os.environ.get("ASTUNE_DATA_DIR"),
        backbone=args.backbone,
        num_layers=args.num_layers,
        max_length=args.max_length,
        max_train_samples=args.train_samples,
        max_eval_samples=args.eval_samples,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        loss="as_softmax",
        delta=0.3,
        seed=args.seed,
        device="cpu",
        output_dir=str(root / "reference"),
    )
    data = load_encoded(TrainConfig.from_dict(values))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    import astune.checkpointing as ckpt

    writes: list[float] = []
    original = ckpt.write_checkpoint

    def timed_write(*a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        try:
            return original(*a, **k)
        finally:
            writes.append(time.perf_counter() - t)

    ckpt.write_checkpoint = timed_write
    try:
        t = time.perf_counter()
        run = Run(TrainConfig.from_dict(values), data)
        build = time.perf_counter() - t
        t = time.perf_counter()
        final = run.train(None, False)
        train = time.perf_counter() - t
    finally:
        ckpt.write_checkpoint = original
        torch.set_num_threads(threads)
    shutil.rmtree(root / "reference", ignore_errors=True)
    return {
        "build_s": build,
        "train_s": train,
        "ckpt_write_s": sum(writes),
        "ckpt_writes": len(writes),
        "compute_s": build + train - sum(writes),
        "train_seconds": final["train_seconds"],
        "n_train": len(data.splits["train"]),
        "n_validation": len(data.splits["validation"]),
        "n_test": len(data.splits["test"]),
    }


# ----------------------------------------------------------------------------- report
def machine_info() -> dict[str, Any]:
    import mlflow
    import optuna
    import ray
    import torch

    model = platform.processor() or platform.machine()
    try:
        for line in subprocess.run(
            ["lscpu"], capture_output=True, text=True, check=False
        ).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "ray": ray.__version__,
        "mlflow": mlflow.__version__,
        "optuna": optuna.__version__,
    }


def machine_cores() -> int:
    return os.cpu_count() or 1


def fmt(value: Any, spec: str = ".1f") -> str:
    return "n/a" if value is None else format(value, spec)


def table_rows(results: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for r in results:
        rows.append(
            [
                f"reuse_actors={'on' if r['reuse_actors'] else 'off'}",
                str(r["num_trials"]),
                fmt(r["wall_s"]),
                fmt(r.get("summed_compute_s")),
                fmt(r.get("ideal_wall_s")),
                fmt(r.get("overhead_s")),
                fmt(r.get("overhead_pct"), ".1f")
                + ("%" if r.get("overhead_pct") is not None else ""),
                fmt(r.get("mean_compute_s")),
                fmt(r.get("summed_train_seconds")),
            ]
        )
    return rows


HEADER = [
    "search",
    "trials",
    "wall s",
    "summed compute s",
    "ideal wall s (= sum/K)",
    "overhead s",
    "overhead % of wall",
    "mean compute per trial s",
    "sum of final.json train_seconds",
]

PART_NAMES = {
    "driver_startup_s": "driver start-up before Tuner.fit: validation, tokenization, ray.init, MLflow store and parent run, Tuner",
    "worker_start_s": "new worker process before its first fit: spawn, Ray worker, imports (torch, Ray Tune, astune, transformers)",
    "turnover_s": "trial turnover between two fits in a slot: final report, completion, MLflow, Optuna, actor reset, data fetch",
    "tail_wait_s": "tail: a slot's last fit ended, Tuner.fit still running (other slot's last trial, last completion)",
    "driver_end_s": "driver wind-down after Tuner.fit: summary artifacts, MLflow finish, ray.shutdown",
    "ckpt_write_s": "checkpoint writes in the trial (torch.save of state.pt with the optimizer, best_model.pt)",
    "ckpt_persist_s": "Ray's copy of each checkpoint folder into its storage (inside tune.report)",
    "handoff_s": "result hand-off: the trial waits in tune.report for the driver (MLflow log_batch, Tune loop)",
    "unused_slots_s": "slots that never ran a trial",
}


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def breakdown_rows(results: list[dict[str, Any]]) -> list[list[str]]:
    keys = [k for k in PART_NAMES if any(r.get("breakdown_wall_s", {}).get(k) for r in results)]
    rows = []
    for key in keys:
        row = [PART_NAMES[key]]
        for r in results:
            value = r.get("breakdown_wall_s", {}).get(key)
            share = None if value is None else 100.0 * value / r["wall_s"]
            row.append(f"{fmt(value)} s ({fmt(share)}% of wall)")
        rows.append(row)
    row = ["**total overhead** (= wall - summed compute / K)"]
    for r in results:
        row.append(f"**{fmt(r.get('overhead_s'))} s ({fmt(r.get('overhead_pct'))}%)**")
    rows.append(row)
    return rows


def details_lines(results: list[dict[str, Any]]) -> list[str]:
    lines = []
    for r in results:
        name = f"reuse_actors={'on' if r['reuse_actors'] else 'off'}"
        d, dt, g, c = (
            r.get("driver", {}),
            r.get("driver_totals", {}),
            r.get("gaps", {}),
            r.get("checkpoints", {}),
        )
        lines.append(
            f"- {name}: before Ray {fmt(d.get('before_ray_s'))} s (tokenization {fmt(d.get('tokenize_s'))} s), "
            f"ray.init {fmt(d.get('ray_init_s'))} s, MLflow parent + Tuner set-up {fmt(d.get('ray_up_to_tuner_fit_s'))} s, "
            f"first fit starts at {fmt(min((t['fit_start'] for t in r.get('trials', {}).values() if t.get('fit_start')), default=None) - r['t0'] if r.get('trials') else None)} s; "
            f"summary artifacts {fmt(d.get('summary_s'))} s, ray.shutdown {fmt(d.get('ray_shutdown_s'))} s. "
            f"Actors reset for a new trial: {dt.get('actors_reset')}. "
            f"Gaps between fits: {g.get('count')} of mean {fmt(g.get('mean_gap_s'), '.2f')} s = fit end -> trial complete "
            f"{fmt(g.get('mean_prev_fit_end_to_complete_s'), '.2f')} s + complete -> next actor scheduled/reset "
            f"{fmt(g.get('mean_complete_to_next_scheduled_s'), '.2f')} s + scheduled -> next fit starts "
            f"{fmt(g.get('mean_next_scheduled_to_fit_s'), '.2f')} s. "
            f"Checkpoints: {c.get('writes')} of {fmt((c.get('mean_bytes') or 0) / 1e6, '.0f')} MB, write "
            f"{fmt(c.get('mean_write_s'), '.2f')} s + Ray copy {fmt(c.get('mean_persist_s'), '.2f')} s each. "
            f"MLflow callback on the driver {fmt(dt.get('mlflow_callback_s'), '.2f')} s in all "
            f"({dt.get('mlflow_on_trial_result_calls')} results: {fmt(dt.get('mlflow_on_trial_result_s'), '.2f')} s); "
            f"Tune experiment snapshots {fmt(dt.get('tune_experiment_checkpoint_s'), '.2f')} s on the driver loop "
            f"(sync waits {fmt(dt.get('sync_wait_s'), '.2f')} s), and {dt.get('staging_uploads')} background uploads "
            f"of the driver staging folder (trials' run/ folders with their checkpoints) to the storage path: "
            f"{fmt(dt.get('staging_upload_gb'), '.1f')} GB in {fmt(dt.get('staging_upload_s'))} s. "
            f"Worker processes {len(r.get('workers', []))}: spawn -> ready for a first trial "
            f"{fmt(_safe_mean([w['ready'] - w['created'] for w in r.get('workers', [])]), '.1f')} s each, of which the "
            f"imports a first Run needs (transformers, the BERT modules) {fmt(_safe_mean([w['imports_s'] for w in r.get('workers', [])]), '.1f')} s; "
            f"trials ran with {'/'.join(map(str, r.get('torch_threads') or ['?']))} torch thread(s) at nice "
            f"{'/'.join(map(str, r.get('worker_nice') or ['?']))}. "
            f"Driver CPU {fmt(r.get('driver_cpu_s'))} s; "
            f"load average before/after {r['loadavg_before'][0]:.2f}/{r['loadavg_after'][0]:.2f}"
            + (
                f"; other users' processes took {r['cpu']['others_cores']:.2f} of the {machine_cores()} cores on average "
                f"during the search (this search's processes {r['cpu']['mine_cores']:.2f})"
                if r.get("cpu")
                else ""
            )
            + "."
        )
    return lines


def strict_overhead(r: dict[str, Any], reference: dict[str, Any]) -> float:
    n = len([t for t in r.get("trials", {}).values() if t.get("fit_start")])
    return r["wall_s"] - n * reference["compute_s"] / r["K"]


def print_report(
    args: argparse.Namespace, machine: dict, reference: dict | None, results: list[dict]
) -> None:
    print(
        f"\nmachine: {machine['cpu']}, {machine['cores']} cores; torch {machine['torch']}, ray {machine['ray']}, "
        f"mlflow {machine['mlflow']}, optuna {machine['optuna']}"
    )
    print(
        f"config: {args.num_samples} trials, K = {args.max_concurrent} concurrent x {args.cpus_per_trial:g} CPU, "
        f"{args.backbone} {args.num_layers} layer(s), max_length {args.max_length}, {args.train_samples} train / "
        f"{args.eval_samples} eval samples, {args.epochs} epochs, batch {args.batch_size}"
    )
    if reference:
        print(
            f"reference fit alone (1 thread): build {reference['build_s']:.1f} s + train {reference['train_s']:.1f} s "
            f"- {reference['ckpt_writes']} checkpoint writes {reference['ckpt_write_s']:.1f} s = compute {reference['compute_s']:.1f} s"
        )
    widths = [max(len(h), *(len(r[i]) for r in table_rows(results))) for i, h in enumerate(HEADER)]
    print("\n" + "  ".join(h.ljust(w) for h, w in zip(HEADER, widths)))
    for row in table_rows(results):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
    if len(results) == 2 and all(r.get("overhead_s") for r in results):
        on = next(r for r in results if r["reuse_actors"])
        off = next(r for r in results if not r["reuse_actors"])
        print(
            f"\nratio off/on: wall {off['wall_s'] / on['wall_s']:.2f}x, overhead {off['overhead_s'] / on['overhead_s']:.2f}x"
        )
    if reference and all(r.get("mean_compute_s") for r in results):
        print(
            "against the compute of a trial alone: "
            + ", ".join(
                f"reuse {'on' if r['reuse_actors'] else 'off'} overhead {strict_overhead(r, reference):.1f} s "
                f"({100 * strict_overhead(r, reference) / r['wall_s']:.1f}%)"
                for r in results
            )
        )
    if all("breakdown_wall_s" in r for r in results):
        print("\noverhead breakdown (wall-equivalent seconds = slot-seconds / K):")
        for row in breakdown_rows(results):
            print("  " + row[0][:60].ljust(60) + "  " + "  ".join(c.ljust(24) for c in row[1:]))
        for line in details_lines(results):
            print(line)


def section_markdown(
    args: argparse.Namespace,
    machine: dict,
    reference: dict | None,
    results: list[dict],
    command: str,
    plot: str | None,
) -> str:
    lines = [SECTION, ""]
    lines.append("Command:")
    lines.append("")
    lines.append("```")
    lines.append(
        ("HF_HUB_OFFLINE=1 " + ("" if args.data_dir else "ASTUNE_DATA_DIR=../shared/data "))
        + command
    )
    lines.append("```")
    lines.append("")
    lines.append(
        f"Machine: {machine['cpu']}, {machine['cores']} cores, shared with other jobs; Python {machine['python']}, "
        f"torch {machine['torch']}, Ray {machine['ray']}, MLflow {machine['mlflow']}, Optuna {machine['optuna']}."
    )
    lines.append("")
    lines.append(
        f"Configuration: {args.num_samples} trials per search, FIFO (no ASHA), K = {args.max_concurrent} concurrent trials "
        f"of {args.cpus_per_trial:g} CPU; SST-5, {args.backbone} cut to {args.num_layers} layer(s), max_length "
        f"{args.max_length}, {args.train_samples} training / {args.eval_samples} validation and test samples, "
        f"{args.epochs} epochs of batch {args.batch_size} (one evaluation and one checkpoint per epoch), losses "
        f"as_softmax (delta, AS-Speed on/off) and softmax proposed by Optuna TPE; a local Ray started by "
        f"`run_search`, sqlite MLflow, Ray storage on the local disk; reuse_actors on and off in one process "
        f"(order: {', '.join(args.variants)})."
    )
    if reference:
        lines.append("")
        lines.append(
            f"Calibration: one trial's fit alone in the benchmark process, 1 thread: model build "
            f"{reference['build_s']:.1f} s + training and evaluations {reference['train_s']:.1f} s - "
            f"{reference['ckpt_writes']} checkpoint writes {reference['ckpt_write_s']:.1f} s = "
            f"**{reference['compute_s']:.1f} s of compute per trial** ({reference['n_train']} training samples)."
        )
    lines.append("")
    lines.append(
        "Definitions: wall = the `run_search` call (validation, tokenization, Ray start-up, trials, "
        "summary, `ray.shutdown`). Compute of a trial = `Run.__init__` (model, optimizer) + `Run.train` "
        "(training, validation evaluations, test evaluation) - checkpoint writes - time inside "
        "`tune.report` (Ray's checkpoint copy, then waiting for the driver), timed inside the trial "
        "processes. Ideal wall = summed compute / K. Overhead = wall - summed compute / K; its parts "
        "below add up to it exactly (slot-seconds / K)."
    )
    lines.append("")
    lines.append(markdown_table(HEADER, table_rows(results)))
    lines.append("")
    if len(results) == 2 and all(r.get("overhead_s") for r in results):
        on = next(r for r in results if r["reuse_actors"])
        off = next(r for r in results if not r["reuse_actors"])
        lines.append(
            f"Ratio off / on: wall {off['wall_s'] / on['wall_s']:.2f}x, overhead "
            f"{off['overhead_s'] / on['overhead_s']:.2f}x."
        )
        lines.append("")
    if reference and all(r.get("mean_compute_s") for r in results):
        lines.append(
            "Mean compute per trial inside the search vs alone: "
            + ", ".join(
                f"reuse {'on' if r['reuse_actors'] else 'off'} {r['mean_compute_s']:.1f} s "
                f"({100 * (r['mean_compute_s'] / reference['compute_s'] - 1):+.0f}%)"
                for r in results
            )
            + f" against {reference['compute_s']:.1f} s alone. The trials share the 2 cores with the driver and "
            "Ray (and with each other), which the compute timed in the trials cannot separate; counted against the "
            "compute of a trial alone, the overhead would be "
            + ", ".join(
                f"reuse {'on' if r['reuse_actors'] else 'off'} {strict_overhead(r, reference):.1f} s "
                f"({100 * strict_overhead(r, reference) / r['wall_s']:.1f}% of wall)"
                for r in results
            )
            + " (wall - trials x compute alone / K)."
        )
        lines.append("")
    if all("breakdown_wall_s" in r for r in results):
        names = [f"reuse_actors={'on' if r['reuse_actors'] else 'off'}" for r in results]
        lines.append("Where the overhead goes (wall-equivalent seconds):")
        lines.append("")
        lines.append(markdown_table(["part", *names], breakdown_rows(results)))
        lines.append("")
        lines.extend(details_lines(results))
        lines.append("")
    target = [r for r in results if r.get("overhead_pct") is not None]
    if target:
        verdict = ", ".join(
            f"reuse {'on' if r['reuse_actors'] else 'off'} {r['overhead_pct']:.1f}% "
            f"({'met' if r['overhead_pct'] < 15 else 'not met'})"
            for r in target
        )
        lines.append(f"Target (overhead under 15% of wall for trials of about 30 s): {verdict}.")
        lines.append("")
    if plot:
        lines.append(
            f"Timeline: `{plot}` (one row per slot; green compute, red checkpoint writes, orange Ray's "
            "checkpoint copy, purple hand-off to the driver, brown a new worker process starting (spawn and imports), "
            "grey the driver alone (start-up, shutdown); the top row, "
            "blue: the driver's background uploads of its staging folder)."
        )
        lines.append("")
    lines.append("<!-- search_overhead:notes -->")
    lines.append("")
    return "\n".join(lines)


def write_results(path: Path, section: str) -> None:
    """Replace this benchmark's section of ``path`` (or append it), keeping the others and any
    hand-written notes after the ``<!-- search_overhead:notes -->`` marker."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    start = text.find(SECTION)
    if start < 0:
        new = text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    else:
        end = text.find("\n## ", start + len(SECTION))
        end = len(text) if end < 0 else end + 1
        old = text[start:end]
        marker = "<!-- search_overhead:notes -->"
        notes = old.split(marker, 1)[1].strip("\n") if marker in old else ""
        body = section.rstrip("\n")
        if notes:
            body += "\n" + notes
        new = text[:start] + body + "\n" + ("\n" + text[end:] if end < len(text) else "")
    path.write_text(new)


# ----------------------------------------------------------------------------- plot
def plot_timeline(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    figure = Figure(figsize=(13, 2.2 + 1.6 * len(results)), dpi=110)
    FigureCanvasAgg(figure)
    axes_list = figure.subplots(len(results), 1, sharex=True, squeeze=False)[:, 0]
    span = max(r["wall_s"] for r in results)
    colors = {
        "compute": "#4caf50",
        "ckpt_write": "#e53935",
        "ckpt_persist": "#fb8c00",
        "handoff": "#8e24aa",
        "build": "#81c784",
        "driver": "#bdbdbd",
        "upload": "#1e88e5",
        "worker": "#795548",
    }
    for axes, r in zip(axes_list, results):
        t0 = r["t0"]
        slots = r.get("slots", [])
        trials = r.get("trials", {})
        order = {
            tid: i + 1
            for i, tid in enumerate(
                sorted(
                    (tid for slot in slots for tid in slot),
                    key=lambda tid: trials[tid]["fit_start"],
                )
            )
        }
        workers = {w["pid"]: w for w in r.get("workers", [])}
        drawn: set[int] = set()
        for y, slot in enumerate(slots):
            for tid in slot:
                t = trials[tid]
                w = workers.get(t.get("pid"))
                if w is not None and w["ready"] <= t["fit_start"] + 1e-6 and w["pid"] not in drawn:
                    drawn.add(w["pid"])  # a new worker process: spawn, Ray and the imports
                    axes.broken_barh(
                        [(w["created"] - t0, w["ready"] - w["created"])],
                        (y - 0.35, 0.7),
                        color=colors["worker"],
                        linewidth=0,
                    )
                axes.broken_barh(
                    [(t["fit_start"] - t0, t["fit_end"] - t["fit_start"])],
                    (y - 0.35, 0.7),
                    color=colors["compute"],
                    linewidth=0,
                )
                for kind in ("handoff", "ckpt_write", "ckpt_persist"):
                    spans = [(a - t0, b - a) for a, b in t["segments"][kind]]
                    axes.broken_barh(spans, (y - 0.35, 0.7), color=colors[kind], linewidth=0)
                axes.text(
                    (t["fit_start"] + t["fit_end"]) / 2 - t0,
                    y,
                    f"#{order[tid]}",
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white",
                )
        y_up = len(slots)
        axes.broken_barh(
            [(a - t0, b - a) for a, b, _ in r.get("uploads", [])],
            (y_up - 0.25, 0.5),
            color=colors["upload"],
            linewidth=0,
        )
        d = r.get("driver", {})
        if "tuner_fit_start" in d:
            axes.axvspan(
                0,
                d["ray_up_to_tuner_fit_s"] + d.get("before_ray_s", 0) + d.get("ray_init_s", 0),
                color=colors["driver"],
                alpha=0.35,
                linewidth=0,
            )
        if "ray_shutdown_start" in d:
            axes.axvspan(
                d["ray_shutdown_start"],
                r["wall_s"],
                color=colors["driver"],
                alpha=0.35,
                linewidth=0,
            )
        axes.axvline(r["wall_s"], color="black", linewidth=1)
        axes.set_yticks(
            range(len(slots) + 1), [f"slot {i + 1}" for i in range(len(slots))] + ["driver upload"]
        )
        axes.set_ylim(-0.6, len(slots) + 0.5)
        axes.set_title(
            f"reuse_actors={'on' if r['reuse_actors'] else 'off'}: wall {r['wall_s']:.0f} s, ideal "
            f"{r.get('ideal_wall_s', float('nan')):.0f} s, overhead {r.get('overhead_s', float('nan')):.0f} s "
            f"({r.get('overhead_pct', float('nan')):.1f}% of wall)",
            fontsize=9,
            loc="left",
        )
        axes.grid(axis="x", alpha=0.3)
    axes_list[-1].set_xlabel("seconds since run_search was called")
    axes_list[-1].set_xlim(0, span * 1.01)
    handles = [
        Patch(color=colors[k], label=label)
        for k, label in (
            ("compute", "fit: compute"),
            ("ckpt_write", "checkpoint write (torch.save)"),
            ("ckpt_persist", "Ray checkpoint copy"),
            ("handoff", "tune.report hand-off (driver)"),
            ("worker", "new worker process: spawn + imports"),
            ("driver", "driver only: start-up / shutdown"),
            ("upload", "Tune snapshot: staging folder upload"),
        )
    ]
    figure.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, 0.09, 1, 1))
    figure.savefig(path, format="png")


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json:
        return report_from_json(args)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if args.data_dir:
        args.data_dir = str(Path(args.data_dir).resolve())
    root = (
        Path(args.output_dir).resolve()
        if args.output_dir
        else Path(tempfile.mkdtemp(prefix="search-overhead-"))
    )
    root.mkdir(parents=True, exist_ok=True)
    for variant in args.variants:
        if (root / f"reuse-{variant}").exists():
            raise SystemExit(f"{root / f'reuse-{variant}'} exists; choose another --output-dir")
    command = "python " + " ".join(
        [str(Path(sys.argv[0])), *(argv if argv is not None else sys.argv[1:])]
    )
    machine = machine_info()
    print(f"searches in {root}; load average {os.getloadavg()[0]:.2f}", flush=True)
    reference = None
    if args.reference:
        reference = reference_fit(args, root)
        print(
            f"reference fit alone: compute {reference['compute_s']:.1f} s "
            f"(build {reference['build_s']:.1f} s, train {reference['train_s']:.1f} s, "
            f"checkpoint writes {reference['ckpt_write_s']:.1f} s)",
            flush=True,
        )
    probe = DriverProbe()
    probe.install()
    results = []
    for variant in args.variants:
        print(f"search with reuse_actors={variant} ...", flush=True)
        result = run_variant(args, variant, root, probe)
        print(
            f"  wall {result['wall_s']:.1f} s, summed compute {fmt(result.get('summed_compute_s'))} s, "
            f"overhead {fmt(result.get('overhead_pct'))}%; other users took {result['cpu']['others_cores']:.2f} "
            f"cores on average",
            flush=True,
        )
        results.append(result)
    payload = {
        "args": {k: v for k, v in vars(args).items()},
        "command": command,
        "machine": machine,
        "reference": reference,
        "results": results,
    }
    if args.json == "-":
        json.dump(payload, sys.stdout, indent=1, default=str)
    elif args.json:
        Path(args.json).write_text(json.dumps(payload, indent=1, default=str))
        print(f"numbers: {args.json}")
    finish(args, machine, reference, results, command)
    if not args.output_dir:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def report_from_json(args: argparse.Namespace) -> int:
    payload = json.loads(Path(args.from_json).read_text())
    saved = argparse.Namespace(**payload["args"])
    saved.plot, saved.results = args.plot, args.results
    finish(saved, payload["machine"], payload["reference"], payload["results"], payload["command"])
    return 0


def finish(
    args: argparse.Namespace,
    machine: dict,
    reference: dict | None,
    results: list[dict],
    command: str,
) -> None:
    print_report(args, machine, reference, results)
    plot = None
    if args.plot and args.probe:
        plot_timeline(results, Path(args.plot))
        plot = (
            os.path.relpath(args.plot, HERE.parent)
            if Path(args.plot).resolve().is_relative_to(HERE.parent)
            else args.plot
        )
        print(f"\ntimeline: {args.plot}")
    if args.results:
        write_results(
            Path(args.results), section_markdown(args, machine, reference, results, command, plot)
        )
        print(f"section written: {args.results}")


if __name__ == "__main__":
    sys.exit(main())
