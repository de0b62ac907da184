"""The Python API: each command of ``python -m astune`` as a function, with the flags' names,
defaults and checks (keyword-only), returning a typed result instead of an exit code.

    import astune

    result = astune.search("sst5", backbone="minilm", num_samples=8)
    print(result.best_objective, result.best_config)
    astune.export(result.experiment, format="yaml", output="best.yaml")
    run = astune.train("best.yaml")

The commands call these same functions. Bad input raises one ``ValueError`` naming the value
and what is accepted, before Ray, MLflow or torch load where the command refuses it before them;
a search or confirm stopped by SIGTERM or Ctrl-C raises :class:`SearchStopped` and a training
run :class:`TrainingStopped` (the same stop and state the command leaves, and no
``sys.exit``); a search whose tracking server is still away at its end raises
:class:`TrackingBehind`.

The functions live in private modules (``astune.api._search`` ...), and the packages behind
them have other names (:mod:`astune.tuning`, :mod:`astune.recommendation`,
:mod:`astune.confirmation`, :mod:`astune.exporting`), so that no import rebinds a public name;
they are re-exported from :mod:`astune`.
"""

from astune._lazy import lazy_exports

# Each name loads its own module on first use: ``astune.search`` does not load torch.
__all__, __getattr__, __dir__ = lazy_exports(
    "astune",
    {
        "api._search": ["search"],
        "api._train": ["train", "TrainResult"],
        "api._recommend": ["recommend"],
        "api._confirm": ["confirm"],
        "api._export": ["export", "ExportResult"],
        "api._status": ["status"],
        "store.status": ["SearchStatus"],
        "tuning.settings": ["SearchResult"],
        "tuning.confirmation.confirm_summary": ["ConfirmResult"],
        "recommendation.result": ["Recommendation"],
        "recommendation.report": ["format_recommendation"],
        "config": ["TrainConfig"],
        "tuning.lifecycle.stop": ["SearchStopped"],
        "tuning.lifecycle.ending": ["TrackingBehind"],
        "training.stop": ["TrainingStopped"],
    },
)
