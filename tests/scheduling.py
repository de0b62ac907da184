"""Which worker runs which module under ``pytest -n 3 --dist loadfile`` (the README's command).

The fault tests start servers, Ray nodes and searches as processes and then mostly wait for
them: the driver to notice an outage, a health check to fail, a retry to come round. Under
plain ``loadfile`` two of them often ran side by side, and a training test, which uses one
core (one thread per worker), could not fill the other: the 2-core machine idled 12% of the
suite. With three workers the first takes the modules in :data:`WAITING` one after another
and the other two everything else, so two computing workers keep both cores busy while the
third waits. A worker whose own kind is used up takes the other kind. Four workers were no
faster: sampled from /proc/stat, the machine was 95% busy through the run, and the tests took
641 s against three workers' 578 s (2026-11-28, each from a fresh venv). The suite is bound
by the CPU, so it gets shorter only by tests that compute less.
"""

from __future__ import annotations

import json
from pathlib import Path

from xdist.scheduler import LoadFileScheduling

WAITING = frozenset(
    {
        "tests/test_cluster.py",
        "tests/test_tracking_outage.py",
        "tests/test_storage_outage.py",
        "tests/test_object_storage.py",
    }
)
"""The modules that mostly wait for processes they start: those with the ``cluster`` marker
(tests/conftest.py checks it at collection). ``test_search.py``, whose SIGTERM test runs its
searches as processes too, is left to the others: with it, the waiting worker ran 730 of the
suite's 774 s and was the last to finish (measured)."""

MIN_WORKERS = 3
"""Below this, a worker set apart for waiting would leave a core idle: plain ``loadfile``."""

MODULE_SECONDS = Path(__file__).with_name("module_seconds.json")
"""Each test module's measured seconds (setup, calls, teardown) under the README's command, by
which tests/conftest.py starts the longest first; write it again with ``ASTUNE_RECORD_SECONDS=1``
on that command after adding or changing slow tests (tests/test_module_seconds.py checks it
lists every module)."""


def measured_seconds() -> dict[str, float]:
    """``tests/<module>.py`` -> its seconds in :data:`MODULE_SECONDS` (empty without the file)."""
    return json.loads(MODULE_SECONDS.read_text()) if MODULE_SECONDS.is_file() else {}


class WaitingApart(LoadFileScheduling):
    """``loadfile`` (the collection's order: longest first), with the modules in
    :data:`WAITING` kept to the first worker while there are others to run."""

    # pytest-xdist 3.8: ``workqueue`` (scope -> tests, in the collection's order), ``nodes`` (in
    # the order the workers registered) and this method are LoadScopeScheduling's own.
    def _assign_work_unit(self, node) -> None:
        if len(self.nodes) >= MIN_WORKERS:
            waiter = node is self.nodes[0]
            preferred = next((s for s in self.workqueue if (s in WAITING) == waiter), None)
            if preferred is not None:
                self.workqueue.move_to_end(preferred, last=False)
        super()._assign_work_unit(node)
