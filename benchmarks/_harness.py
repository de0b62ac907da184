"""What the benchmark scripts share: where their results go."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
"""The folder of the saved results (JSON, PNG) that benchmarks/RESULTS.md cites."""
