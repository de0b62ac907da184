"""The PNGs of benchmarks/trial_speed/as_speed.py: masked ratio and accumulation over training, and
the share of the visited samples each skipping variant computed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.trial_speed.variants import SKIP_VARIANTS


def plot(path: str, results: dict[str, list[dict[str, Any]]], args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax2 = ax.twinx()
    colors = {"as_softmax": "tab:blue", "as_speed": "tab:orange", "softmax": "tab:gray"}
    for variant in ("as_softmax", "as_speed"):
        if variant not in results:
            continue
        run = results[variant][0]
        curve, n_train = run["curve"], run["n_train"]
        bin_size = max(args.batch_size, n_train // 10)  # 10 points per epoch
        xs, ys, acc_active, acc_masked, edge = [], [], 0, 0, bin_size
        for m in curve:
            acc_active, acc_masked = acc_active + m["active"], acc_masked + m["masked"]
            if m["samples"] >= edge or m is curve[-1]:
                xs.append(m["samples"] / n_train)
                ys.append(acc_masked / max(1, acc_active))
                acc_active, acc_masked, edge = 0, 0, edge + bin_size
        ax.plot(xs, ys, color=colors[variant], label=f"{variant}: masked ratio")
        evals = run["metrics_jsonl"]
        ax.scatter(
            [e["samples_seen"] / n_train for e in evals],
            [e["masked_ratio"] for e in evals],
            color=colors[variant],
            marker="o",
            s=25,
            zorder=3,
        )
        if variant == "as_speed":
            ax2.step(
                [m["samples"] / n_train for m in curve],
                [m["accum"] for m in curve],
                where="post",
                color=colors[variant],
                linestyle="--",
                label="as_speed: accumulation steps",
            )
    ax.set_xlabel("epochs (training samples seen / training set size)")
    ax.set_ylabel("masked ratio (fully masked rows / rows)")
    ax.set_ylim(0, 1)
    # AS-Speed's request round(lam / (1 - r)) reaches k micro-batches once the masked ratio r of a
    # window is at least 1 - lam / (k - 0.5): mark those levels.
    for k in range(2, args.max_accum_steps + 1):
        level = 1 - args.lam / (k - 0.5)
        if 0 < level < 1:
            ax.axhline(level, color="tab:orange", linewidth=0.6, linestyle=":")
            ax.text(
                0.01,
                level + 0.01,
                f"masked ratio for {k} accumulation steps",
                fontsize=7,
                color="tab:orange",
                transform=ax.get_yaxis_transform(),
            )
    ax2.set_ylabel("accumulation steps (micro-batches per optimizer step)")
    ax2.set_ylim(0, args.max_accum_steps + 0.5)
    lines = ax.get_legend_handles_labels(), ax2.get_legend_handles_labels()
    ax.legend(lines[0][0] + lines[1][0], lines[0][1] + lines[1][1], loc="upper left", fontsize=8)
    ax.set_title(
        f"{args.dataset}, {args.backbone} (layers={args.num_layers or 'all'}), "
        f"delta={args.delta:g}, "
        f"lam={args.lam:g}, s={args.max_accum_steps}; dots: metrics.jsonl per evaluation",
        fontsize=9,
    )
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_computed(path: str, results: dict[str, list[dict[str, Any]]], args) -> None:
    """Share of the visited samples that went through the model, per tenth of an epoch, for
    each skipping variant and seed; AS-Softmax's masked ratio for reference."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    colors = {
        "as_skip": "tab:green",
        "as_speed_skip": "tab:red",
        "as_skip_represented": "tab:purple",
        "as_skip_v1": "tab:orange",
        "as_skip_flat": "tab:brown",
        "as_skip_grouped": "tab:olive",
        "as_skip_soft": "tab:cyan",
        "infobatch": "tab:gray",
        "as_softmax": "tab:blue",
    }
    for variant in ("as_softmax", *SKIP_VARIANTS, "infobatch"):
        for k, run in enumerate(results.get(variant, [])):
            curve, n_train = run["curve"], run["n_train"]
            edge, step, xs, ys, num, den = 0, max(1, n_train // 10), [], [], 0, 0
            for m in curve:
                if variant == "as_softmax":
                    num, den = num + m["masked"], den + m["active"]
                else:
                    num, den = num + m.get("computed", 0), den + m.get("visited", 0)
                if m["samples"] >= edge + step or m is curve[-1]:
                    xs.append(m["samples"] / n_train)
                    ys.append(num / max(1, den))
                    edge, num, den = m["samples"], 0, 0
            label = (
                None
                if k
                else f"{variant}: masked ratio"
                if variant == "as_softmax"
                else f"{variant}: samples computed / visited"
            )
            ax.plot(xs, ys, color=colors[variant], alpha=0.8, linewidth=1, label=label)
    ax.set_xlabel("epochs (training samples seen / training set size)")
    ax.set_ylabel("share")
    ax.set_ylim(0, 1.05)
    ax.legend(loc="lower left", fontsize=8)
    ax.set_title(
        f"AS-Skip on {args.dataset}: one line per seed; delta={args.delta:g}, "
        f"keep={_or_default(args.skip_keep, 'skip_keep')}, "
        f"anneal={_or_default(args.skip_anneal, 'skip_anneal')}",
        fontsize=9,
    )
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _or_default(value: float | None, field: str) -> float:
    from astune.config import TRAIN_FIELDS

    return TRAIN_FIELDS[field].default if value is None else value
