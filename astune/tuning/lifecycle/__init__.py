"""The life of a search's (or confirm's) driver around Ray Tune's fit: stop signals
(:mod:`.stop`) and the watch over a Ray that dies with the job (:mod:`.ray_watch`),
``--resume`` against the search it continues (:mod:`.resume`), the end in MLflow
(:mod:`.ending`), the trials Ray recorded for the runs MLflow missed (:mod:`.backfill`),
trials' scratch folders (:mod:`.scratch`) and a failed trial's error in one line
(:mod:`.trial_errors`).

Until issue 61 these modules lay at ``astune.tuning.<module>``; the old paths still import
(:mod:`astune._moved`).
"""
