"""The search's overhead and scale: wall time against trial time, checkpoint traffic, many tiny
trials (README.md)."""

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
"""This study's saved results, each listed with its provenance in ``results/MANIFEST.json``."""
