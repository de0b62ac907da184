"""What proposes a search's trials and what stops them: Optuna behind Ray Tune, told which
trials were pruned or failed (:mod:`.searcher`), the choice of searcher and scheduler
(:mod:`.algorithms`), the samplers by name (:mod:`.samplers`), and successive halving on
several objectives (:mod:`.mo_halving`).

Until issue 61 these modules lay at ``astune.tuning.<module>``; the old paths still import
(:mod:`astune._moved`), since a Ray experiment pickles its searcher and scheduler by module path.
"""
