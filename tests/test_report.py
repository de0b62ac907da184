"""`astune report` on a real search: real local Ray, real sqlite MLflow, 1-layer MiniLM on SST-5.

One search (softmax and AS-Softmax, 4 trials) feeds every test; each figure is checked from the
data behind it against values read back from MLflow independently of astune.analysis.
"""

from __future__ import annotations

import dataclasses
import json
import math
import runpy
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from mlflow import MlflowClient
from tiny import tiny_settings

from astune.analysis.p_margin import read_histogram
from astune.analysis.report import STUDIES, render_markdown, run_study, write_report
from astune.cli import main
from astune.store.experiment import load_runs
from astune.tuning.runner import run_search

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
SPACE = Path(__file__).parent / "spaces" / "report.yaml"

EXPERIMENT = "report-sst5"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FIGURES = [f"{name}.png" for name in STUDIES]


@pytest.fixture(scope="module")
def search(tmp_path_factory, data_dir):
    """The search, its tracking URI and the report written from it."""
    root = tmp_path_factory.mktemp("report")
    settings = tiny_settings(
        space=str(SPACE),
        root=root,
        data_dir=data_dir,
        max_eval_samples=64,
        max_length=48,
        num_samples=4,
        max_concurrent=1,  # one actor, reused: its imports cost ~8 CPU-s
        name=EXPERIMENT,
    )
    uri = settings.tracking_uri
    summary = run_search(settings)
    client = MlflowClient(uri)
    _ensure_p_margin(client)
    report = write_report(EXPERIMENT, output_dir=root / "out", tracking_uri=uri)
    return {"uri": uri, "root": root, "client": client, "summary": summary, "report": report}


def _ensure_p_margin(client: MlflowClient) -> None:
    """Trials log p_margin.json at their end; a build without that yet gets a stand-in."""
    rng = np.random.default_rng(0)
    for run in trial_runs(client):
        if "p_margin.json" not in [a.path for a in client.list_artifacts(run.info.run_id)]:
            counts, edges = np.histogram(np.clip(rng.normal(0.2, 0.4, 64), -1, 1), 40, (-1, 1))
            client.log_dict(
                run.info.run_id,
                {"edges": edges.tolist(), "counts": counts.tolist()},
                "p_margin.json",
            )


# ------------------------------------------------------------------- independent MLflow reads
def trial_runs(client: MlflowClient, loss: str | None = None) -> list:
    exp = client.get_experiment_by_name(EXPERIMENT)
    found = client.search_runs(
        [exp.experiment_id],
        "tags.`astune.role` = 'trial' and attributes.status = 'FINISHED'",
        max_results=100,
    )
    found = sorted(found, key=lambda r: (r.info.start_time, r.info.run_id))  # as they started
    return [r for r in found if loss is None or r.data.params["loss"] == loss]


def evaluations(client: MlflowClient, run_id: str, key: str) -> list[float]:
    """Values of ``key`` at steps 0..n-1, n = the evaluations (``masked_ratio`` is logged at
    evaluations only; the trial's last report may reuse step 0)."""
    n = len(client.get_metric_history(run_id, "masked_ratio"))
    history = sorted(client.get_metric_history(run_id, key), key=lambda m: (m.step, m.timestamp))
    first = {}
    for m in history:
        first.setdefault(m.step, m.value)  # the evaluation's entry comes before the last report's
    return [first[step] for step in range(n)]


def best_objective(client: MlflowClient, run_id: str) -> float:
    return max(m.value for m in client.get_metric_history(run_id, "objective"))


def numpy_r(x, y) -> float:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(np.corrcoef(np.asarray(x, float), np.asarray(y, float))[0, 1])


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


# ----------------------------------------------------------------------------------- tests
def test_the_search_has_both_losses(search):
    client = search["client"]
    assert len(trial_runs(client, "as_softmax")) >= 2
    assert len(trial_runs(client, "softmax")) >= 1


def test_report_writes_valid_pngs_and_markdown(search):
    out = search["root"] / "out"
    assert sorted(p.name for p in out.iterdir()) == sorted(["report.md", *FIGURES])
    for name in FIGURES:
        data = (out / name).read_bytes()
        assert data[:8] == PNG_SIGNATURE, name
        assert len(data) > 5 * 1024, name


def test_report_md_links_every_figure_relatively(search):
    text = (search["root"] / "out" / "report.md").read_text()
    for name in FIGURES:
        assert f"]({name})" in text
    assert text.count("![") == len(FIGURES)
    assert "| as_softmax |" in text and "| softmax |" in text
    assert "Missing" not in text


def test_report_md_links_the_runs_view_of_the_search(search):
    """MLflow 3 opens an experiment on its traces page unless the URL names the runs view."""
    text = (search["root"] / "out" / "report.md").read_text()
    experiment_id = search["client"].get_experiment_by_name(EXPERIMENT).experiment_id
    assert f"(http://127.0.0.1:5000/#/experiments/{experiment_id}/runs)" in text
    assert f"`mlflow ui --backend-store-uri {search['uri']}`" in text


def test_delta_points_are_the_finished_as_softmax_trials(search):
    data = search["report"].studies["delta_sensitivity"].data
    client = search["client"]
    as_runs = trial_runs(client, "as_softmax")
    assert list(data["points"]) == ["sst5"]
    points = data["points"]["sst5"]
    assert len(points) == len(as_runs)
    expected = sorted(
        (float(r.data.params["delta"]), best_objective(client, r.info.run_id)) for r in as_runs
    )
    np.testing.assert_allclose(sorted(points), expected)
    assert len(data["means"]["sst5"]) == len({d for d, _ in expected})


def test_softmax_baseline_is_the_best_softmax_objective(search):
    client = search["client"]
    best = max(best_objective(client, r.info.run_id) for r in trial_runs(client, "softmax"))
    assert search["report"].studies["delta_sensitivity"].data["baseline"] == {
        "sst5": pytest.approx(best)
    }


def test_correlation_per_trial_equals_numpy_corrcoef(search):
    client = search["client"]
    per_trial = search["report"].studies["loss_metric_correlation"].data["per_trial"]
    assert set(per_trial) == {r.data.params["loss"] for r in trial_runs(client)}
    for loss, rs in per_trial.items():
        runs = trial_runs(client, loss)
        assert set(rs) == {r.info.run_id for r in runs}
        for run in runs:
            rid = run.info.run_id
            expected = numpy_r(
                evaluations(client, rid, "val_loss"), evaluations(client, rid, "objective")
            )
            assert same(rs[rid], expected), (loss, rid, rs[rid], expected)


def test_correlation_table_one_row_per_loss_mean_and_pooled(search):
    client = search["client"]
    study = search["report"].studies["loss_metric_correlation"]
    table = study.data["table"]
    assert sorted(table["loss"]) == sorted({r.data.params["loss"] for r in trial_runs(client)})
    for row in table.itertuples():
        runs = trial_runs(client, row.loss)
        xs = [evaluations(client, r.info.run_id, "val_loss") for r in runs]
        ys = [evaluations(client, r.info.run_id, "objective") for r in runs]
        rs = [numpy_r(x, y) for x, y in zip(xs, ys)]
        defined = [r for r in rs if not math.isnan(r)]
        assert row.trials == len(runs) and row.trials_with_r == len(defined)
        assert row.evaluations == sum(len(x) for x in xs)
        assert same(row.r_mean, float(np.mean(defined)) if defined else float("nan"))
        assert same(row.r_pooled, numpy_r(np.concatenate(xs), np.concatenate(ys)))
        for value in (row.r_mean, row.r_pooled):
            assert math.isnan(value) or -1.0 <= value <= 1.0
            shown = "nan" if math.isnan(value) else f"{value:+.3f}"
            assert f" {shown} |" in study.table


def test_masked_ratio_one_line_per_as_trial_one_point_per_evaluation(search):
    client = search["client"]
    data = search["report"].studies["masked_ratio"].data
    as_runs = {r.info.run_id: r for r in trial_runs(client, "as_softmax")}
    assert set(data["series"]) == set(as_runs)
    for rid, points in data["series"].items():
        ratios = evaluations(client, rid, "masked_ratio")
        assert [y for _, y in points] == pytest.approx(ratios)
        assert [x for x, _ in points] == pytest.approx(evaluations(client, rid, "samples_seen"))
    best = max(best_objective(client, rid) for rid in as_runs)
    assert best_objective(client, data["best"]) == best
    skipping = {rid for rid, r in as_runs.items() if r.data.params.get("as_skip") == "True"}
    assert skipping and set(data["skipped"]) == skipping  # the seed point runs AS-Skip
    for rid in skipping:
        skipped = evaluations(client, rid, "skipped_ratio")
        assert [y for _, y in data["skipped"][rid]] == pytest.approx(skipped)
        assert all(0.0 <= y <= 1.0 for y in skipped)


def test_p_margin_histograms_are_normalised_best_trials(search):
    client = search["client"]
    histograms = search["report"].studies["p_margin"].data["histograms"]
    assert set(histograms) == {"softmax", "AS-Softmax"}
    for family, loss in (("softmax", "softmax"), ("AS-Softmax", "as_softmax")):
        h = histograms[family]
        assert sum(h["fraction"]) == pytest.approx(1.0)
        best = max(best_objective(client, r.info.run_id) for r in trial_runs(client, loss))
        assert best_objective(client, h["run_id"]) == best
        with tempfile.TemporaryDirectory() as folder:
            raw = json.loads(
                Path(client.download_artifacts(h["run_id"], "p_margin.json", folder)).read_text()
            )
        assert h["edges"] == pytest.approx(raw["edges"]) and len(h["edges"]) == 41
        assert h["fraction"] == pytest.approx(np.asarray(raw["counts"]) / sum(raw["counts"]))


def test_report_is_logged_on_the_parent_run(search):
    client = search["client"]
    parent = search["summary"].parent_run_id
    assert search["report"].logged and search["report"].parent_run_id == parent
    logged = {Path(a.path).name for a in client.list_artifacts(parent, "report")}
    assert logged == {"report.md", *FIGURES}


def test_missing_softmax_is_said_in_the_report(search, tmp_path):
    runs = load_runs(EXPERIMENT, search["uri"])
    no_softmax = dataclasses.replace(runs, trials=runs.trials[runs.trials["loss"] != "softmax"])
    studies = {name: run_study(name, no_softmax, tmp_path) for name in STUDIES}
    text = render_markdown(no_softmax, studies)
    assert "no softmax trial in this search: run with --losses softmax,as_softmax" in text
    assert studies["delta_sensitivity"].data["baseline"] == {}
    assert studies["delta_sensitivity"].image is not None  # the AS-Softmax points are drawn still
    assert set(studies["p_margin"].data["histograms"]) == {"AS-Softmax"}


def test_an_experiment_without_trials_gets_a_report_of_notes(search, tmp_path):
    client = search["client"]
    exp = client.create_experiment("empty-search", artifact_location=(tmp_path / "art").as_uri())
    parent = client.create_run(exp, tags={"astune.role": "search"}).info.run_id
    report = write_report("empty-search", output_dir=tmp_path / "out", tracking_uri=search["uri"])
    text = report.path.read_text()
    assert [s.image for s in report.studies.values()] == [None] * len(STUDIES)
    assert text.count("> **Missing:**") >= len(STUDIES)
    assert report.logged and report.parent_run_id == parent


def test_cli_report_and_unknown_experiment(search, tmp_path, capsys):
    out = tmp_path / "cli"
    assert (
        main(
            [
                "report",
                "--experiment",
                EXPERIMENT,
                "--tracking-uri",
                search["uri"],
                "--output-dir",
                str(out),
            ]
        )
        == 0
    )
    assert f"report: {out / 'report.md'}" in capsys.readouterr().out
    assert (out / "report.md").is_file() and len(list(out.glob("*.png"))) == len(FIGURES)

    assert main(["report", "--experiment", "nope", "--tracking-uri", search["uri"]]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "no experiment 'nope'" in err and EXPERIMENT in err


@pytest.mark.parametrize("script", [*STUDIES, "report"])
def test_analysis_scripts_run_their_study(search, tmp_path, monkeypatch, capsys, script):
    argv = [
        f"{script}.py",
        "--experiment",
        EXPERIMENT,
        "--tracking-uri",
        search["uri"],
        "--output-dir",
        str(tmp_path),
    ]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(REPO / "analysis" / f"{script}.py"), run_name="__main__")
    assert exit_.value.code == 0, capsys.readouterr().err
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == (sorted(["report.md", *FIGURES]) if script == "report" else [f"{script}.png"])


@pytest.mark.parametrize(
    "payload",
    [
        [1, 2],
        {"edges": [-1, 0, 1]},
        {"edges": [-1, 0, 1], "counts": [1]},
        {"edges": [-1, 1, 0], "counts": [1, 2]},
        {"edges": [-1, 0, 1], "counts": [1, -2]},
        {"edges": [-1, 0, 1], "counts": [0, 0]},
        {"edges": [-1, 0, 1], "counts": [None, "a"]},
    ],
)
def test_a_malformed_p_margin_artifact_is_refused(payload):
    with pytest.raises(ValueError):
        read_histogram(payload)
    edges, counts = read_histogram({"edges": [-1, 0, 1], "counts": [3, 1]})
    assert edges.tolist() == [-1, 0, 1] and counts.tolist() == [3, 1]


# ------------------------------------------------------------------- parameter importances
def _reference_importances(
    runs: list, client: MlflowClient, cost: str | None = None
) -> dict[str, float]:
    """Optuna's fANOVA (seed 0) on the params every run has and that take several values, of
    the best objective (maximised) or of the run's ``cost`` (minimised)."""
    import optuna

    skipped = {"seed", "dataset", "data_dir", "backbone", "device", "output_dir", "precision"}
    common = set.intersection(*(set(r.data.params) for r in runs)) - skipped
    common = {k for k in common if all(r.data.params[k] != "None" for r in runs)}
    varied = sorted(k for k in common if len({r.data.params[k] for r in runs}) > 1)
    distributions = {}
    for key in varied:
        texts = sorted({r.data.params[key] for r in runs})
        try:
            numbers = [float(t) for t in texts]
        except ValueError:
            distributions[key] = optuna.distributions.CategoricalDistribution(texts)
            continue
        log = min(numbers) > 0 and max(numbers) / min(numbers) >= 10
        distributions[key] = optuna.distributions.FloatDistribution(
            min(numbers), max(numbers), log=log
        )
    study = optuna.create_study(direction="minimize" if cost else "maximize")
    for run in runs:
        params = {
            k: run.data.params[k]
            if isinstance(d, optuna.distributions.CategoricalDistribution)
            else float(run.data.params[k])
            for k, d in distributions.items()
        }
        value = run.data.metrics[cost] if cost else best_objective(client, run.info.run_id)
        study.add_trial(
            optuna.trial.create_trial(params=params, distributions=distributions, value=value)
        )
    evaluator = optuna.importance.FanovaImportanceEvaluator(seed=0)
    return optuna.importance.get_param_importances(study, evaluator=evaluator)


def test_param_importances_equal_optunas_fanova_on_the_logged_trials(search):
    study = search["report"].studies["param_importance"]
    client = search["client"]
    groups = {
        "all trials": trial_runs(client),
        "AS-Softmax trials": trial_runs(client, "as_softmax"),
    }
    assert study.data, study.notes  # the search's objectives differ: something is explained
    for name, importances in study.data.items():
        expected = _reference_importances(groups[name], client)
        assert list(importances) == list(expected)
        assert list(importances.values()) == pytest.approx(list(expected.values()), abs=1e-9)
        assert sum(importances.values()) == pytest.approx(1.0)
    assert "Parameter importances (Optuna fANOVA)" in search["report"].path.read_text()
    assert (search["report"].output_dir / "param_importance.png").read_bytes()[:8] == PNG_SIGNATURE


def test_the_report_draws_the_front_and_the_importances_of_each_objective(search):
    study = search["report"].studies["pareto"]
    client = search["client"]
    runs = trial_runs(client)
    values = {
        r.data.tags["astune.trial_id"]: (
            best_objective(client, r.info.run_id),
            r.data.metrics["train_seconds"],
        )
        for r in runs
    }
    front = {  # no other trial as good on both and better on one
        t
        for t, (score, cost) in values.items()
        if not any(s >= score and c <= cost and (s > score or c < cost) for s, c in values.values())
    }
    assert {trial for trial, _ in study.data["front"]} == front
    expected = {
        "objective": _reference_importances(runs, client),
        "train_seconds": _reference_importances(runs, client, cost="train_seconds"),
    }
    assert set(study.data["importance"]) == set(expected)
    for name, importances in study.data["importance"].items():
        assert list(importances) == list(expected[name]), name
        assert list(importances.values()) == pytest.approx(list(expected[name].values()), abs=1e-9)
    text = search["report"].path.read_text()
    assert "Pareto front and importances per objective" in text
    assert all(f"| {trial} |" in text for trial in front)
