"""Time to a good config: what a search buys, per arm, replayed on recorded tables (README.md)."""

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
"""This study's saved results, each listed with its provenance in ``results/MANIFEST.json``."""
