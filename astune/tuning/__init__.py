"""Ray Tune only: settings, the Tuner builder, the trainable, the Optuna searcher, the callbacks
that forward trials to :mod:`astune.store.writer`, the runner and resume.

Importing this package is light: ray, optuna and mlflow are imported by the modules that use
them, when they are used. Search spaces (no Ray) live in :mod:`astune.space`.
"""
