"""astune: hyperparameter search for AS-Softmax and AS-Speed.

Heavy packages (ray, mlflow, transformers) are imported lazily by the modules that need them,
so that ``import astune.losses`` stays fast.
"""

__version__ = "0.1.0"

from astune import _moved

_moved.install()  # modules' paths before the third layout still import (and unpickle)
