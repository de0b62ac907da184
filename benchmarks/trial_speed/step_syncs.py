"""Host-device synchronisations a micro-batch and an optimizer step, per variant (issue 69).

Real runs of the loop under :class:`astune.training.sync_audit.SyncAudit`, which judges on any
machine each call as it would behave on CUDA; the loop's own hooks split the count by phase
(micro-batch, optimizer step, AS-Skip's re-check chunk) and the audit by the sync place it
happened in. Counts, not times: they do not depend on the machine, so the CPU measures them.

    python -m benchmarks.trial_speed.step_syncs --data-dir ../shared/data \
        --json benchmarks/trial_speed/results/step_syncs_after.json

The figures before issue 69 came from the same script run on the commit before it, with the
audit's two modules copied in (README, "Syncs a step").
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from astune.config import TrainConfig
from astune.training import LoopHooks, Run
from astune.training.sync_audit import SyncAudit, run_device_state

AS = dict(loss="as_softmax", delta=0.3, lr=3e-3)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "softmax": ("sst5", dict(loss="softmax")),
    "label_smoothing": ("sst5", dict(loss="label_smoothing")),
    "sparsemax": ("sst5", dict(loss="sparsemax")),
    "as_softmax": ("sst5", AS),
    "as_speed": ("sst5", dict(AS, as_speed=True, lam=1.5, max_accum_steps=3)),
    "as_skip": ("sst5", dict(AS, delta=0.6, lr=1e-2, as_skip=True, skip_keep=0.5)),
    "infobatch": ("sst5", dict(loss="softmax", infobatch=True)),
    "ema_delta": ("sst5", dict(AS, delta_schedule="ema")),
    "multilabel_as_softmax": (
        "go_emotions",
        dict(loss="multilabel_as_softmax", delta=0.1, lr=3e-3),
    ),
    "token_as_softmax": ("conll2003", AS),
}
"""Each variant's dataset and its config's own fields."""
SIZE = dict(
    backbone="minilm", num_layers=1, max_length=32, max_train_samples=64, max_eval_samples=16,
    epochs=3, batch_size=8, seed=7, device="cpu", checkpoint_every="end",
)  # fmt: skip


class PhaseSyncs(LoopHooks):
    """The audit's syncs made inside each phase of the loop, by phase."""

    PHASES = ("micro_step", "optimizer_step", "recheck", "evaluate", "test")

    def __init__(self, audit: SyncAudit):
        self.audit, self.since = audit, 0
        self.count: Counter = Counter()
        self.sites: Counter = Counter()
        self.phases: Counter = Counter()

    def _start(self, *_: Any) -> None:
        self.since = len(self.audit.syncs)

    def _end(self, phase: str) -> None:
        made = self.audit.syncs[self.since :]
        self.count[phase] += len(made)
        self.phases[phase] += 1
        self.sites.update(f"{phase}: {s.kind} {s.what} at {s.where}" for s in made)
        self.since = len(self.audit.syncs)

    on_micro_step_start = on_optimizer_step_start = on_recheck_start = _start
    on_evaluate_start = on_test_start = _start

    def on_micro_step_end(self, run, batch, visit) -> None:
        self._end("micro_step")

    def on_optimizer_step_end(self, run) -> None:
        self._end("optimizer_step")

    def on_recheck_end(self, run, index) -> None:
        self._end("recheck")

    def on_evaluate_end(self, run) -> None:
        self._end("evaluate")

    def on_test_end(self, run) -> None:
        self._end("test")


def audit_variant(name: str, data_dir: str) -> dict[str, Any]:
    """One variant's run under the audit: syncs a micro-batch, a step and a re-check chunk,
    the places' totals and every site that synchronised inside a phase."""
    dataset, fields = VARIANTS[name]
    with tempfile.TemporaryDirectory() as out:
        config = TrainConfig(
            dataset=dataset, data_dir=data_dir, output_dir=out, **{**SIZE, **fields}
        )
        audit = SyncAudit()
        phases = PhaseSyncs(audit)
        run = Run(config, hooks=[phases])
        audit.tag(*run_device_state(run))
        with audit:
            run.train()
    per = {
        phase: phases.count[phase] / phases.phases[phase] if phases.phases[phase] else None
        for phase in PhaseSyncs.PHASES
    }
    # between the phases: a batch's planning and AS-Skip's recording of a re-check chunk
    between = len(audit.syncs) - sum(phases.count.values())
    return {
        "variant": name,
        "micro_batches": phases.phases["micro_step"],
        "optimizer_steps": phases.phases["optimizer_step"],
        "syncs_per_micro_batch": per["micro_step"],
        "syncs_per_optimizer_step": per["optimizer_step"],
        "syncs_per_recheck_chunk": per["recheck"],
        "syncs_between_phases_per_optimizer_step": between / max(1, run.pos.steps),
        "syncs_per_evaluation": per["evaluate"],
        "by_place": {str(k): v for k, v in audit.by_place().items()},
        "sites": dict(phases.sites.most_common()),
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| variant | a micro-batch | an optimizer step | a re-check chunk | between phases, "
             "a step | an evaluation |", "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        cells = [r["syncs_per_micro_batch"], r["syncs_per_optimizer_step"]]
        cells += [r["syncs_per_recheck_chunk"], r["syncs_between_phases_per_optimizer_step"]]
        cells.append(r["syncs_per_evaluation"])
        lines.append(
            f"| {r['variant']} | "
            + " | ".join("-" if c is None else f"{c:.2f}" for c in cells)
            + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--label", default="after", help="what the run measures (before / after)")
    p.add_argument("--json", default="", help="write the rows here and enter them in MANIFEST")
    args = p.parse_args(argv)
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        p.error(f"--variants: unknown {unknown}; known: {', '.join(VARIANTS)}")
    from benchmarks.common.harness import commit

    torch.set_num_threads(1)
    started_at = commit()  # the tree may change while it runs (docs written meanwhile)
    rows = [audit_variant(name, args.data_dir) for name in names]
    print(table(rows))
    if args.json:
        from benchmarks.common.harness import machine_line
        from benchmarks.common.provenance import data_inputs, record

        Path(args.json).write_text(json.dumps({"label": args.label, "rows": rows}, indent=1))
        datasets = sorted({VARIANTS[n][0] for n in names})
        record(
            args.json,
            inputs=data_inputs(args.data_dir, datasets),
            machine=machine_line(),
            commit=started_at,
        )


if __name__ == "__main__":
    main()
