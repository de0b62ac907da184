"""What a person sees while a search runs: a live trial table, then a summary.

In a terminal the table redraws in place (rich); elsewhere (CI logs, `ray job submit`) each
evaluation is one line, so the log reads as a history.
"""

from __future__ import annotations

import shlex
import sys
import time
from typing import Any

from ray.tune import Callback

from astune.search.optuna_storage import dashboard_command, storage_url
from astune.search.settings import SearchSummary
from astune.store.links import runs_view_url

COLUMNS = ("loss", "delta", "warmup_ratio", "as_speed", "lam", "max_accum_steps", "lr")


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e-2 else f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)


class ConsoleCallback(Callback):
    """A live table of trials: config, status, evaluations, objective and masked ratio."""

    def __init__(
        self, metric: str = "objective", num_samples: int | None = None, live: bool | None = None
    ):
        self.metric = metric
        self.num_samples = num_samples
        self.live_mode = sys.stdout.isatty() if live is None else live
        self.rows: dict[str, dict[str, Any]] = {}
        self._live = None
        self._last_draw = 0.0

    def __getstate__(self) -> dict[str, Any]:  # pickled with the experiment; the screen is not
        return {**self.__dict__, "_live": None}

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._row(trial)["status"] = "RUNNING"
        self._draw()

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
        self._row(trial)["status"] = "DONE" if finished else "STOPPED"
        self._draw(force=True)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        from astune.search.trial_errors import trial_error_message

        row = self._row(trial)
        row["status"] = "FAILED"
        if not self.live_mode:
            print(f"[{trial.trial_id}] failed: {trial_error_message(trial)}", flush=True)
        self._draw(force=True)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        if self._live is not None:
            self._live.update(self._table(), refresh=True)
            self._live.stop()
            self._live = None

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
            self._live = Live(self._table(), auto_refresh=False, transient=False)
            self._live.start()
        self._live.update(self._table(), refresh=True)
        self._last_draw = time.monotonic()

    def _table(self):
        from rich.table import Table

        total = f"/{self.num_samples}" if self.num_samples else ""
        table = Table(title=f"astune search: {len(self.rows)}{total} trials", title_justify="left")
        for name in ("trial", "status", *COLUMNS, "evals", f"best {self.metric}", "masked", "test"):
            table.add_column(
                name, justify="right" if name not in ("trial", "status", "loss") else "left"
            )
        for trial_id, row in self.rows.items():
            config = row["config"]
            table.add_row(
                trial_id,
                row.get("status", ""),
                *(_fmt(config.get(k)) for k in COLUMNS),
                str(row["evals"]),
                _fmt(row["best"]),
                _fmt(row["masked"]),
                _fmt(row["test"]),
            )
        return table


def front_lines(summary: SearchSummary) -> list[str]:
    """The Pareto front as a table, cheapest first (by the first cost)."""
    names = list(summary.objectives)
    costs = ", ".join(names[1:])
    count = len(summary.front)
    head = f"Pareto front: {count} trial(s), {names[0]} against {costs}, cheapest first"
    rows = [["trial", "loss", "AS-Speed", "AS-Skip", *names]]
    for p in summary.front:
        speed, skip = _fmt(p.flag("as_speed")), _fmt(p.flag("as_skip"))
        rows.append([p.trial_id, p.loss, speed, skip, *(_fmt(p.values[n]) for n in names)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    table = ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return [head, *table]


def format_summary(summary: SearchSummary, ui_command: str) -> str:
    """The closing lines: the best config and objective, where the runs are, what to run next."""
    lines = [
        f"search {summary.experiment!r}: {summary.num_trials} trials "
        f"({', '.join(f'{n} {s.lower()}' for s, n in sorted(summary.trial_states.items()))})"
    ]
    if summary.best_objective is None:
        lines.append("no trial reported a result; see the errors in " + summary.experiment_path)
    elif len(summary.objectives) > 1:
        lines += front_lines(summary)
    else:
        lines.append(f"best {summary.metric}: {summary.best_objective:.4f}")
        shown = {k: v for k, v in summary.best_config.items() if v is not None}
        lines.append("best config: " + ", ".join(f"{k}={_fmt(v)}" for k, v in shown.items()))
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
        f"optuna:  {dashboard_command(storage_url(summary.tracking_uri))}",
    ]
    return "\n".join(lines)
