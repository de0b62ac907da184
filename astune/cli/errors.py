"""The CLI's errors: bad input found before any work starts (one line, exit code 2)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

EXIT_FAILED = 1
EXIT_USAGE = 2


class CLIError(Exception):
    """Bad input found before any work starts; printed as one line, exit code 2."""


@contextmanager
def refused_as_bad_input(*also: type[Exception]) -> Iterator[None]:
    """A ValueError or OSError (or one of ``also``: MLflow's exception where the store is
    read) raised in the block is bad input: its first line, exit 2."""
    try:
        yield
    except (ValueError, OSError, *also) as err:
        raise CLIError(str(err).splitlines()[0]) from None
