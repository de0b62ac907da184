"""95% t-intervals for the GPU scripts, without scipy (a lent GPU image may lack it): the mean
and half-width of a few values, and of ratios through their logarithms (a ratio's interval is
not symmetric; its geometric mean is the centre)."""

from __future__ import annotations

import math
import statistics

# t_{0.975, df} for df = 1..30; beyond, the normal quantile's 1.96 is close enough.
T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(df: int) -> float:
    return T975[df - 1] if df <= len(T975) else 1.96


def mean_ci(values: list[float]) -> dict[str, float | int | None]:
    """``{"n", "mean", "half_width", "low", "high"}``; one value: no interval (None)."""
    n = len(values)
    if n == 0:
        return {"n": 0, "mean": None, "half_width": None, "low": None, "high": None}
    mean = math.fsum(values) / n
    if n == 1:
        return {"n": 1, "mean": mean, "half_width": None, "low": None, "high": None}
    half = t975(n - 1) * statistics.stdev(values) / math.sqrt(n)
    return {"n": n, "mean": mean, "half_width": half, "low": mean - half, "high": mean + half}


def ratio_ci(ratios: list[float]) -> dict[str, float | int | None]:
    """The geometric mean of ``ratios`` and the 95% interval of the mean log-ratio, mapped back
    (``low``/``high``); also the plain median."""
    logs = mean_ci([math.log(r) for r in ratios if r > 0])
    out: dict[str, float | int | None] = {"n": logs["n"], "median": None}
    out["median"] = statistics.median(ratios) if ratios else None
    for key in ("mean", "low", "high"):
        value = logs[key]
        out["geomean" if key == "mean" else key] = None if value is None else math.exp(value)
    return out


def fmt_ci(ci: dict, digits: int = 3, scale: float = 1.0) -> str:
    """``mean ± half`` (or ``geomean [low, high]`` for a ratio); ``-`` when empty."""
    if "geomean" in ci:
        if ci["geomean"] is None:
            return "-"
        if ci["low"] is None:
            return f"{ci['geomean']:.{digits}f}"
        return f"{ci['geomean']:.{digits}f} [{ci['low']:.{digits}f}, {ci['high']:.{digits}f}]"
    if ci["mean"] is None:
        return "-"
    if ci["half_width"] is None:
        return f"{ci['mean'] * scale:.{digits}f}"
    return f"{ci['mean'] * scale:.{digits}f} ± {ci['half_width'] * scale:.{digits}f}"
