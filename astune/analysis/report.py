"""`astune report`: every study of one search, as PNG figures and a markdown report, stored in a
folder and as the ``report/`` artifacts of the search's parent run."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from astune.analysis.correlation import loss_metric_correlation
from astune.analysis.delta_sensitivity import delta_sensitivity
from astune.analysis.front import pareto
from astune.analysis.importance import param_importance
from astune.analysis.masked_ratio import masked_ratio
from astune.analysis.p_margin import p_margin
from astune.analysis.study import StudyResult
from astune.store.experiment import ExperimentRuns, load_runs
from astune.store.links import review_lines

logger = logging.getLogger(__name__)

Study = Callable[[ExperimentRuns, Path], StudyResult]
STUDIES: dict[str, Study] = {
    "delta_sensitivity": delta_sensitivity,
    "loss_metric_correlation": loss_metric_correlation,
    "masked_ratio": masked_ratio,
    "p_margin": p_margin,
    "param_importance": param_importance,
    "pareto": pareto,
}
REPORT_FILE = "report.md"
ARTIFACT_PATH = "report"


@dataclass
class Report:
    """A written report: its folder, its markdown file, the studies, where it was logged."""

    experiment: str
    output_dir: Path
    path: Path
    studies: dict[str, StudyResult]
    parent_run_id: str | None
    logged: bool
    log_error: str | None = None

    @property
    def files(self) -> list[Path]:
        """report.md and every figure, in report order."""
        return [self.path, *(s.image for s in self.studies.values() if s.image is not None)]


def default_output_dir(experiment: str) -> Path:
    """``astune-runs/reports/<experiment>`` under the working directory (as the other defaults)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in experiment) or "experiment"
    return Path("astune-runs") / "reports" / safe


def run_study(name: str, runs: ExperimentRuns, out_dir: Path) -> StudyResult:
    """Run one study by name into ``out_dir``.

    Raises:
        ValueError: an unknown study name (listing the known ones).
    """
    if name not in STUDIES:
        raise ValueError(f"unknown study {name!r}; studies: {', '.join(STUDIES)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    return STUDIES[name](runs, out_dir)


def write_report(
    experiment: str,
    *,
    output_dir: str | Path | None = None,
    tracking_uri: str | None = None,
    log_to_parent: bool = True,
) -> Report:
    """Run every study of ``experiment`` and write ``report.md`` with its figures to
    ``output_dir`` (default :func:`default_output_dir`); log the files on the parent run.

    Raises:
        ValueError: one line, for an unknown store or experiment (see ``load_runs``).
    """
    runs = load_runs(experiment, tracking_uri)
    out = Path(output_dir) if output_dir is not None else default_output_dir(experiment)
    studies = {name: run_study(name, runs, out) for name in STUDIES}
    path = out / REPORT_FILE
    path.write_text(render_markdown(runs, studies), encoding="utf-8")
    report = Report(experiment, out, path, studies, runs.parent_run_id, logged=False)
    if log_to_parent:
        _log(runs, report)
    return report


def _log(runs: ExperimentRuns, report: Report) -> None:
    from mlflow.exceptions import MlflowException

    if report.parent_run_id is None:
        report.log_error = "the experiment has no search run (tag astune.role=search)"
        return
    try:
        for file in report.files:
            runs.client.log_artifact(report.parent_run_id, str(file), ARTIFACT_PATH)
        report.logged = True
    except (MlflowException, OSError) as err:  # the local report is written all the same
        report.log_error = str(err).splitlines()[0] if str(err) else type(err).__name__
        logger.warning("report not logged on run %s: %s", report.parent_run_id, report.log_error)


# ----------------------------------------------------------------------------------- markdown
def render_markdown(runs: ExperimentRuns, studies: dict[str, StudyResult]) -> str:
    """The report: a summary of the search, then a section per study."""
    parts = [_header(runs), _trials_table(runs)]
    confirmed = _confirm_table(runs)
    if confirmed:
        parts.append(confirmed)
    parts += [_section(i, study) for i, study in enumerate(studies.values(), start=1)]
    return "\n\n".join(parts) + "\n"


def _header(runs: ExperimentRuns) -> str:
    trials = runs.trials
    datasets = ", ".join(sorted(set(trials["dataset"]))) or "none"
    tasks = ", ".join(sorted(set(trials["task"]))) or "none"
    statuses = ", ".join(f"{n} {s.lower()}" for s, n in trials["status"].value_counts().items())
    parent = f"`{runs.parent_run_id}`" if runs.parent_run_id else "none"
    more = (
        f" ({len(runs.parent_run_ids)} search runs; trials of all)"
        if len(runs.parent_run_ids) > 1
        else ""
    )
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    review = review_lines(runs.tracking_uri, runs.experiment_id)
    runs_view = (
        f"[the search's runs]({review[-1]})"
        if len(review) == 1
        else f"`{review[0]}`, then [the search's runs]({review[-1]})"
    )
    return (
        f"# AS-Softmax analysis of search `{runs.experiment}`\n\n"
        f"- tracking store: `{runs.tracking_uri}`; parent run: {parent}{more}\n"
        f"- dataset: {datasets} (task: {tasks}); objective: the primary validation metric, "
        f"{runs.mode}imised\n"
        f"- trials: {len(trials)} ({statuses or 'none'}); the studies use the finished ones\n"
        f"- in MLflow's UI: {runs_view}\n"
        f"- written {stamp} by `python -m astune report --experiment {runs.experiment}`"
    )


def _trials_table(runs: ExperimentRuns) -> str:
    lines = [
        "## Trials by loss",
        "",
        "| loss | trials | finished | best objective | best trial |",
        "|---|---:|---:|---:|---|",
    ]
    for loss, group in runs.trials.groupby("loss", sort=True):
        done = runs.finished((str(loss),))
        best = f"{done['best_objective'].iloc[0]:.4f}" if len(done) else "-"
        name = f"`{done['name'].iloc[0]}`" if len(done) else "-"
        lines.append(f"| {loss} | {len(group)} | {len(done)} | {best} | {name} |")
    if runs.trials.empty:
        lines.append("| (no trial runs) | 0 | 0 | - | - |")
    return "\n".join(lines)


def _confirm_table(runs: ExperimentRuns) -> str | None:
    """The `astune confirm` table of the newest search run, when a confirm ran."""
    from astune.confirmation.table import markdown, summarize
    from astune.store.confirmed import confirmed_configs
    from astune.store.reader import Store

    if runs.parent_run_id is None:
        return None
    parent = runs.client.get_run(runs.parent_run_id)
    configs = confirmed_configs(Store(runs.tracking_uri), parent)
    if not configs:
        return None
    return (
        "## Confirmed over seeds\n\n"
        "`astune confirm` re-ran these configs with fresh seeds (mean +- 95% t interval; the "
        "difference to the baseline is paired by seed, with the paired t-test's p-value).\n\n"
        + markdown(summarize(configs)).rstrip()
    )


def _section(number: int, study: StudyResult) -> str:
    parts = [f"## {number}. {study.title}"]
    if study.image is not None:
        parts.append(f"![{study.title}]({study.image.name})")
        parts.append(f"*Figure {number}.* {study.caption}")
    else:
        parts.append(f"*No figure.* {study.caption}")
    if study.table:
        parts.append(study.table)
    parts += [f"> **Missing:** {note}" for note in study.notes]
    return "\n\n".join(parts)
