"""The Ray half of `astune confirm`, beside the search's Ray code it reuses (the Tuner builder,
the trainable, the stop signals, resume): the runs of the configs over seeds (:mod:`.confirm`)
and the table logged at their end (:mod:`.confirm_summary`). The half without Ray (the plan,
the statistics, the table's files) is :mod:`astune.confirmation`.

Until issue 61 these modules lay at ``astune.tuning.<module>``; the old paths still import
(:mod:`astune._moved`), since a Ray experiment pickles confirm's trainable by module path.
"""
