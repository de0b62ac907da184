"""The measured seconds that order CI's modules (tests/conftest.py) cover every test module.

A module missing from ``tests/module_seconds.json`` starts last (or, with Ray or servers, first as
if it were the longest), so a long unmeasured module can become the run's tail: on 2026-12-01
eleven were missing, among them one of 219 worker-seconds.
"""

from __future__ import annotations

from pathlib import Path

from scheduling import MODULE_SECONDS, measured_seconds

TESTS = Path(__file__).resolve().parent


def _modules() -> set[str]:
    return {f"tests/{path.name}" for path in TESTS.glob("test_*.py")}


def _measured() -> dict[str, float]:
    assert MODULE_SECONDS.is_file(), f"{MODULE_SECONDS}: missing"
    return measured_seconds()


def test_every_test_module_has_measured_seconds():
    missing = sorted(_modules() - set(_measured()))
    assert not missing, (
        f"{', '.join(missing)}: not in tests/module_seconds.json; run the README's test command "
        "with ASTUNE_RECORD_SECONDS=1 (or enter an estimate in seconds by hand)"
    )


def test_no_measured_module_is_gone():
    gone = sorted(set(_measured()) - _modules())
    assert not gone, f"{', '.join(gone)}: in tests/module_seconds.json but no longer a test module"


def test_the_seconds_are_numbers_of_seconds():
    """Rounded to 0.1 s, a module of quick tests measures 0.0."""
    bad = {m: s for m, s in _measured().items() if not isinstance(s, (int, float)) or s < 0}
    assert not bad, f"tests/module_seconds.json: not a number of seconds >= 0: {bad}"
