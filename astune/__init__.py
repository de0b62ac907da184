"""astune: hyperparameter search for AS-Softmax and AS-Speed.

Heavy packages (ray, mlflow, transformers) are imported lazily by the modules that need them,
so that ``import astune.losses`` stays fast.
"""

__version__ = "0.1.0"
