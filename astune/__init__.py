"""astune: hyperparameter search for AS-Softmax and AS-Speed.

The Python API mirrors the commands (:mod:`astune.api`): :func:`search`, :func:`train`,
:func:`recommend`, :func:`confirm`, :func:`export` and :func:`status`, with their results and
exceptions. Its names load on first use, and heavy packages (ray, mlflow, transformers) only
with the modules that need them, so that ``import astune.losses`` stays fast.
"""

from __future__ import annotations

__version__ = "0.1.0"

import sys
import types
from typing import TYPE_CHECKING, Any

from astune import _moved
from astune._lazy import lazy_exports

if TYPE_CHECKING:
    from astune.api import (
        ConfirmResult as ConfirmResult,
    )
    from astune.api import (
        ExportResult as ExportResult,
    )
    from astune.api import (
        Recommendation as Recommendation,
    )
    from astune.api import (
        SearchResult as SearchResult,
    )
    from astune.api import (
        SearchStatus as SearchStatus,
    )
    from astune.api import (
        SearchStopped as SearchStopped,
    )
    from astune.api import (
        TrackingBehind as TrackingBehind,
    )
    from astune.api import (
        TrainConfig as TrainConfig,
    )
    from astune.api import (
        TrainingStopped as TrainingStopped,
    )
    from astune.api import (
        TrainResult as TrainResult,
    )
    from astune.api import (
        confirm as confirm,
    )
    from astune.api import (
        export as export,
    )
    from astune.api import (
        format_recommendation as format_recommendation,
    )
    from astune.api import (
        recommend as recommend,
    )
    from astune.api import (
        search as search,
    )
    from astune.api import (
        status as status,
    )
    from astune.api import (
        train as train,
    )

__all__, __getattr__, __dir__ = lazy_exports(
    "astune",
    {
        "api": [
            "search",
            "train",
            "recommend",
            "confirm",
            "export",
            "status",
            "SearchResult",
            "SearchStatus",
            "TrainResult",
            "Recommendation",
            "ConfirmResult",
            "ExportResult",
            "TrainConfig",
            "SearchStopped",
            "TrackingBehind",
            "TrainingStopped",
            "format_recommendation",
        ]
    },
)


class _Package(types.ModuleType):
    """``astune`` itself: importing an old package path (``astune.search.trainable``, as a Ray
    experiment pickled before the fourth layout does) would set the module as ``astune.search``
    over the function of that name; the API's names stay the API's."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in __all__ and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
_moved.install()  # modules' paths before the third and fourth layouts still import (and unpickle)
