"""The history that starts a search: what past trials say a new task's first configs should be.

- :mod:`~astune.history.difficulty` and :mod:`~astune.history.probe`: a task's measured
  difficulty (a short softmax probe), cached in the store;
- :mod:`~astune.history.transfer`: a task's profile (difficulty, family, rows, backbone,
  layers, tokens), how alike two profiles are, and what the best trials of alike tasks say of
  each key;
- :mod:`~astune.history.reference` (the packaged prior, ``reference_trials.json``) and
  :mod:`~astune.history.trial_history` (the store's finished searches): the sources;
- :mod:`~astune.history.portfolio` and :mod:`~astune.history.portfolio_sources`: the few
  configs a search runs first, greedily chosen to cover the alike sources;
- :mod:`~astune.history.portfolio_space` and :mod:`~astune.history.space_points`: the space
  widened to hold them, with them as its first seed points.

``astune search`` starts from it (:mod:`astune.tuning.portfolio_start`) and ``astune recommend``
prints and writes it; the delta advice itself lives in :mod:`astune.recommendation`.
"""

from astune._lazy import lazy_exports

# Loaded on first use: the probe needs torch, the sources MLflow.
__all__, __getattr__, __dir__ = lazy_exports(
    "astune.history",
    {
        "difficulty": ["Difficulty", "measure_difficulty"],
        "portfolio": ["PortfolioEntry"],
        "portfolio_sources": ["SearchPortfolio", "search_portfolio", "shipped_space"],
        "portfolio_space": ["with_portfolio"],
        "reference": ["PRIOR_FILE"],
        "transfer": ["TaskProfile"],
    },
)
