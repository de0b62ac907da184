"""A failed trial's error as one line, read from the text Ray writes (``error.txt``).

Ray also writes the exception pickled (``error.pkl``); it is never loaded here: unpickling runs
code from anyone who can write to the storage path (a shared disk, an s3 bucket).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ray.tune.experiment import Trial


def trial_error_message(trial: Trial) -> str:
    """``ErrorType: first line`` of the trial's latest error, read on the driver."""
    # The error file is in the driver's staging folder until the next sync: read it there.
    return error_from_text(trial.error_file) or "unknown error"


def error_from_text(path: str | None) -> str | None:
    """The last ``SomeError: message`` line of a traceback file, else its last line."""
    if not path or not os.path.isfile(path):
        return None
    lines = Path(path).read_text(errors="replace").splitlines()
    for line in reversed(lines):
        head = line.split(":", 1)[0].strip()
        if ":" in line and head.isidentifier() and head.endswith(("Error", "Exception")):
            return line.strip()
    return next((line.strip() for line in reversed(lines) if line.strip()), None)
