"""astune's training loop against transformers.Trainer (README.md)."""

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
"""This study's saved results, each listed with its provenance in ``results/MANIFEST.json``."""
