"""The CLI's errors: bad input found before any work starts (one line, exit code 2)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager

from astune._checks import InvalidArgument
from astune._text import as_flag

EXIT_FAILED = 1
EXIT_USAGE = 2


class CLIError(Exception):
    """Bad input found before any work starts; printed as one line, exit code 2."""


@contextmanager
def refused_as_bad_input(
    *also: type[Exception], flags: argparse.Namespace | None = None
) -> Iterator[None]:
    """A ValueError or OSError (or one of ``also``: MLflow's exception where the store is
    read) raised in the block is bad input: its first line, exit 2. A refused value that a
    flag of ``flags`` (the parsed command line) gave is named by that flag."""
    try:
        yield
    except (ValueError, OSError, *also) as err:
        raise CLIError(refusal(err, flags)) from None


def refusal(err: Exception, flags: argparse.Namespace | None) -> str:
    """The first line of ``err``; an :class:`InvalidArgument` about the value a flag of
    ``flags`` gave names the flag (``--num-samples``), not the Python keyword the check knows
    it by (a value that only has the keyword's name, from a space file say, keeps it)."""
    if isinstance(err, InvalidArgument) and flags is not None:
        given = getattr(flags, err.name, None)
        if given is not None and given == err.value:
            err = err.named(as_flag(err.name))
    return str(err).splitlines()[0]
