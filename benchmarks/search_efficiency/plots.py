"""PNG plots of the search-efficiency results (issue 44), beside their JSON:

- ``search_efficiency_<dataset>.png``: per arm, the incumbent's seed-mean validation score
  (median over repetitions) against trial-seconds (left, in trial-lengths) and against trials
  started (right), with ``T_common`` and ``T_all`` as lines;
- ``search_efficiency_pareto_<dataset>.png``: the front's hypervolume against trial-seconds,
  with and without MO-halving (medians over repetitions; the legend gives the final one's 95%
  interval).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ARM_STYLES = {
    "by-hand": ("C0", "-"),
    "astune": ("C1", "-"),
    "astune-warm": ("C2", "-"),
    "astune-fast": ("C3", "-"),
    "astune-fast-cold": ("C3", ":"),
    "astune-portfolio": ("C4", "-"),
    "astune-portfolio-hyperband": ("C4", "-."),
    "astune-portfolio-asha": ("C4", ":"),
    "astune-portfolio-store": ("C5", "-"),
}

SHOWN_BELOW_TARGET = 0.15
"""How far below ``T_common`` the anytime plots' score axis reaches (0.15: 15 points)."""


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the file-only Agg backend (no display here)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: Path, *, dpi: int) -> Path:
    """``fig`` laid out and written to ``path`` as a PNG of ``dpi``, then closed."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path


def _values(points: list[float | None]) -> list[float]:
    return [float("nan") if v is None else v for v in points]


def plot_replay(entry: dict[str, Any], dataset: str, path: Path) -> Path:
    """The anytime curves of one dataset's replay ``entry`` (search_efficiency.json's)."""
    plt = pyplot()
    length = entry["trial_length_seconds"]
    fig, (by_time, by_trials) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for name, arm in entry["arms"].items():
        colour, style = ARM_STYLES.get(name, ("C7", "--"))
        seconds = [s / length for s in arm["curve"]["trial_seconds"]]
        by_time.plot(seconds, _values(arm["curve"]["val_seed_mean"]), style, color=colour,
                     label=name, drawstyle="steps-post")  # fmt: skip
        trials = arm["curve_by_trials"]
        by_trials.plot(trials["trials"], _values(trials["val_seed_mean"]), style, color=colour,
                       label=name, drawstyle="steps-post")  # fmt: skip
    # the first trials' low scores would squeeze the approach to the targets into a line
    by_time.set_ylim(bottom=entry["targets"]["T_common"] - SHOWN_BELOW_TARGET)
    for axis in (by_time, by_trials):
        for key, shade in (("T_common", "k"), ("T_all", "0.5")):
            axis.axhline(entry["targets"][key], color=shade, lw=0.8, ls="--")
            axis.annotate(key, (1, entry["targets"][key]), xycoords=("axes fraction", "data"),
                          ha="right", va="bottom", fontsize=8, color=shade)  # fmt: skip
        axis.grid(alpha=0.3)
    by_time.set_xlabel("trial-seconds, in trial-lengths")
    by_trials.set_xlabel("trials started")
    by_time.set_ylabel(f"incumbent's seed-mean validation {entry['metric']}")
    by_time.legend(fontsize=8, loc="lower right")
    reps = next(iter(entry["arms"].values()))["repetitions"]
    fig.suptitle(f"{dataset}: medians over {reps} replayed searches, {entry['workers']} workers")
    return save(fig, path, dpi=110)


def plot_pareto(entry: dict[str, Any], dataset: str, path: Path) -> Path:
    """The hypervolume against trial-seconds of one dataset's ``entry`` (the pareto JSON's)."""
    plt = pyplot()
    length = entry["trial_length_seconds"]
    seconds = [s / length for s in entry["trial_seconds"]]
    fig, axis = plt.subplots(figsize=(6.5, 4.2))
    starts = [("", entry, "-")]
    starts += [(", portfolio first", entry["portfolio"], "--")] if "portfolio" in entry else []
    for suffix, results, style in starts:
        for name, colour in (("mo-halving", "C3"), ("fifo", "C0")):
            final = results[name]["final_hypervolume"]
            interval = f"{final['median']:.3f} [{final['low']:.3f}, {final['high']:.3f}]"
            label = f"{name}{suffix} (at the budget {interval})"
            curve = _values(results[name]["hypervolume_median"])
            axis.plot(seconds, curve, style, color=colour, label=label)
    axis.set_xlabel("trial-seconds, in trial-lengths")
    axis.set_ylabel("hypervolume of the front (validation metric, train seconds)")
    axis.set_title(f"{dataset}: the front with and without MO-halving")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8, loc="lower right")
    return save(fig, path, dpi=110)
