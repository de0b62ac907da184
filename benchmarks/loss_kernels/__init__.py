"""The loss and its kernels: AS-Softmax's forward+backward against cross-entropy, torch and Triton,
and the paper's 5,201-wide head (README.md)."""

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
"""This study's saved results, each listed with its provenance in ``results/MANIFEST.json``."""
