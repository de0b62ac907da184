"""The AS-Softmax paper's tables as registry fields: results per method, baseline parameters.

Results are percentages as printed in the paper (53.12 means 53.12 %); None is its '-'.
"""

from __future__ import annotations

# Method order of the paper's tables, in the loss registry's spelling.
METHODS = (
    "softmax",
    "t_softmax",
    "sparse_softmax",
    "sparsemax",
    "entmax15",
    "label_smoothing",
    "am_softmax",
    "as_softmax",
    "as_speed",
)


def results(metric: str, values: tuple[float | None, ...]) -> dict[str, dict[str, float]]:
    """Pair one table column (in ``METHODS`` order, None for '-') with the method names."""
    return {m: {metric: v} for m, v in zip(METHODS, values) if v is not None}


def multilabel_results(macro: tuple, micro: tuple) -> dict[str, dict[str, float]]:
    """Pair the macro-F1 and micro-F1 columns with the method names."""
    out: dict[str, dict[str, float]] = {}
    for m, a, i in zip(METHODS, macro, micro):
        if a is not None:
            out[m] = {"macro_f1": a, "micro_f1": i}
    return out


def baselines(tau: float, k: int, eps: float | None, am: tuple[float, float] | None) -> dict:
    """The baselines' parameters of Table "Parameter setting of algorithm", by loss name."""
    params: dict[str, dict[str, float]] = {"t_softmax": {"tau": tau}, "sparse_softmax": {"k": k}}
    if eps is not None:
        params["label_smoothing"] = {"epsilon": eps}
        params["entmax15"] = {}
    if am is not None:
        params["am_softmax"] = {"s": am[0], "m": am[1]}
    return params
