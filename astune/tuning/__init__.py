"""Ray Tune only, by job: the Tuner and what it is built from here (settings, the runner and
execution of a search, the Tuner builder, the trainable, the callbacks that forward trials to
:mod:`astune.store.writer`, the console, outcome); what proposes and stops trials in
:mod:`.searchers`; the life of a driver around the fit (stop signals, resume, the end,
backfill) in :mod:`.lifecycle`; the Ray half of `confirm` in :mod:`.confirmation`
(docs/architecture.md).

Importing this package is light: ray, optuna and mlflow are imported by the modules that use
them, when they are used. Search spaces (no Ray) live in :mod:`astune.space`.
"""
