"""`astune recommend`: delta, the warm-up r and the delta schedule for a dataset from its
measured difficulty.

The prior is the paper's rule (:mod:`astune.recommendation.prior`): delta about 0.35 for easy tasks,
0.3 for most and 0.2 for hard ones on the probe's difficulty scale; r > 0 only for easy tasks.

History (:mod:`astune.recommendation.delta_history`): every search in the MLflow store with finished
AS-Softmax trials gives a point (difficulty of its dataset; delta, r and delta schedule of its
best AS trial). A weighted least-squares line through them (a weighted mean below 3 points or
with a single difficulty; predictions kept inside the range of the observed deltas) is blended
with the prior with weight ``n / (n + 3)`` for n searches, so that the paper's rule dominates a
thin history. The range adds the fit's residual spread (the prior's own: 0.05) and the
difficulty's uncertainty carried through the slope of the blended curve.

Schedule (:mod:`astune.recommendation.schedules`): per difficulty band, the schedule that won the
searches that compared schedules, with its median parameters (``fixed``, the paper's, where
none did), and the delta trajectories of the band's best trials: as they ran when adaptive, and
for fixed-delta trials the ``ema`` schedule replayed on their logged training margins.

The difficulty probe and the history that starts a search (the prior of reference trials, the
store's searches, the portfolio and its widened space) live in :mod:`astune.history`.
"""

from astune._lazy import lazy_exports

# Loaded on first use: the probe and the history need torch and MLflow.
__all__, __getattr__, __dir__ = lazy_exports(
    "astune.recommendation",
    {
        "advice": ["nothing_to_learn", "probe_options", "recommend"],
        "astune.history.difficulty": ["dataset_name", "measure_difficulty"],
        "delta_history": ["HistoryPoint", "LineFit", "fit_line", "history_points"],
        "prior": ["band_of", "prior_delta", "prior_warmup"],
        "report": ["format_recommendation", "rationale"],
        "result": ["Recommendation"],
        "schedules": [
            "FRACTIONS",
            "ScheduleAdvice",
            "ScheduleTally",
            "Trajectory",
            "schedule_advice",
            "tally_schedules",
            "trajectory",
        ],
        "space_file": ["write_space"],
    },
)
