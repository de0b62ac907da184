"""Shared fixtures; a skipped test fails the run, since CI must run every test."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Under pytest-xdist (``-n 2``, ``-n 3``) each worker trains on one thread: two workers of two
# threads each on this 2-core machine took 365 s for the fast tier, two of one thread 195 s. Set
# before torch is imported; the commands a test runs inherit it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

# Every temporary file of this test process and of the commands it runs (Ray's checkpoint
# staging, MLflow's store locks, multiprocessing's folders, pytest's tmp_path) goes under one
# folder, removed when the session passes and kept, with its path said, when it fails.
SESSION_TMP = Path(tempfile.mkdtemp(prefix="astune-tests-", dir="/tmp"))
os.environ["TMPDIR"] = str(SESSION_TMP)
tempfile.tempdir = None  # gettempdir() reads TMPDIR again


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The folder of real benchmark data laid out as ``<name>/{train,validation,test}.jsonl``:
    ``$ASTUNE_DATA_DIR``, ``../shared/data`` or the cache (tests/data_home.py)."""
    from data_home import find_data

    folder = find_data()
    if folder is None:  # pytest_sessionstart / pytest_collection_finish made it or stopped
        pytest.fail("no test data (tests/data_home.py): the session start did not prepare it")
    return folder


def _ensure_data(config: pytest.Config) -> None:
    """The test data found, else prepared once into the cache (its progress shown), else the
    session stopped with one line saying what to run; ``ASTUNE_DATA_DIR`` names the folder for
    the commands the tests start, unless it is set."""
    from data_home import ENV_DATA_DIR, NoTestData, ensure_data

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    say = reporter.write_line if reporter else print
    try:
        with config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
            folder = ensure_data(say)
    except NoTestData as err:
        for tmp in (SESSION_TMP, RAY_TMP):  # no test ran: nothing to keep
            shutil.rmtree(tmp, ignore_errors=True)
        raise pytest.UsageError(str(err)) from None
    os.environ.setdefault(ENV_DATA_DIR, str(folder))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist starts its workers (they inherit the env)
def pytest_sessionstart(session: pytest.Session) -> None:
    if session.config.pluginmanager.has_plugin("dsession"):  # the controller of ``-n N``
        _ensure_data(session.config)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Without pytest-xdist: when a collected test reads the real data."""
    config = session.config
    if hasattr(config, "workerinput") or config.pluginmanager.has_plugin("dsession"):
        return
    if not config.option.collectonly and any("data_dir" in i.fixturenames for i in session.items):
        _ensure_data(config)


def _module(nodeid: str) -> str:
    return nodeid.split("::")[0]


def _measured() -> dict[str, float]:
    from scheduling import measured_seconds

    return measured_seconds()


def _seconds(items: list[pytest.Item]) -> dict[str, float]:
    """Measured seconds per module; a module not measured yet ranks by its markers, first when it
    starts servers or Ray (as long as the longest measured module), else last."""
    measured = _measured()
    longest = max(measured.values(), default=0.0)
    out: dict[str, float] = {}
    for item in items:
        module = _module(item.nodeid)
        if module not in measured:
            marks = {m.name for m in item.iter_markers()}
            out[module] = max(out.get(module, 0.0), longest if marks & {"ray", "cluster"} else 0.0)
    return {**out, **measured}


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist hands out whole modules ordered by their number of tests unless told to keep
    # the collection's order, which pytest_collection_modifyitems makes longest first.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadfile``, the waiting modules on a worker of their own: tests/scheduling.py."""
    if config.getvalue("dist") != "loadfile":
        return None
    from scheduling import WaitingApart

    return WaitingApart(config, log)


@pytest.hookimpl(trylast=True)  # after -m has deselected: order what runs
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest modules first (file order within a module): under ``--dist loadfile`` each
    worker takes the next module when it is done with one, so the run ends with short modules
    on every worker instead of a long one on one of them."""
    _check_waiting(items)
    seconds = _seconds(items)
    items.sort(key=lambda item: -seconds[_module(item.nodeid)])


def _check_waiting(items: list[pytest.Item]) -> None:
    from scheduling import WAITING

    modules = {_module(i.nodeid) for i in items}
    cluster = {_module(i.nodeid) for i in items if i.get_closest_marker("cluster")}
    if cluster != WAITING & modules:
        wrong = ", ".join(sorted(cluster ^ (WAITING & modules)))
        raise pytest.UsageError(
            f"{wrong}: WAITING in tests/scheduling.py must list the modules with the cluster marker"
        )


_RECORDED: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With ``ASTUNE_RECORD_SECONDS`` set, sum each module's seconds (the controller of a
    pytest-xdist run sees every worker's reports)."""
    if os.environ.get("ASTUNE_RECORD_SECONDS"):
        module = _module(report.nodeid)
        _RECORDED[module] = _RECORDED.get(module, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(RAY_TMP, ignore_errors=True)  # every Ray of the session has ended by now
    if _RECORDED and not os.environ.get("PYTEST_XDIST_WORKER"):
        ranked = dict(sorted({**_measured(), **_RECORDED}.items(), key=lambda kv: -kv[1]))
        rounded = {module: round(seconds, 1) for module, seconds in ranked.items()}
        from scheduling import MODULE_SECONDS

        MODULE_SECONDS.write_text(json.dumps(rounded, indent=1) + "\n")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if skipped and exitstatus == 0:
        reporter.write_line(f"FAILED: {skipped} test(s) skipped; every test must run", red=True)
        session.exitstatus = 1
    _end_session_tmp(session, int(session.exitstatus))


def _end_session_tmp(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.USAGE_ERROR):
        shutil.rmtree(SESSION_TMP, ignore_errors=True)
    elif not os.environ.get("PYTEST_XDIST_WORKER"):
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter:
            reporter.write_line(f"temporary files of the failed run kept in {SESSION_TMP}")


# -- image and audio data, made offline once per session (tests/media_data.py) --------------


@pytest.fixture
def workdir(tmp_path, monkeypatch, data_dir):
    """The working directory of a search run as a user runs it, with its default store."""
    from stores import new_store

    new_store(tmp_path / "astune-runs")  # where `search` puts it: default_tracking_uri()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ASTUNE_DATA_DIR", str(data_dir))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory) -> Path:
    """scikit-learn's digits 0-3 as PNG files in train/validation/test class folders."""
    from media_data import write_digits

    return write_digits(tmp_path_factory.mktemp("digits"))


@pytest.fixture(scope="session")
def speech_dir(tmp_path_factory) -> Path:
    """Four words spoken by espeak-ng in several voices, 16 kHz WAV, JSONL splits."""
    from media_data import write_speech

    return write_speech(tmp_path_factory.mktemp("speech"))


@pytest.fixture(scope="session")
def tiny_vit_dir(tmp_path_factory) -> Path:
    from media_data import tiny_vit

    return tiny_vit(tmp_path_factory.mktemp("tiny-vit"))


@pytest.fixture(scope="session")
def tiny_wav2vec2_dir(tmp_path_factory) -> Path:
    from media_data import tiny_wav2vec2

    return tiny_wav2vec2(tmp_path_factory.mktemp("tiny-wav2vec2"))


@pytest.fixture(scope="session")
def front_store(tmp_path_factory) -> tuple[str, dict[str, str]]:
    """A hand-written SQLite MLflow store (``tests/hand_store.py``) with a multi-objective
    search and a single-objective one: its URI and the first's trial name -> run id. Tests
    only read it."""
    from hand_store import write_front_store

    return write_front_store(tmp_path_factory.mktemp("front-store"))


@pytest.fixture
def registry():
    """The loss registry and the plugins loaded, as they were before the test (a plugin a test
    loads leaves this process's catalogue and modules when it ends)."""
    import sys

    from astune import plugins
    from astune.losses import catalogue

    losses, loaded = dict(catalogue._REGISTRY), dict(plugins._LOADED)
    yield
    for key, module in list(plugins._LOADED.items()):
        if key not in loaded:
            sys.modules.pop(module.__name__, None)
    catalogue._REGISTRY.clear()
    catalogue._REGISTRY.update(losses)
    plugins._LOADED.clear()
    plugins._LOADED.update(loaded)


@pytest.fixture(scope="module")
def shared_ray():
    """One local Ray that the module's in-process searches join (``tiny.one_ray``) instead of
    each starting its own; shut down when the module ends."""
    from tiny import one_ray

    with one_ray():
        yield


# -- test tiers: markers ray, cluster, slow, gpu (pyproject.toml) ----------------------------
# Every Ray this session starts (in this process or in the commands it runs, which inherit the
# variable) keeps its folders here, apart from any other Ray on the machine: the marker check
# below sees only this session's Ray, and the folder goes at the end. Short: Ray's unix sockets
# live under it (paths of at most 107 bytes).
RAY_TMP = Path(tempfile.mkdtemp(prefix="astune-rt-", dir="/tmp"))
os.environ["RAY_TMPDIR"] = str(RAY_TMP)
# Quieter Rays for the tests (each Ray process reads these from the environment): the workers
# Ray prestarts for a first driver never run a trial here (each trial is an actor of its own),
# and Ray's metrics go nowhere. Measured on an idle local Ray: 10.1 -> 8.2 CPU-s to start,
# 2.6 -> 1.4 CPU-s every 30 s idle. astune itself leaves Ray's defaults to its users.
os.environ.setdefault("RAY_enable_worker_prestart", "0")
os.environ.setdefault("RAY_prestart_worker_first_driver", "0")
os.environ.setdefault("RAY_enable_metrics_collection", "0")


def _ray_session() -> str | None:
    link = RAY_TMP / "ray" / "session_latest"
    return os.readlink(link) if link.is_symlink() else None


@pytest.fixture(autouse=True)
def _ray_only_where_marked(request: pytest.FixtureRequest):
    """A test that starts a Ray session without the ``ray`` or ``cluster`` marker fails: the fast
    tier (``-m "not ray and not cluster"``) must stay free of Ray."""
    before = _ray_session()
    yield
    marked = {m.name for m in request.node.iter_markers()} & {"ray", "cluster"}
    if not marked and _ray_session() != before:
        pytest.fail(f"{request.node.nodeid} started Ray: mark it @pytest.mark.ray", pytrace=False)
