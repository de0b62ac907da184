"""The GPU runs of a training run in one script, and the packing of what they need offline
(README.md)."""
