"""The end of `astune confirm`: the table of the confirmed configs over their finished runs,
logged on the search's parent run (``confirm.csv``, ``confirm.md``, ``confirm.png``, and the tag
`export` follows), and the :class:`ConfirmResult` the command prints."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from astune.confirmation.plan import ConfirmPlan
from astune.confirmation.table import ConfirmRow, format_table, markdown, plot, summarize, write_csv
from astune.store.confirmed import confirmed_configs, confirmed_winner, tied_with
from astune.store.conventions import CONFIRM_FRONT_TAG

ARTIFACTS = ("confirm.csv", "confirm.md", "confirm.png")


@dataclass(kw_only=True)
class ConfirmResult:
    """What a confirm hands back: the table rows, the winner and where the results are."""

    experiment: str
    tracking_uri: str
    parent_run_id: str
    rows: list[ConfirmRow]
    metric: str
    ran: int  # runs started now
    reused: int  # (config, seed) pairs finished before
    winner: str | None  # the best confirmed mean: its label and name, as the table shows it
    within: float | None = None  # a confirm of the front: the verdict's tolerance (points)
    tied: tuple[str, ...] = ()  # the configs whose mean equals the winner's, named as it is

    @property
    def faster(self) -> list[ConfirmRow]:
        """The rows confirmed faster at equal accuracy (a confirm of the front)."""
        return [row for row in self.rows if row.faster_at_equal]

    def __str__(self) -> str:
        return self.format()

    def format(self) -> str:
        """The table and the verdict, as `astune confirm` prints them."""
        lines = [
            f"confirm of search {self.experiment!r}: {self.ran} runs now, {self.reused} reused",
            format_table(self.rows, self.metric),
        ]
        if self.within is not None:
            tolerance = f"time significantly lower, {self.metric} within {self.within:g} points"
            names = ", ".join(f"{row.config.label} ({row.config.name})" for row in self.faster)
            verdict = names or "none of the front's configs, on these seeds"
            lines.append(f"faster at equal accuracy ({tolerance}): {verdict}")
        if self.winner and self.tied:
            others = " and ".join(self.tied)
            lines.append(
                f"confirmed winner (best mean): {self.winner}; {others} "
                f"{'has' if len(self.tied) == 1 else 'have'} the same mean on these seeds: more "
                "seeds may part them"
            )
        elif self.winner:
            lines.append(f"confirmed winner (best mean): {self.winner}")
        prefers = "the confirmed winner"
        if self.faster:
            prefers = "the fastest config confirmed faster at equal accuracy"
        lines.append(
            f"export:  python -m astune export --experiment {self.experiment} "
            f"--tracking-uri {self.tracking_uri} --format yaml -o best.yaml   (prefers {prefers})"
        )
        return "\n".join(lines)


def summarize_confirm(
    plan: ConfirmPlan, *, within: float | None, metric: str, ran: int, reused: int
) -> ConfirmResult:
    """The table of the plan's configs over their finished runs (``within``: a confirm of the
    front, its verdict's tolerance in points), logged on the search's parent run, and the
    summary a confirm hands back (``ran`` runs now, ``reused`` finished before)."""
    wanted = {c.confirms for c in plan.candidates}
    configs = [c for c in confirmed_configs(plan.store, plan.parent) if c.confirms in wanted]
    rows = summarize(configs, within=within, mode=plan.mode)
    if rows:
        log_confirm_artifacts(plan, rows, metric)
    mark_front_confirm(plan, within)
    winner = confirmed_winner(configs, plan.mode)
    return ConfirmResult(
        experiment=plan.experiment,
        tracking_uri=plan.store.uri,
        parent_run_id=plan.parent.info.run_id,
        rows=rows,
        metric=metric,
        ran=ran,
        reused=reused,
        winner=f"{winner.label} ({winner.name})" if winner else None,
        within=within,
        tied=tuple(f"{c.label} ({c.name})" for c in tied_with(configs, winner)) if winner else (),
    )


def mark_front_confirm(plan: ConfirmPlan, within: float | None) -> None:
    """Tag the search's parent run with ``within`` after a confirm of the front (so that
    `export` prefers the front trial confirmed faster at equal accuracy); untag it after any
    other confirm (the latest confirm is the one `export` follows)."""
    run_id, tags = plan.parent.info.run_id, plan.parent.data.tags
    if within is not None:
        plan.store.client.set_tag(run_id, CONFIRM_FRONT_TAG, str(within))
    elif CONFIRM_FRONT_TAG in tags:
        plan.store.client.delete_tag(run_id, CONFIRM_FRONT_TAG)


def log_confirm_artifacts(plan: ConfirmPlan, rows: list[ConfirmRow], metric: str) -> None:
    """``confirm.csv``, ``confirm.md`` and ``confirm.png`` on the search's parent run."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        write_csv(rows, out / "confirm.csv")
        (out / "confirm.md").write_text(markdown(rows, metric))
        plot(rows, out / "confirm.png", metric)
        for name in ARTIFACTS:
            plan.store.client.log_artifact(plan.parent.info.run_id, str(out / name))
