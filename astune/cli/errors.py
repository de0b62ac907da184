"""The CLI's errors: bad input found before any work starts (one line, exit code 2)."""

from __future__ import annotations

EXIT_FAILED = 1
EXIT_USAGE = 2


class CLIError(Exception):
    """Bad input found before any work starts; printed as one line, exit code 2."""
