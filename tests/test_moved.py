"""Modules that moved into packages keep their old import paths: a user's script and a Ray
experiment pickled before the move (``--resume``) import them by the old name."""

from __future__ import annotations

import importlib
import pickle
import re
import sys
import warnings
from pathlib import Path

import pytest

from astune._moved import MOVED, MOVED_PACKAGES, REMOVED_IN, new_home

# An old path and a public name it held, as a pickle of the time names them.
PICKLED = {
    "astune.probe": "ProbeResult",
    "astune.difficulty": "Difficulty",
    "astune.backbone_registry": "resolve_backbone",
    "astune.csc_metrics": "csc_scores",
    "astune.objectives": "parse_objectives",
    "astune.skip": "ASSkip",
    "astune.prune": "SoftPrune",
    # issue 61: astune/tuning by job; Ray pickles the searcher and the scheduler
    "astune.tuning.searcher": "PruneAwareOptunaSearch",
    "astune.tuning.algorithms": "searcher_for",
    "astune.tuning.mo_halving": "MOHalvingScheduler",
    "astune.tuning.stop": "SearchStopped",
    "astune.tuning.resume": "resume_command",
    "astune.tuning.confirm": "run_confirm",
    "astune.tuning.confirm_summary": "ConfirmResult",
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_imports_the_module_at_its_new_home_with_a_warning(
    old: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a test before this one in the worker may have imported the old path (an aged pickle does
    # in tests/test_search.py): the warning comes once a process, so import it afresh
    monkeypatch.delitem(sys.modules, old, raising=False)
    ends = f"; the old path goes in astune {re.escape(REMOVED_IN)}$"
    with pytest.warns(DeprecationWarning, match=f"^{old} moved to {MOVED[old]}{ends}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])
    assert module.__name__ == MOVED[old]


@pytest.mark.parametrize("old", sorted(PICKLED))
def test_a_pickle_naming_an_old_path_loads_the_object_of_today(old: str) -> None:
    name = PICKLED[old]
    # protocol 0: GLOBAL "module\nname\n", as pickle and cloudpickle write a class reference
    loaded = pickle.loads(f"c{old}\n{name}\n.".encode())
    assert loaded is getattr(importlib.import_module(MOVED[old]), name)


@pytest.mark.parametrize(
    ("package", "name", "home"),
    [
        ("astune.speed", "ASSpeed", "astune.speed.accumulation"),
        ("astune.backbones", "build_model", "astune.backbones.models"),
        ("astune.metrics", "compute_metrics", "astune.metrics.scores"),
    ],
)
def test_modules_that_became_packages_still_hold_their_names(
    package: str, name: str, home: str
) -> None:
    loaded = pickle.loads(f"c{package}\n{name}\n.".encode())
    assert loaded is getattr(importlib.import_module(home), name)


def test_every_moved_entry_names_a_module_that_exists_and_no_file_at_the_old_path() -> None:
    root = Path(importlib.import_module("astune").__file__).parent.parent
    for old, new in {**MOVED, **MOVED_PACKAGES}.items():
        assert importlib.util.find_spec(new) is not None, new
        path = root.joinpath(*old.split("."))
        assert not path.with_suffix(".py").exists() and not path.is_dir(), f"{old} is there again"


def test_a_script_exported_before_the_speed_fields_were_declared_once_still_runs() -> None:
    """Exports wrote ``train_config().speed.build_speed()``; ``speed`` is now the config."""
    from astune.config import TrainConfig

    config = TrainConfig("sst5", as_speed=True, lam=1.5, max_accum_steps=3)
    ends = rf"\(TrainConfig\.speed goes in astune {re.escape(REMOVED_IN)}\)$"
    with pytest.warns(DeprecationWarning, match=rf"call config\.build_speed\(\).*{ends}"):
        speed = config.speed.build_speed()
    assert (speed.lam, speed.max_steps) == (1.5, 3)
    assert TrainConfig("sst5").build_speed() is None  # AS-Speed off


RENAMED = {  # a module under each renamed package, and a public name it holds
    "astune.search.trainable": ("astune.tuning.trainable", "train_trial"),
    "astune.recommend.advice": ("astune.recommendation.advice", "recommend"),
    "astune.confirm.plan": ("astune.confirmation.plan", "ConfirmPlan"),
    "astune.export.pick": ("astune.exporting.pick", "Pick"),
}


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_a_renamed_packages_old_module_path_loads_the_module_of_today_once(old: str) -> None:
    new, name = RENAMED[old]
    assert new_home(old) == new
    loaded = pickle.loads(f"c{old}\n{name}\n.".encode())  # as a pickled experiment names it
    today = importlib.import_module(new)
    assert loaded is getattr(today, name)  # one module: no second copy under the old name
    assert today.__spec__.name == new  # and it keeps its own spec


def test_importing_an_old_package_path_leaves_the_api_names_to_the_api() -> None:
    import astune

    old_modules = ("astune.search.stop", "astune.recommend.prior", "astune.confirm.stats")
    with pytest.warns(DeprecationWarning, match=r"^astune\.\w+\.\w+ moved to astune\."):
        for old in (*old_modules, "astune.export.code"):
            importlib.import_module(old)
    for name in ("search", "recommend", "confirm", "export"):
        assert getattr(astune, name).__module__ == f"astune.api._{name}", name
    assert sorted(MOVED_PACKAGES) == sorted(
        f"astune.{n}" for n in ("search", "recommend", "confirm", "export")
    )


def test_a_path_that_moved_twice_is_followed_to_its_home_of_today(monkeypatch) -> None:
    """An old package's module that moved again inside the new package (``astune.search.stop``
    -> ``astune.tuning.stop`` -> ``astune.tuning.lifecycle.stop``) finds its home of today."""
    import astune._moved as moved

    monkeypatch.setitem(moved.MOVED, "astune.tuning.x", "astune.tuning.y.x")
    monkeypatch.setitem(moved.MOVED, "astune.tuning.y.x", "astune.tuning.z")
    assert new_home("astune.search.x") == "astune.tuning.z"
    assert new_home("astune.tuning.x") == "astune.tuning.z"
    assert new_home("astune.search.settings") == "astune.tuning.settings"  # one move
    assert new_home("astune.tuning.settings") is None
    monkeypatch.setitem(moved.MOVED, "astune.tuning.z", "astune.tuning.x")
    with pytest.raises(RuntimeError, match="in a circle: astune.tuning.x -> "):
        new_home("astune.tuning.x")


# The modules of astune/tuning that went into its packages by job (issue 61), each under the
# name of the fourth layout too: astune.search.stop -> astune.tuning.stop -> its home of today.
BY_JOB = sorted(old for old in MOVED if old.startswith("astune.tuning."))


@pytest.mark.parametrize("flat", BY_JOB)
@pytest.mark.parametrize("package", ["astune.tuning", "astune.search"])
def test_a_module_of_the_flat_tuning_package_imports_from_its_job_package(
    flat: str, package: str, monkeypatch
) -> None:
    old = package + flat[len("astune.tuning") :]
    home = MOVED[flat]
    assert home.startswith("astune.tuning.") and home.count(".") == 3, home
    assert new_home(old) == home
    monkeypatch.delitem(sys.modules, old, raising=False)  # warns on the first import alone
    ends = f"; the old path goes in astune {re.escape(REMOVED_IN)}$"
    with pytest.warns(
        DeprecationWarning, match=f"^{re.escape(old)} moved to {re.escape(home)}{ends}"
    ):
        module = importlib.import_module(old)
    assert module is importlib.import_module(home)  # one module, whichever path imported it
    assert module.__name__ == module.__spec__.name == home


@pytest.mark.parametrize("age", ["before_issue_60", "before_issue_61"])
def test_a_pickle_aged_to_an_older_layout_loads_the_searcher_scheduler_and_trainable(age: str):
    """What a Ray experiment pickles by module path, aged as tests/test_search.py ages a whole
    search (the multi-objective scheduler too, which that tiny search does not use): a class
    or function by its old path, and a pickle held inside a pickle (as Ray holds its trials)."""
    import aged_pickles

    from astune.tuning.confirmation.confirm import confirm_trial
    from astune.tuning.searchers.mo_halving import MOHalvingScheduler
    from astune.tuning.searchers.searcher import PruneAwareOptunaSearch

    homes = getattr(aged_pickles, age)()
    today = {"scheduler": MOHalvingScheduler, "searcher": PruneAwareOptunaSearch}
    data = pickle.dumps({**today, "trial": pickle.dumps(confirm_trial, protocol=5)}, protocol=5)
    named: set[str] = set()
    aged = aged_pickles.age_pickle(data, aged_pickles.renamer(homes, named))
    old = {homes[f"astune.tuning.{p}"] for p in ("searchers.mo_halving", "searchers.searcher")}
    assert old | {homes["astune.tuning.confirmation.confirm"]} <= named
    assert b"searchers" not in aged and b"confirmation" not in aged
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        loaded = pickle.loads(aged)
        assert pickle.loads(loaded.pop("trial")) is confirm_trial
    assert loaded == today
