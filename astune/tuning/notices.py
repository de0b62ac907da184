"""The libraries' notices kept off the console of a search or a confirm, unless ``--verbose``.

astune's own lines (the live table, its warnings, the closing lines) say what a person needs.
Without ``--verbose`` these are left out: Ray's notice that token authentication is enabled
(a local Ray's default), Ray Tune's experiment box, its "View detailed results here" line and
its TensorBoard hint, Tune's traceback of each failed trial (the console says in one line why
it failed; the traceback is in the trial's ``error.txt``), and MLflow's INFO lines ("Creating
initial MLflow database tables...", "View run ..."). Warnings and errors of every library
still show. Ray's own ``ray.init``
logging and the trials' output are set where Ray starts (``execution.init_ray``), Tune's
verbosity on its ``RunConfig`` (``tuner.tune_verbosity``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

# Ray Tune's console engine: "0" is the one that prints nothing at verbose=0 (the newer one
# prints the experiment box, the results path and the TensorBoard hint at every verbosity).
RAY_TUNE_OUTPUT = "RAY_AIR_NEW_OUTPUT"
RAY_TUNE_TRIAL_ERRORS = "TUNE_PRINT_ALL_TRIAL_ERRORS"  # "0": no traceback per failed trial
MLFLOW_LEVEL = "MLFLOW_LOGGING_LEVEL"  # a level the user set for MLflow is kept


@contextmanager
def library_notices(verbose: bool) -> Iterator[None]:
    """Within the block, the libraries' notices are off the console (``verbose``: on, as the
    libraries print them); what the block changed is put back on the way out."""
    if verbose:
        yield
        return
    from astune._private import ray_token_notice_off

    with ExitStack() as stack:
        stack.enter_context(_environment(RAY_TUNE_OUTPUT, "0"))
        stack.enter_context(_environment(RAY_TUNE_TRIAL_ERRORS, "0"))
        stack.enter_context(ray_token_notice_off())
        if MLFLOW_LEVEL not in os.environ:
            stack.enter_context(_mlflow_warnings_only())
        yield


@contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    """``name=value`` in the environment for the block, unless the user set ``name``."""
    if name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)


@contextmanager
def _mlflow_warnings_only() -> Iterator[None]:
    """MLflow's loggers at WARNING for the block. ``import mlflow`` sets their level (from
    ``MLFLOW_LOGGING_LEVEL``, INFO by default), so it is imported first."""
    import mlflow  # noqa: F401

    logger = logging.getLogger("mlflow")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)
