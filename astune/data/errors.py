"""The one exception type of the data layer."""

from __future__ import annotations


class DataError(ValueError):
    """Bad or missing data, found before any training; the message is one line naming the thing."""
