"""Faster at equal accuracy: a multi-objective search of SST-5, then a confirm of its front
(README.md)."""

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
"""This study's saved results, each listed with its provenance in ``results/MANIFEST.json``."""
