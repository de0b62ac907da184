"""The training loop's checkpoints: which evaluations write one, the best weights kept apart,
resuming from them, and loading them without unpickling code (1-layer MiniLM, SST-5 slice)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from test_optimizer_rows import reference_rows
from training_runs import EVERY_EVALUATION, LOOP_BASE, Interrupt, read_metrics, sst5_slice
from training_runs import loop_config as config

from astune.config import TrainConfig
from astune.training import Run, fit
from astune.training import state as ckpt
from astune.training.optimizer_rows import PACKED_ROWS

# one softmax epoch with an evaluation and a checkpoint every other optimizer step
EVERY_OTHER_STEP = dict(
    dataset="sst5", epochs=1, lr=1e-3, batch_size=16, loss="softmax", eval_every=2,
    **EVERY_EVALUATION,
)  # fmt: skip


@pytest.fixture(scope="module")
def sst5(data_dir):
    # 100 evaluation sentences: these tests check what is written and resumed, not what is learnt
    return sst5_slice(LOOP_BASE, data_dir, n_train=320, n_eval=100)


def best_so_far(records: list[dict]) -> list[int]:
    """The best evaluation after each record (the first of equal objectives), recomputed."""
    best, out = None, []
    for r in records:
        if best is None or r["objective"] > best[0]:
            best = (r["objective"], r["evaluation"])
        out.append(best[1])
    return out


@dataclass
class Written:
    """The module's one uninterrupted :data:`EVERY_OTHER_STEP` run, its best weights kept in
    ``apart`` as a search keeps them (outside the run folder), and the best weights each of its
    checkpoints named. Tests read it; only the first loads other weights into ``run.model``."""

    config: TrainConfig
    run: Run
    final: dict
    records: list[dict]
    named: list[str]
    store: ckpt.BestWeights
    apart: Path


@pytest.fixture(scope="module")
def written(tmp_path_factory, data_dir, sst5) -> Written:
    root = tmp_path_factory.mktemp("every-other-step")
    cfg = config(root, "best", data_dir, **EVERY_OTHER_STEP)
    store = ckpt.BestWeights.local(root / "apart")
    named: list[str] = []

    def watch(record, folder):
        named.append(ckpt.read_checkpoint(folder)["best_weights"])

    run = Run(cfg, data=sst5, best_weights=store)
    final = run.train(watch)
    return Written(cfg, run, final, read_metrics(cfg), named, store, root / "apart")


@pytest.mark.slow
def test_checkpoints_store_each_best_once_and_the_test_split_uses_it(written):
    cfg, run, final, records, named = (
        written.config, written.run, written.final, written.records, written.named
    )  # fmt: skip
    store = written.store
    bests = best_so_far(records)
    expected = [
        ckpt.BEST_IS_CURRENT if b == r["evaluation"] else f"best_model_e{b}.pt"
        for r, b in zip(records, bests)
    ]
    assert named == expected
    assert ckpt.BEST_IS_CURRENT in named and any(n != ckpt.BEST_IS_CURRENT for n in named)
    # each best that outlived its evaluation was written once, however many checkpoints named it
    assert store.written == list(dict.fromkeys(n for n in named if n != ckpt.BEST_IS_CURRENT))
    left = sorted(p.name for p in written.apart.iterdir())  # those the kept ones name
    assert left == sorted(set(named[-ckpt.KEPT_CHECKPOINTS :]) - {ckpt.BEST_IS_CURRENT})
    assert sorted(p.name for p in Path(cfg.output_dir, "checkpoint").iterdir()) == [ckpt.STATE_FILE]
    assert final["best_evaluation"] == bests[-1] and final["checkpoints"] == len(records)

    state = ckpt.read_checkpoint(Path(cfg.output_dir, "checkpoint"))
    run.model.load_state_dict(ckpt.best_weights_of(state, store, written.apart))
    test_metrics, _, _ = run.evaluate("test")
    assert final["test_accuracy"] == test_metrics["accuracy"]


@pytest.mark.slow
def test_a_resume_whose_best_is_stored_apart_ends_as_an_uninterrupted_run(
    tmp_path, data_dir, sst5, written
):
    expected, records = written.final, written.records  # the same config, uninterrupted
    bests = best_so_far(records)
    stop_at = next(r["evaluation"] for r, b in zip(records, bests) if b != r["evaluation"])

    broken = config(tmp_path, "broken", data_dir, **EVERY_OTHER_STEP)
    store = ckpt.BestWeights.local(tmp_path / "apart")

    def stop(record, folder):
        if record["evaluation"] == stop_at:
            raise Interrupt

    with pytest.raises(Interrupt):
        fit(broken, data=sst5, callback=stop, best_weights=store)
    assert store.written == [f"best_model_e{bests[stop_at]}.pt"]
    resumed = fit(
        broken,
        data=sst5,
        resume_from=Path(broken.output_dir) / "checkpoint",
        best_weights=ckpt.BestWeights.local(tmp_path / "apart"),
    )
    for key in ("val_accuracy", "test_accuracy", "test_loss", "best_evaluation"):
        assert resumed[key] == expected[key], key


@pytest.mark.slow
@pytest.mark.parametrize("every", ["end", "10m"])
def test_the_checkpoint_policy_decides_which_evaluations_write_one(tmp_path, data_dir, sst5, every):
    cfg = config(
        tmp_path,
        every,
        data_dir,
        dataset="sst5",
        epochs=1,
        eval_every=5,  # of the epoch's 10 optimizer steps: two evaluations
        lr=1e-3,
        batch_size=32,
        loss="softmax",
        checkpoint_every=every,
    )
    folders = []
    final = fit(cfg, data=sst5, callback=lambda record, folder: folders.append(folder))
    assert len(folders) == 2
    if every == "end":  # one checkpoint, with the last evaluation: the run's trained state
        assert folders[0] is None and folders[1] == Path(cfg.output_dir, "checkpoint")
        assert ckpt.read_checkpoint(folders[1])["position"]["samples"] == 320  # the epoch
        written = sum(p.stat().st_size for p in folders[1].iterdir())  # state (+ best weights)
        assert (final["checkpoints"], final["checkpoint_bytes"]) == (1, written)
    else:  # a run shorter than the interval writes none; the test split still uses its best
        assert folders == [None, None]
        assert not Path(cfg.output_dir, "checkpoint").exists()
        assert (final["checkpoints"], final["checkpoint_bytes"]) == (0, 0)
    records = read_metrics(cfg)  # the best is tracked in memory, checkpoint or not
    assert final["best_evaluation"] == best_so_far(records)[-1]
    assert final["val_accuracy"] == max(r["objective"] for r in records)


def test_checkpoints_load_without_unpickling_code_and_refuse_a_planted_file(tmp_path, written):
    folder = Path(written.config.output_dir, "checkpoint")  # written after its one epoch
    state = torch.load(folder / ckpt.STATE_FILE, weights_only=True)
    assert state["position"]["samples"] == 320 and "numpy" in state["rng"]
    marker = tmp_path / "code-ran"
    planted = tmp_path / "planted"
    planted.mkdir()
    torch.save({"model": Payload(marker)}, planted / ckpt.STATE_FILE)
    with pytest.raises(ValueError, match="refusing to load it"):
        ckpt.read_checkpoint(planted)
    assert not marker.exists()

    # a copy cut short (half the file, or nothing): one line naming the file and its size
    whole = (folder / ckpt.STATE_FILE).read_bytes()
    cut = tmp_path / "cut"
    cut.mkdir()
    with pytest.raises(ckpt.CheckpointUnreadable, match=f"{ckpt.STATE_FILE} is missing"):
        ckpt.read_checkpoint(cut)  # its state file never arrived
    for size in (len(whole) // 2, 0):
        (cut / ckpt.STATE_FILE).write_bytes(whole[:size])
        with pytest.raises(ckpt.CheckpointUnreadable) as caught:
            ckpt.read_checkpoint(cut)
        message = str(caught.value)
        assert message.startswith(f"{cut / ckpt.STATE_FILE} is unreadable ({size} bytes;")
        assert len(message.splitlines()) == 1


def test_a_checkpoint_keeps_the_embedding_moments_of_the_tokens_trained_on_only(
    tmp_path, written, sst5
):
    state = ckpt.read_checkpoint(Path(written.config.output_dir, "checkpoint"))
    table = written.run.model.get_input_embeddings().weight  # (30522, 384)
    batch = sst5.collate("train", torch.arange(320))  # the epoch visited every sentence once
    seen = set(batch["input_ids"].unique().tolist()) - {0}  # padding's row has no gradient
    packed = [
        moments[name]
        for moments in state["optimizer"]["state"].values()
        for name in ("exp_avg", "exp_avg_sq")
        if isinstance(moments[name], dict) and moments[name]["shape"] == list(table.shape)
    ]
    assert len(packed) == 2
    for moment in packed:
        assert set(moment[PACKED_ROWS].tolist()) == seen and len(seen) < table.shape[0] / 10
    elsewhere = dataclasses.replace(written.config, output_dir=str(tmp_path / "resumed"))
    resumed = Run(elsewhere, data=sst5, best_weights=written.store)
    resumed.restore(Path(written.config.output_dir, "checkpoint"))
    dense = resumed.optimizer.state[resumed.model.get_input_embeddings().weight]["exp_avg"]
    assert dense.shape == table.shape and set(reference_rows(dense)) == seen


class Payload:
    """Unpickling this runs code: it creates the file ``marker``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return exec, (f"open({str(self.marker)!r}, 'w').close()",)
