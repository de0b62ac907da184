"""The printed report of benchmarks/trial_speed/as_speed.py: medians over repeats, the cost model,
and the table over seeds (means with 95% t-intervals, ratios and differences paired by seed)."""

from __future__ import annotations

import statistics
from typing import Any

from astune.confirmation.stats import t_interval


def summarize(results: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per variant: medians over repeats, and the median over repeats of the ratio to softmax
    taken within each repeat (the variants of a repeat ran back to back)."""
    keys = (
        "train_s",
        "lib_train_seconds",
        "wall_s",
        "eval_s",
        "micro_s",
        "step_s",
        "recheck_s",
        "other_s",
        "t_micro_median",
        "t_step_median",
    )
    summary: dict[str, dict[str, Any]] = {}
    base = results.get("softmax")
    for variant, runs in results.items():
        # .get: JSON written before a key existed (--from-json) reads it as None
        row: dict[str, Any] = {k: median_or_none([r.get(k) for r in runs]) for k in keys}
        for k in (
            "optimizer_steps",
            "micro_batches",
            "samples_fwd_bwd",
            "samples_with_grad",
            "samples_rechecked",
            "rechecks_active",
            "masked_ratio",
            "masked_ratio_last_epoch",
            "final_accum",
            "val_accuracy",
            "test_accuracy",
            "n_evals",
            "n_train",
            "per_epoch",
        ):
            row[k] = runs[0].get(k)
        row["deterministic"] = all(
            r["test_accuracy"] == runs[0]["test_accuracy"]
            and r["optimizer_steps"] == runs[0]["optimizer_steps"]
            for r in runs
        )
        row["train_s_repeats"] = [r["train_s"] for r in runs]
        if base is not None:
            for k in ("train_s", "lib_train_seconds", "step_s"):
                row[f"{k}_ratio"] = median_or_none(
                    [None if r[k] is None else r[k] / b[k] for r, b in zip(runs, base)]
                )
            row["steps_ratio"] = row["optimizer_steps"] / base[0]["optimizer_steps"]
        summary[variant] = row
    return summary


def median_or_none(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else statistics.median(values)


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def model_ratios(
    summary: dict[str, dict[str, Any]], probe: dict[str, float] | None
) -> dict[str, Any]:
    """What the per-unit costs predict: time = S*(t_first + t_step) + (M - S)*t_accum, for M
    micro-batches in S optimizer steps; the step share is softmax's S*t_step over its time."""
    if probe is None or "softmax" not in summary:
        return {}

    def predicted(row):
        m, s = row["micro_batches"], row["optimizer_steps"]
        return s * (probe["first"] + probe["step"]) + (m - s) * probe["accum"]

    base = predicted(summary["softmax"])
    out = {"step_share_softmax": summary["softmax"]["micro_batches"] * probe["step"] / base}
    for variant, row in summary.items():
        out[f"predicted_ratio_{variant}"] = predicted(row) / base
    return out


def print_report(
    args,
    machine: str,
    summary,
    probe,
    model,
    tokenize_s: float,
) -> None:
    print(f"\nmachine: {machine}")
    print(
        f"config: {args.dataset} {args.backbone} layers={args.num_layers or 'all'} "
        f"train={summary[next(iter(summary))]['n_train']} samples x {args.epochs:g} epochs, "
        f"max_length={args.max_length}, batch={args.batch_size}, lr={args.lr:g}, "
        f"delta={args.delta:g}, lam={args.lam:g}, max_accum={args.max_accum_steps}, "
        f"seed={args.seed}, repeats={args.repeats}, "
        f"tokenize once: {tokenize_s:.1f} s"
    )
    print(
        f"\nTiming, {args.schedule} schedule (medians over repeats; ratios to softmax taken "
        "within each repeat, then the median)\n"
    )
    print(
        "| variant | train s (excl. eval) | x softmax | lib train_seconds | x softmax "
        "| optimizer steps | x softmax "
        "| micro-batches | fwd+bwd s | opt-step s | other s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")

    def ratio(r: dict[str, Any], k: str) -> str:
        return fmt(r.get(k), ".3f")

    for v, r in summary.items():
        print(
            f"| {v} | {r['train_s']:.1f} | {ratio(r, 'train_s_ratio')} | "
            f"{fmt(r['lib_train_seconds'], '.1f')} | "
            f"{ratio(r, 'lib_train_seconds_ratio')} | {r['optimizer_steps']} | "
            f"{ratio(r, 'steps_ratio')} | "
            f"{r['micro_batches']} | {r['micro_s']:.1f} | {r['step_s']:.1f} | {r['other_s']:.1f} |"
        )
    print("\nSamples and accuracy\n")
    print(
        "| variant | samples fwd+bwd | samples with a gradient | re-checked (active) "
        "| re-check s | masked (all) | masked (last epoch) "
        "| final accum steps | val acc | test acc | evals | eval s (excluded) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for v, r in summary.items():
        print(
            f"| {v} | {r['samples_fwd_bwd']} | {r['samples_with_grad']} | "
            f"{fmt(r.get('samples_rechecked'), 'd')} ({fmt(r.get('rechecks_active'), 'd')}) | "
            f"{fmt(r.get('recheck_s'), '.1f')} | "
            f"{r['masked_ratio']:.1%} | "
            f"{r['masked_ratio_last_epoch']:.1%} | {r['final_accum']} | {r['val_accuracy']:.4f} | "
            f"{r['test_accuracy']:.4f} | {r['n_evals']} | {r['eval_s']:.1f} |"
        )
    print(
        "\nOver training (first repeat): masked ratio / optimizer steps / "
        "largest accumulation steps / val acc, per epoch\n"
    )
    rows = {v: r["per_epoch"] for v, r in summary.items()}
    n_epochs = max(len(r) for r in rows.values())
    print("| epoch | " + " | ".join(rows) + " |")
    print("|---|" + "---|" * len(rows))
    for e in range(n_epochs):
        cells = []
        for _, r in rows.items():
            if e < len(r):
                x = r[e]
                acc = "-" if x["val_accuracy"] is None else f"{x['val_accuracy']:.3f}"
                cells.append(
                    f"{x['masked_ratio']:.1%} / {x['optimizer_steps']} / {x['accum_max']} / {acc}"
                )
            else:
                cells.append("")
        print(f"| {e + 1} | " + " | ".join(cells) + " |")
    if args.repeats > 1:
        print(
            "\ntrain s per repeat: "
            + "; ".join(
                f"{v}: " + ", ".join(f"{t:.1f}" for t in r["train_s_repeats"])
                for v, r in summary.items()
            )
        )
        if not all(r["deterministic"] for r in summary.values()):
            print(
                "note: accuracy or steps differed between repeats (non-deterministic kernels); "
                "the first repeat's are shown"
            )
    print("\nPer-unit costs (median seconds)\n")
    print("| variant | micro-batch (in run) | optimizer step (in run) |")
    print("|---|---|---|")
    for v, r in summary.items():
        print(f"| {v} | {r['t_micro_median']:.4f} | {r['t_step_median']:.4f} |")
    if probe:
        print(
            f"\ninterleaved probe ({args.probe_rounds} rounds): "
            f"micro-batch starting a window {probe['first']:.4f} s, "
            f"accumulating micro-batch {probe['accum']:.4f} s, "
            f"optimizer step {probe['step']:.4f} s "
            f"(step / first micro-batch = {probe['step'] / probe['first']:.3f})"
        )
    if model:
        print(
            "optimizer steps' share of softmax's training time, from the probe: "
            f"{model['step_share_softmax']:.1%}"
        )
        print(
            "time ratio to softmax the probe's unit costs predict: "
            + ", ".join(f"{v} {model[f'predicted_ratio_{v}']:.3f}" for v in summary)
        )


def mean_interval(values: list[float]) -> tuple[float, float]:
    """Mean and half-width of its 95% t-interval (``astune.confirmation.stats.t_interval``; 0 for a
    single value)."""
    interval = t_interval(values)
    return interval.mean, interval.half_width if interval.n > 1 else 0.0


def _mean_interval_if_all(values: list[float | None]) -> tuple[float, float] | None:
    """:func:`mean_interval` of ``values``; None where a run lacks the number (a file written
    before AS-Skip re-checked zero-loss samples)."""
    return None if None in values else mean_interval(values)


def seed_table(results: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per variant over seeds: the training-time ratio to softmax (and to softmax_grouped when
    run; paired by seed), test accuracy, its difference to AS-Softmax's (paired by seed), the
    share of samples computed and the re-check forwards, each as (mean, 95% half-width)."""
    base, grouped = results.get("softmax"), results.get("softmax_grouped")
    reference = results.get("as_softmax")
    table = {}
    for variant, runs in results.items():
        row = {
            "seeds": [r["seed"] for r in runs],
            "test_accuracy": mean_interval([r["test_accuracy"] for r in runs]),
            "computed_share": mean_interval(
                [r["samples_fwd_bwd"] / r["samples_seen"] for r in runs]
            ),
            "train_s": mean_interval([r["train_s"] for r in runs]),
            "rechecked": _mean_interval_if_all([r.get("samples_rechecked") for r in runs]),
            "rechecks_active": _mean_interval_if_all([r.get("rechecks_active") for r in runs]),
        }
        if base is not None:
            row["time_ratio"] = mean_interval(
                [r["train_s"] / b["train_s"] for r, b in zip(runs, base)]
            )
            row["steps_ratio"] = mean_interval(
                [r["optimizer_steps"] / b["optimizer_steps"] for r, b in zip(runs, base)]
            )
        if grouped is not None:
            row["time_ratio_grouped"] = mean_interval(
                [r["train_s"] / b["train_s"] for r, b in zip(runs, grouped)]
            )
        if reference is not None:
            row["acc_minus_as_softmax"] = mean_interval(
                [r["test_accuracy"] - b["test_accuracy"] for r, b in zip(runs, reference)]
            )
        table[variant] = row
    return table


def print_seed_table(table: dict[str, dict[str, Any]], args) -> None:
    n = len(next(iter(table.values()))["seeds"])
    print(f"\nOver {n} seed(s): mean +- 95% t-interval (ratios and differences paired by seed)\n")
    print(
        "| variant | train s | time x softmax | time x softmax_grouped | steps x softmax "
        "| samples computed | re-check forwards (active) | test acc | test acc - as_softmax |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    pm = lambda x, spec: f"{format(x[0], spec)} +- {format(x[1], spec.lstrip('+'))}"  # noqa: E731
    opt = lambda x, spec: "-" if x is None else pm(x, spec)  # noqa: E731
    for v, r in table.items():
        rechecks = "-" if r["rechecked"] is None else f"{r['rechecked'][0]:.0f}"
        rechecks += " (-)" if r["rechecks_active"] is None else f" ({r['rechecks_active'][0]:.0f})"
        print(
            f"| {v} | {pm(r['train_s'], '.1f')} | {opt(r.get('time_ratio'), '.3f')} | "
            f"{opt(r.get('time_ratio_grouped'), '.3f')} | {opt(r.get('steps_ratio'), '.3f')} | "
            f"{pm(r['computed_share'], '.1%')} | {rechecks} | {pm(r['test_accuracy'], '.4f')} | "
            f"{opt(r.get('acc_minus_as_softmax'), '+.4f')} |"
        )
