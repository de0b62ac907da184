"""The paper's claims over seeds, and adaptive delta against a tuned fixed delta (README.md)."""

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
"""This study's saved results, each listed with its provenance in ``results/MANIFEST.json``."""
