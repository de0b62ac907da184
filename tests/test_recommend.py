"""`astune recommend` on a real MLflow store filled by real short searches on two datasets
(tests/mlflow_searches.py), on an empty store, and on a user's own dataset folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from mlflow_searches import tiny_searches
from stores import new_store

from astune.cli import main
from astune.history.difficulty import DIFFICULTY_TAG, PROBE_TAG
from astune.history.portfolio import PORTFOLIO_SIZE
from astune.recommendation import fit_line, prior_delta, prior_warmup, recommend
from astune.recommendation.report import format_recommendation
from astune.space.space import load_space


@pytest.fixture(scope="module")
def searches(tmp_path_factory, data_dir):
    return tiny_searches(tmp_path_factory, data_dir)


def test_prior_is_the_papers_rule():
    assert prior_delta(0.2) == 0.35 and prior_delta(0.45) == 0.35  # easy
    assert prior_delta(0.75) == pytest.approx(0.30)  # medium: "0.3 works well for most tasks"
    assert prior_delta(1.0) == pytest.approx(0.20)  # hard
    assert 0.30 < prior_delta(0.6) < 0.35 and 0.20 < prior_delta(0.9) < 0.30
    assert prior_warmup(0.3) == 0.2 and prior_warmup(0.525) == pytest.approx(0.1)
    assert prior_warmup(0.6) == 0.0 and prior_warmup(0.9) == 0.0


def test_fit_line_follows_the_history_and_stays_inside_it():
    fit = fit_line([0.2, 0.5, 0.8], [0.36, 0.30, 0.24], [1.0, 1.0, 1.0])
    assert fit.slope == pytest.approx(-0.2) and fit.predict(0.5) == pytest.approx(0.30)
    assert fit.resid_sd == pytest.approx(0.0, abs=1e-9)
    assert fit.predict(2.0) == pytest.approx(0.24) and fit.predict(-1.0) == pytest.approx(0.36)
    thin = fit_line([0.3, 0.9], [0.35, 0.25], [3.0, 1.0])  # two points: a weighted mean
    assert thin.slope == 0.0 and thin.predict(0.9) == pytest.approx(0.325) and thin.resid_sd is None


@pytest.mark.ray
def test_recommend_fits_the_history_of_two_datasets(searches, data_dir):
    # the search to come described as the tiny ones ran (what --warm-start passes)
    tiny = {"backbone": "minilm", "num_layers": 1, "train_size": 64}
    rec = recommend("conll2003", tracking_uri=searches.tracking_uri, data_dir=str(data_dir), **tiny)
    assert 0.0 <= rec.low <= rec.delta <= rec.high <= 1.0 and rec.low < rec.high
    assert 0.0 <= rec.warmup_ratio <= 1.0
    assert sorted(p.experiment for p in rec.points) == ["conll-tiny", "sst5-tiny"]
    assert rec.history_weight == pytest.approx(2 / 5)
    # Blend of the history fit and the paper prior, as the module documents (rounded to 0.01),
    # recomputed here from the measured inputs: two points give the mean of their best deltas
    # weighted n/(n+3) by their AS trial counts; the prior is the paper's piecewise line.
    d = rec.difficulty.value
    weights = [p.n_trials / (p.n_trials + 3) for p in rec.points]
    fit = sum(w * p.delta for w, p in zip(weights, rec.points)) / sum(weights)
    prior = float(np.interp(d, [0.45, 0.75, 1.0], [0.35, 0.30, 0.20]))
    assert rec.delta == pytest.approx(0.4 * fit + 0.6 * prior, abs=0.006)
    assert rec.fit_delta == pytest.approx(fit, abs=5e-4)
    assert rec.prior_delta == pytest.approx(prior, abs=5e-4)
    # Difficulty: the probe and conll-tiny's softmax trial in MLflow.
    assert [e.source for e in rec.difficulty.evidence] == ["probe", "mlflow"]
    assert 0.0 <= rec.difficulty.value <= 1.0 and rec.difficulty.sd > 0
    for word in ("probe", "softmax trial", "conll-tiny", "sst5-tiny", "blended"):
        assert word in rec.rationale, word
    # Measured, not guessed: the paper's easy task measures easier than its hard one.
    by_dataset = {p.dataset: p.difficulty for p in rec.points}
    assert by_dataset["conll2003"] < by_dataset["sst5"]
    # What the store transfers besides delta: every finished trial's search, placed where it
    # ran (the tiny searches: 1-layer MiniLM, 64 rows), the same task first; SST-5's searches
    # (the store's and the packaged prior's), another task family far harder, weigh nothing
    # beside it, and the prior's CoNLL-2003 (2 layers, 500 rows) weighs less.
    weights = dict(rec.transfer.sources)
    own = weights.pop("search 'conll-tiny'")
    assert own > max(weights.values(), default=0.0)
    assert all(w < 0.01 * own for source, w in weights.items() if "sst5" in source)
    conll = [t for t in rec.transfer.trials if t.source == "search 'conll-tiny'"]
    assert {(t.profile.task, t.profile.train_size, t.profile.backbone) for t in conll} == {
        ("token", 64, "minilm")
    }
    assert conll[0].profile.difficulty == pytest.approx(by_dataset["conll2003"])
    assert conll[0].rank == 0.0 and conll[0].config["loss"] in ("as_softmax", "softmax")
    # The portfolio a search would run first (the tiny searches' trials tie: they rank nothing,
    # so it is the prior's; tests/test_portfolio.py reads a store's search into one).
    assert rec.backbone == "minilm" and len(rec.portfolio) == PORTFOLIO_SIZE
    report = format_recommendation(rec)
    assert "portfolio:   the first 4 trials a search runs (minilm):" in report


@pytest.mark.ray
def test_difficulty_is_stored_on_the_search_runs(searches, data_dir):
    from mlflow import MlflowClient

    recommend("sst5", tracking_uri=searches.tracking_uri, data_dir=str(data_dir))
    client = MlflowClient(searches.tracking_uri)
    for summary in searches.summaries.values():
        tags = client.get_run(summary.parent_run_id).data.tags
        assert 0.0 <= float(tags[DIFFICULTY_TAG]) <= 1.0
        assert json.loads(tags[PROBE_TAG])["n_eval"] > 0


@pytest.mark.ray
def test_cli_writes_a_space_moved_toward_the_historys_delta(searches, tmp_path, capsys):
    """SST-5's shipped delta (0.3, range [0.1, 0.5] in 0.05 steps) moves toward history's fit
    by history's weight: the first seed point's delta, and the range toward the
    recommendation's."""
    path = tmp_path / "narrow.yaml"
    argv = ["recommend", "--dataset", "sst5", "--tracking-uri", searches.tracking_uri]
    rc = main([*argv, "--write-space", str(path)])
    out = capsys.readouterr().out
    assert rc == 0 and "rationale:" in out and "difficulty:" in out
    delta = float(re.search(r"^delta:\s+([0-9.]+)", out, re.M).group(1))
    rec = recommend("sst5", tracking_uri=searches.tracking_uri)
    assert rec.delta == delta and 0 < rec.history_weight < 1 and rec.fit_delta is not None
    h, space = rec.history_weight, load_space(path)
    param = space.loss_params["as_softmax"]["delta"]
    first = space.seed_points[len(rec.portfolio)]["delta"]  # the moved delta, after the portfolio
    assert first == pytest.approx(h * rec.fit_delta + (1 - h) * 0.3, abs=0.025)
    assert param.low <= first <= param.high and param.step == 0.05
    assert param.low == pytest.approx(0.1 + h * (rec.low - 0.1), abs=0.05)
    assert param.high == pytest.approx(0.5 + h * (rec.high - 0.5), abs=0.05)


@pytest.mark.ray
def test_search_on_the_written_space_runs_what_recommend_printed(searches, tmp_path, capsys):
    """`recommend --write-space` then `search --space` (its settings from the command line, up
    to the trials): the search's first configs are the portfolio recommend printed, in order."""
    from astune.cli.parser import build_parser
    from astune.tuning.runner import prepare_search
    from astune.tuning.settings import settings_from_args

    path = tmp_path / "space.yaml"
    uri = ["--tracking-uri", searches.tracking_uri, "--backbone", "minilm"]
    assert main(["recommend", "--dataset", "sst5", *uri, "--write-space", str(path)]) == 0
    out = capsys.readouterr().out
    printed = re.findall(r"^  (\d+)\. (.+)$", out, re.M)
    assert printed, out
    assert [int(i) for i, _ in printed] == list(range(1, PORTFOLIO_SIZE + 1))
    argv = ["search", "--dataset", "sst5", "--space", str(path), *uri, "--num-samples", "8"]
    argv += ["--storage-path", str(tmp_path / "ray"), "--name", "after-recommend"]
    prepared = prepare_search(settings_from_args(build_parser().parse_args(argv)))
    listed = [line for line in prepared.notes if re.match(r"^  \d+\. ", line)]
    assert [line.split(". ", 1)[1].rsplit(" (", 1)[0] for line in listed] == [
        text for _, text in printed
    ]
    written = load_space(path).seed_points[: len(printed)]
    assert prepared.space.seed_points[: len(printed)] == written
    # the sizes it was learnt at, beside this search's: one line (recommend's said "tokens
    # unknown" where the search, at its default, says 128)
    scale = [line for line in out.splitlines() if line.startswith("portfolio: learnt on")]
    assert len(scale) == 1 and scale[0] in prepared.notes and "128 tokens" in scale[0], out


def test_empty_store_and_user_folder_fall_back_to_the_paper_prior(tmp_path, data_dir):
    folder = _user_dataset(tmp_path / "my_sentiment", data_dir / "sst5")
    store = tmp_path / "empty" / "mlflow.db"
    rec = recommend(str(folder), tracking_uri=f"sqlite:///{store}")
    assert rec.dataset == "my_sentiment" and rec.points == [] and rec.history_weight == 0.0
    assert [e.source for e in rec.difficulty.evidence] == ["probe"]
    assert rec.delta == pytest.approx(round(prior_delta(rec.difficulty.value), 2))
    assert rec.low < rec.delta < rec.high and rec.high - rec.low <= 0.2
    assert "paper prior alone" in rec.rationale and "my_sentiment" in rec.rationale
    assert not store.exists()  # reading an empty store creates nothing


def test_recommend_carves_validation_from_a_folder_without_one(tmp_path, data_dir, capsys):
    """BANKING77-style data (train + test only): the probe scores a share of train carved out
    by --validation-fraction (default 0.1), here 0.25 of the 600 training rows; the probe
    trains on at most 384 of the rest."""
    folder = _user_dataset(tmp_path / "no_validation", data_dir / "sst5")
    (folder / "validation.jsonl").unlink()
    store = new_store(tmp_path / "store")
    argv = ["recommend", "--dataset", str(folder), "--tracking-uri", store]
    assert main([*argv, "--validation-fraction", "0.25"]) == 0
    out = capsys.readouterr().out
    assert "384 train / 150 validation examples" in out, out


def test_unknown_dataset_is_a_one_line_error(capsys):
    rc = main(
        ["recommend", "--dataset", "no_such_dataset", "--tracking-uri", "sqlite:///unused.db"]
    )
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "'no_such_dataset'" in err and "sst5" in err


def _user_dataset(folder: Path, source: Path) -> Path:
    """A user's folder: binary sentiment from SST5's rows (negative vs positive), JSONL splits
    and a dataset.json, as README "Data" describes."""
    folder.mkdir(parents=True)
    sizes = {"train": 600, "validation": 300, "test": 100}
    for split, size in sizes.items():
        rows = [json.loads(line) for line in (source / f"{split}.jsonl").read_text().splitlines()]
        kept = [{"text": r["text"], "label": int(r["label"] > 2)} for r in rows if r["label"] != 2]
        kept = kept[:size]
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    meta = {
        "task": "single_label",
        "text_column": "text",
        "label_column": "label",
        "label_names": ["negative", "positive"],
    }
    (folder / "dataset.json").write_text(json.dumps(meta))
    return folder


@pytest.mark.ray
def test_a_snapshot_answers_as_the_store_does(searches):
    from astune.store.reader import Store
    from astune.store.snapshot import StoreSnapshot

    store = Store(searches.tracking_uri)
    snapshot = StoreSnapshot(store)

    def ids(runs):
        return [run.info.run_id for run in runs]

    assert ids(snapshot.searches()) == ids(store.searches()) and store.searches()
    assert ids(snapshot.trials()) == ids(store.trials()) and store.trials()
    parent = store.searches()[0]
    own = [parent.info.experiment_id]
    assert ids(snapshot.trials(parent.info.run_id, own)) == ids(store.trials(parent.info.run_id))
    assert ids(snapshot.trials(parent.info.run_id, ["no such id"])) == []
    for dataset in ("sst5", "conll2003"):
        assert ids(snapshot.dataset_trials(dataset)) == ids(store.dataset_trials(dataset))
    assert ids(snapshot.confirm_runs(parent.info.run_id)) == ids(
        store.confirm_runs(parent.info.run_id)
    )
    wanted = ids(store.trials(parent.info.run_id))[:2]
    assert snapshot.runs_by_id(wanted, own[0]).keys() == store.runs_by_id(wanted, own[0]).keys()
    assert snapshot.experiment_name(own[0]) == store.experiment_name(own[0])
    assert sorted(snapshot.experiment_ids()) == sorted(store.experiment_ids())


@pytest.mark.ray
def test_recommend_reads_the_store_once(searches, data_dir, monkeypatch):
    from mlflow import MlflowClient

    calls: dict[str, int] = {}

    def counted(name):
        real = getattr(MlflowClient, name)

        def call(self, *args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return real(self, *args, **kwargs)

        return call

    for name in ("search_runs", "search_experiments", "get_experiment"):
        monkeypatch.setattr(MlflowClient, name, counted(name))
    rec = recommend("sst5", tracking_uri=searches.tracking_uri, data_dir=str(data_dir))
    assert sorted(p.experiment for p in rec.points) == ["conll-tiny", "sst5-tiny"]
    # one page of runs and one of experiments (read through a Store instead, the same call
    # asked for experiments 7 times by id, besides its several reads of runs)
    assert calls == {"search_runs": 1, "search_experiments": 1}
