"""The Ray Tune layer: YAML search space -> Optuna, trainable, MLflow tracking, runner.

Importing this package is light (PyYAML only): ray, optuna and mlflow are imported by the
modules that use them, when they are used.
"""

from astune.search.space import SearchSpace, SpaceError, available_spaces, load_space

__all__ = ["SearchSpace", "SpaceError", "available_spaces", "load_space"]
