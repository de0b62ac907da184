"""The speed of a trial: AS-Speed, AS-Skip and InfoBatch against softmax, and the CPU allocator
(README.md)."""

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
"""This study's saved results, each listed with its provenance in ``results/MANIFEST.json``."""
