"""The Python API: each command of ``python -m astune`` as a function, with the flags' names,
defaults and checks (keyword-only), returning a typed result instead of an exit code.

    import astune

    result = astune.search("sst5", backbone="minilm", num_samples=8)
    print(result.best_objective, result.best_config)
    astune.export(result.experiment, format="yaml", output="best.yaml")
    run = astune.train(config="best.yaml")

The commands call these same functions. Bad input raises one ``ValueError`` naming the value
and what is accepted, before Ray, MLflow or torch load where the command refuses it before them;
a search or confirm stopped by SIGTERM or Ctrl-C raises :class:`SearchStopped` and a training
run :class:`TrainingStopped` (the same stop and state the command leaves, and no
``sys.exit``); a search whose tracking server is still away at its end raises
:class:`TrackingBehind`.

The functions live in private modules (``astune.api._search`` ...) so that no submodule import
can rebind a public name, and they are re-exported from :mod:`astune`.
"""

from astune.api._confirm import confirm
from astune.api._export import ExportResult, export
from astune.api._recommend import recommend
from astune.api._search import search
from astune.api._train import TrainResult, train

__all__ = ["ExportResult", "TrainResult", "confirm", "export", "recommend", "search", "train"]
