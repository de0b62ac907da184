"""Chinese spelling check end to end (issue 23): the metric on candidate ids, the head started
from the backbone's embeddings of the candidates, a training run on a synthetic
spelling-correction set (astune/data/synthetic_csc.py) that learns to correct, and a two-trial
search of it with the paper's SIGHAN2015 space, `correction_f1` its objective."""

from __future__ import annotations

import pytest
from mlflow_searches import tiny_searches

from astune.backbones import build_model, init_head_from_embeddings, load_tokenizer
from astune.data.synthetic_csc import synthetic_csc
from astune.metrics import compute_metrics
from astune.metrics.csc import CSC_METRICS, csc_scores

LETTERS = "abcdefghijklmnopqrstuvwxyz"


@pytest.fixture(scope="module")
def csc_folder(tmp_path_factory, data_dir):
    return synthetic_csc(tmp_path_factory.mktemp("csc") / "letters", data_dir / "sst5")


def reference(predictions, golds, sources):
    """A cut word (-1) is kept; a character whose gold is -100 is left out."""
    kept = []
    for pred, gold, source in zip(predictions, golds, sources):
        pred = [s if p == -1 else p for p, s in zip(pred, source)]
        keep = [i for i, g in enumerate(gold) if g != -100]
        kept.append(([source[i] for i in keep], [gold[i] for i in keep], [pred[i] for i in keep]))
    return csc_scores(*zip(*kept))


def test_the_metric_reads_candidate_ids_keeps_cut_words_and_leaves_out_unknown_corrections():
    sources = [[0, 1, 2, 3], [4, 5, 6], [0, -1, 2], [1, 1]]  # -1: input not a candidate
    golds = [[0, 1, 7, 3], [4, 5, 6], [0, 3, -100], [1, 1]]  # -100: correction not a candidate
    preds = [[0, 1, 7, -1], [4, 8, 6], [0, 3, 5], [1, 1]]  # -1: cut by truncation
    got = compute_metrics("token", preds, golds, label_names=LETTERS, sources=sources)
    assert set(got) == {*CSC_METRICS, "accuracy"}
    expected = reference(preds, golds, sources)
    assert {k: got[k] for k in CSC_METRICS} == pytest.approx(expected)
    # by hand: 2 sentences with errors (0, 2), both fixed; sentence 1 over-corrected
    assert got["correction_precision"] == pytest.approx(2 / 3)
    assert got["correction_recall"] == 1.0 and got["accuracy"] == pytest.approx(10 / 11)


def test_the_head_starts_from_the_embeddings_of_the_candidates():
    candidates = [*"etaoin", "龘"]  # the last is not in MiniLM's vocabulary
    model = build_model("minilm", task="token", num_labels=len(candidates), num_layers=1)
    copied, fresh = init_head_from_embeddings(model, backbone="minilm", candidates=candidates)
    assert (copied, fresh) == (6, 1)
    ids = load_tokenizer("minilm").convert_tokens_to_ids(candidates[:6])
    embeddings = model.get_input_embeddings().weight
    assert (model.classifier.weight[:6] == embeddings[ids]).all()
    assert not (model.classifier.weight[6] == embeddings[ids[0]]).all()
    assert (model.classifier.bias == 0).all()


@pytest.mark.slow
def test_a_run_on_synthetic_misspellings_learns_to_correct(csc_folder, tmp_path):
    from astune.config import TrainConfig
    from astune.training import fit

    records = []
    config = TrainConfig(
        dataset=str(csc_folder), backbone="minilm", num_layers=1, max_length=34, epochs=3,
        batch_size=16, lr=2e-3, eval_every=4, loss="as_softmax", delta=0.3, device="cpu",
        output_dir=str(tmp_path / "run"),
    ).validate()  # fmt: skip
    final = fit(config, callback=lambda record, _: records.append(dict(record)))
    assert all(r["objective"] == r["val_correction_f1"] for r in records)
    assert {f"val_{m}" for m in CSC_METRICS} <= set(records[-1]) and "test_correction_f1" in final
    # It starts by copying its input (few edits, little corrected) and learns to fix the
    # look-alikes (synthetic_csc.LOOK_ALIKES, swapped at a 15% rate): here 0.08 at the first
    # evaluation, 0.42 after 3 epochs.
    first, best = records[0], max(r["val_char_correction_f1"] for r in records)
    assert first["val_char_correction_f1"] < 0.1 and best > 0.15


@pytest.mark.ray
@pytest.mark.slow
def test_a_search_of_the_sighan2015_space_logs_correction_f1(tmp_path_factory, data_dir):
    from mlflow import MlflowClient

    csc = tiny_searches(tmp_path_factory, data_dir).csc  # run beside the other shared searches
    assert csc.summary.trial_states == {"TERMINATED": 2}
    client = MlflowClient(csc.tracking_uri)
    experiment = client.get_experiment_by_name("csc")
    trials = client.search_runs(
        [experiment.experiment_id], "tags.`astune.role` = 'trial'", max_results=10
    )
    assert len(trials) == 2  # search_spaces/sighan2015.yaml's two AS-Softmax seed points
    assert sorted(run.data.params["as_speed"] for run in trials) == ["False", "True"]
    for run in trials:
        metrics = run.data.metrics
        assert metrics["objective"] == metrics["val_correction_f1"]
        assert 0.0 <= metrics["val_correction_f1"] <= 1.0 and "test_correction_f1" in metrics
        assert run.data.tags["astune.task"] == "token"
