"""What a person sees while a search runs: a live trial table, then a summary.

In a terminal the table redraws in place (rich), its columns chosen to fit the terminal's width
(an 80-column one shows the columns that matter most, under short headers); elsewhere (CI logs,
`ray job submit`) each evaluation is one line, so the log reads as a history. A failed trial
gets one line either way: why it failed (Ray's traceback is in its ``error.txt``). The closing
lines fit 80 columns where they can; their commands are never wrapped, so that they paste whole.
"""

from __future__ import annotations

import shlex
import sys
import textwrap
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ray.tune import Callback

from astune._text import counted
from astune.store.estimate import duration_text
from astune.store.links import runs_view_url
from astune.tuning.optuna_storage import dashboard_command
from astune.tuning.progress import SearchProgress
from astune.tuning.settings import PROGRESS_EVERY_S, SearchResult

COLUMNS = ("loss", "delta", "warmup_ratio", "as_speed", "lam", "max_accum_steps", "lr")
WIDTH = 80  # the closing lines' width: a terminal's default
INDENT = "  "  # a wrapped line's continuation


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e-2 else f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)


@dataclass(frozen=True)
class Column:
    """A column of the live table: its header, where its cells come from (a key of the row, or
    of the trial's config with ``config``), and whether it stays when every cell is empty."""

    header: str
    key: str
    config: bool = False
    left: bool = False
    always: bool = False

    def cell(self, trial_id: str, row: dict[str, Any]) -> str:
        if self.key == "trial":
            return trial_id
        if self.key == "status":
            return row.get("status", "")
        if self.config:
            return _fmt(row["config"].get(self.key))
        if self.key in ("done", "left"):
            return row.get(self.key, "-")
        return str(row["evals"]) if self.key == "evals" else _fmt(row[self.key])


# The live table's columns, in the order they are shown.
TABLE_COLUMNS = (
    Column("trial", "trial", left=True, always=True),
    Column("status", "status", left=True, always=True),
    Column("loss", "loss", config=True, left=True, always=True),
    Column("delta", "delta", config=True),
    Column("warmup", "warmup_ratio", config=True),
    Column("speed", "as_speed", config=True),
    Column("lam", "lam", config=True),
    Column("accum", "max_accum_steps", config=True),
    Column("lr", "lr", config=True),
    Column("done", "done"),
    Column("left", "left"),
    Column("evals", "evals", always=True),
    Column("best", "best", always=True),
    Column("masked", "masked"),
    Column("test", "test"),
)
# Which columns a narrow terminal keeps, most wanted first: the rest go, last first.
KEPT_FIRST = (
    "trial", "status", "loss", "best", "evals", "done", "left", "lr", "delta", "masked", "speed",
    "test", "lam", "accum", "warmup",
)  # fmt: skip
GAP = 2  # characters between two columns (rich: collapsed padding, no vertical lines)


class TrialTable:
    """The live table as a rich renderable: a title line, then one row per trial, with the
    columns that fit the width rich renders it at (a resized terminal redraws to fit)."""

    def __init__(
        self,
        rows: dict[str, dict[str, Any]],
        *,
        metric: str,
        total: int | None,
        command: str = "search",
        timing: str = "",
    ):
        self.rows, self.metric, self.total, self.command = rows, metric, total, command
        self.timing = timing  # elapsed and about what is left (tuning/progress.py)

    def title(self) -> str:
        total = f"/{self.total}" if self.total else ""
        bests = [row["best"] for row in self.rows.values() if row.get("best") is not None]
        best = f", best {self.metric} {_fmt(max(bests))}" if bests else ""
        what = "runs" if self.command == "confirm" else "trials"  # a confirm re-runs configs
        return f"astune {self.command}: {len(self.rows)}{total} {what}{best}"

    def columns(self, width: int) -> list[Column]:
        """The columns shown at ``width``: those with something to show, the most wanted ones
        first while they fit."""
        cells = {c.header: [c.cell(t, r) for t, r in self.rows.items()] for c in TABLE_COLUMNS}
        shown = {
            c.header
            for c in TABLE_COLUMNS
            if c.always or any(cell != "-" for cell in cells[c.header])
        }
        kept: set[str] = set()
        used = -GAP
        for header in KEPT_FIRST:
            if header not in shown:
                continue
            need = max([len(header), *(len(cell) for cell in cells[header])]) + GAP
            if used + need > width and kept:
                break
            kept.add(header)
            used += need
        return [c for c in TABLE_COLUMNS if c.header in kept]

    def table(self, width: int) -> Any:
        from rich import box
        from rich.table import Table

        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
        columns = self.columns(width)
        for column in columns:
            table.add_column(
                column.header,
                justify="left" if column.left else "right",
                min_width=len(column.header),
                no_wrap=True,
                overflow="ellipsis",
            )
        for trial_id, row in self.rows.items():
            table.add_row(*(column.cell(trial_id, row) for column in columns))
        return table

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        from rich.text import Text

        yield Text(self.title(), overflow="ellipsis", no_wrap=True)
        if self.timing:
            yield Text(self.timing, overflow="ellipsis", no_wrap=True)
        yield self.table(options.max_width)


class ConsoleCallback(Callback):
    """A live table of trials: config, status, evaluations, objective and masked ratio."""

    command = "search"  # whose table: `search` or `confirm` (searches pickled before lack it)

    def __init__(
        self,
        metric: str = "objective",
        num_samples: int | None = None,
        live: bool | None = None,
        *,
        command: str = "search",
        progress_every: float = PROGRESS_EVERY_S,
    ):
        self.metric, self.command = metric, command
        self.num_samples = num_samples
        self.live_mode = sys.stdout.isatty() if live is None else live
        self.rows: dict[str, dict[str, Any]] = {}
        self._live = None
        self._last_draw = 0.0
        self.progress_every = progress_every  # outside a terminal: a progress line this often
        self.progress = SearchProgress(num_samples)
        self._polled = time.monotonic()

    def __getstate__(self) -> dict[str, Any]:  # pickled with the experiment; the screen is not
        return {**self.__dict__, "_live": None, "progress": None}

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._row(trial)["status"] = "RUNNING"
        self._progress().start(trial.trial_id)
        self._draw()

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        """Between evaluations: the running trials' progress (every 2 s in a terminal; outside
        one, a line every ``progress_every`` seconds)."""
        now = time.monotonic()
        every = 2.0 if self.live_mode else getattr(self, "progress_every", PROGRESS_EVERY_S)
        if now - getattr(self, "_polled", 0.0) < every:
            return
        self._polled = now
        progress = self._progress()
        progress.poll()
        for trial_id, row in self.rows.items():
            row["done"], row["left"] = progress.of(trial_id)
        if self.live_mode:
            self._draw(force=True)
        else:
            print(progress.line(self.command), flush=True)

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        row = self._row(trial)
        if result.get("final"):
            row["test"] = next(
                (v for k, v in result.items() if k.startswith("test_") and k != "test_loss"), None
            )
        else:
            row["evals"] = result.get("training_iteration", 0)
            row["masked"] = result.get("masked_ratio")
        value = result.get(self.metric)
        if value is not None and (row.get("best") is None or value > row["best"]):
            row["best"] = value
        if not self.live_mode and not result.get("final"):
            print(
                f"[{trial.trial_id}] {self._config_text(trial)} eval {row['evals']}: "
                f"{self.metric} {_fmt(value)} (best {_fmt(row['best'])}) "
                f"masked {_fmt(row['masked'])}",
                flush=True,
            )
        self._draw()

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        finished = (trial.last_result or {}).get("final")
        row = self._row(trial)
        row["status"], row["done"], row["left"] = "DONE" if finished else "STOPPED", "-", "-"
        self._progress().end(trial.trial_id)
        self._draw(force=True)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        from astune.tuning.lifecycle.trial_errors import trial_error_message

        row = self._row(trial)
        row["status"], row["done"], row["left"] = "FAILED", "-", "-"
        self._progress().end(trial.trial_id)
        line = f"[{trial.trial_id}] failed: {trial_error_message(trial)}"
        if not self.live_mode:
            print(line, flush=True)
        self._draw(force=True)
        if self._live is not None:  # above the table, which stays at the bottom
            from rich.text import Text

            self._live.console.print(Text(line))

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        if self._live is not None:
            self._live.update(self.view(), refresh=True)
            self._live.stop()
            self._live = None

    def view(self) -> TrialTable:
        """The live table, as rich renders it (at the console's width)."""
        progress, timing = self._progress(), ""
        if progress.running():  # while trials run: elapsed, and about what is left
            timing = f"{duration_text(progress.elapsed())} in, about "
            timing += f"{duration_text(progress.remaining())} left if none stops early"
        return TrialTable(
            self.rows,
            metric=self.metric,
            total=self.num_samples,
            command=self.command,
            timing=timing,
        )

    def _progress(self) -> SearchProgress:
        if getattr(self, "progress", None) is None:  # a callback pickled before it had one
            self.progress = SearchProgress(self.num_samples)
        return self.progress

    def _row(self, trial: Any) -> dict[str, Any]:
        row = self.rows.setdefault(
            trial.trial_id, {"evals": 0, "best": None, "masked": None, "test": None}
        )
        row["config"] = trial.config
        return row

    def _config_text(self, trial: Any) -> str:
        return " ".join(f"{k}={_fmt(trial.config[k])}" for k in COLUMNS if k in trial.config)

    def _draw(self, force: bool = False) -> None:
        if not self.live_mode or (not force and time.monotonic() - self._last_draw < 0.5):
            return
        from rich.live import Live

        if self._live is None:
            self._live = Live(self.view(), auto_refresh=False, transient=False)
            self._live.start()
        self._live.update(self.view(), refresh=True)
        self._last_draw = time.monotonic()


def wrapped(head: str, items: Iterable[str], *, width: int = WIDTH) -> list[str]:
    """``head`` and then ``items``, comma-separated, over lines of at most ``width``, each line
    after the first indented; an item is never split (one wider than a line has a line of its
    own)."""
    items = list(items)
    pieces = [item + ("," if i < len(items) - 1 else "") for i, item in enumerate(items)]
    lines, line = [], head
    for piece in pieces:
        if len(line) + 1 + len(piece) <= width:
            line = f"{line} {piece}"
        else:
            lines.append(line)
            line = INDENT + piece
    return [*lines, line]


def _text(text: str, width: int = WIDTH) -> list[str]:
    """A sentence over lines of at most ``width`` (a path or URL in it left whole)."""
    return textwrap.wrap(
        text,
        width,
        subsequent_indent=INDENT,
        break_long_words=False,
        break_on_hyphens=False,
    )


# The Pareto front's short headers (the head line names the objectives in full).
SHORT_NAMES = {
    "train_seconds": "seconds",
    "samples_computed": "samples",
    "optimizer_steps": "steps",
}


def front_lines(summary: SearchResult) -> list[str]:
    """The Pareto front as a table, cheapest first (by the first cost)."""
    names = list(summary.objectives)
    costs = ", ".join(names[1:])
    count = len(summary.front)
    head = _text(
        f"Pareto front: {counted(count, 'trial')}, {names[0]} against {costs}, cheapest first"
    )
    headers = [SHORT_NAMES.get(n, n) for n in names]
    rows = [["trial", "loss", "speed", "skip", *headers]]
    for p in summary.front:
        speed, skip = _fmt(p.flag("as_speed")), _fmt(p.flag("as_skip"))
        rows.append([p.trial_id, p.loss, speed, skip, *(_fmt(p.values[n]) for n in names)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    table = ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return [*head, *table]


def config_items(config: dict[str, Any]) -> list[str]:
    """A config's ``key=value`` items, the searched keys (the table's) first, None left out."""
    shown = {k: v for k, v in config.items() if v is not None}
    keys = [k for k in COLUMNS if k in shown] + [k for k in shown if k not in COLUMNS]
    return [f"{k}={_fmt(shown[k])}" for k in keys]


def format_summary(summary: SearchResult, ui_command: str) -> str:
    """The closing lines: the best config and objective, where the runs are, what to run next.
    Each line fits 80 columns but a command (kept whole, to paste), a URL or a long path."""
    states = ", ".join(f"{n} {s.lower()}" for s, n in sorted(summary.trial_states.items()))
    trials = counted(summary.num_trials, "trial")
    lines = _text(f"search {summary.experiment!r}: {trials} ({states})")
    if summary.best_objective is None:
        lines += _text("no trial reported a result; see the errors in " + summary.experiment_path)
    elif len(summary.objectives) > 1:
        lines += front_lines(summary)
    else:
        lines.append(f"best {summary.metric}: {summary.best_objective:.4f}")
        lines += wrapped("best config:", config_items(summary.best_config))
    lines.append(f"review:  {ui_command}")
    if summary.experiment_id is not None:
        lines.append(f"runs:    {runs_view_url(summary.tracking_uri, summary.experiment_id)}")
    export = ["--experiment", summary.experiment, "--tracking-uri", summary.tracking_uri]
    export += ["--format", "yaml", "-o", "best.yaml"]
    lines.append(f"export:  python -m astune export {shlex.join(export)}")
    if summary.resume_command:
        lines.append(f"resume:  {summary.resume_command}")
    lines += [
        f"trials:  {summary.experiment_path}",
        f"optuna:  {dashboard_command(summary.optuna_storage)}",
    ]
    return "\n".join(lines)
