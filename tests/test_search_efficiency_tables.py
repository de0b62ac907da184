"""The search-efficiency tables (issue 44 item 3): each dataset's grid and epochs, the
recorder's resume and parts, a grid change refused until pruned, a table the grid outgrew; and
the packaged prior, built from the tables at their pinned digests."""

from __future__ import annotations

import json

import pytest
from synthetic_tables import synthetic_rows

from astune.history.reference import PRIOR_FILE, write_reference
from benchmarks.search_efficiency import arms, lineup, prior, settings, tables
from benchmarks.search_efficiency import record as recorder


def test_a_dataset_may_name_its_own_epochs():
    """CLINC150's grid runs to 8 epochs, the others' to 4: every arm searches the dataset's
    epochs, starts at its most, and ASHA's ``max_t`` is that most (the whole grid's, even where
    a warm space narrows the epochs)."""
    assert settings.epochs_of("clinc_oos") == (1, 2, 4, 8)
    assert settings.epochs_of("sst5") == settings.EPOCHS == (1, 2, 4)
    clinc = settings.grid("clinc_oos")
    assert len(clinc) == len(settings.grid("sst5")) * 4 // 3
    assert {c["epochs"] for c in clinc} == {1, 2, 4, 8}
    for dataset, most in (("clinc_oos", 8), ("sst5", 4)):
        for name in arms.ARMS:
            arm = lineup.build_arm(name, dataset)
            assert arm.values["epochs"] == settings.epochs_of(dataset)
            assert arm.max_epochs == most
            assert {p["epochs"] for p in arm.seed_points} == {most}


@pytest.mark.slow
def test_recorder_resumes(tmp_path, monkeypatch):
    """A real recording of 1, then 2 configs x 1 epoch on 32 SST-5 rows (1-layer MiniLM): the
    second piece records only the new config, and keeps it though Ctrl-C stops the piece right
    after it; the digest counts both runs."""
    monkeypatch.setitem(
        settings.DATASETS, "sst5", settings.DatasetSlice("sst5", 32, 16, num_layers=1)
    )
    configs = [
        {"loss": "softmax", "lr": 1e-4, "batch_size": 16, "epochs": 1, "lr_warmup_ratio": 0.0},
        {
            "loss": "as_softmax",
            "lr": 1e-4,
            "batch_size": 16,
            "epochs": 1,
            "delta": 0.3,
            "warmup_ratio": 0.0,
        },
    ]
    logged: list[str] = []
    kwargs = {"hours": 1.0, "root": tmp_path, "seeds": (0,), "log": logged.append}

    def interrupted_after_a_run(line: str) -> None:
        logged.append(line)
        if line.startswith("[1/"):
            raise KeyboardInterrupt

    assert recorder.record("sst5", configs=configs[:1], **kwargs) == 1
    with pytest.raises(KeyboardInterrupt):
        recorder.record("sst5", configs=configs, **{**kwargs, "log": interrupted_after_a_run})
    assert recorder.record("sst5", configs=configs, **kwargs) == 0
    folder = tables.table_dir("sst5", tmp_path)
    frame = tables.read_table(folder)
    assert sorted(frame["key"]) == sorted(settings.config_key(c) for c in configs)
    assert (frame["elapsed_seconds"] <= frame["trial_seconds"]).all()
    digest = tables.write_digest(folder)
    assert digest["runs"] == 2 and len(digest["shards"]) == 2


def test_parts_share_the_runs_without_overlap(tmp_path):
    every = recorder.pending_runs("sst5", tmp_path)
    halves = [recorder.pending_runs("sst5", tmp_path, part=(i, 2)) for i in (0, 1)]
    keys = [{(settings.config_key(c), s) for c, s in half} for half in halves]
    assert not keys[0] & keys[1]
    assert keys[0] | keys[1] == {(settings.config_key(c), s) for c, s in every}
    assert len(every) == len(settings.grid("sst5")) * len(settings.SEEDS)
    with pytest.raises(SystemExit, match="--part must be I/N"):
        recorder.parse_part("2/2")


def test_a_grid_change_is_refused_until_pruned_and_pieces_take_chosen_losses(tmp_path):
    """Runs of a config the grid dropped (the old AS-Speed variant) make the table refused in
    one line naming ``prune``; ``prune`` drops exactly them and keeps the rest; ``--losses``
    records only the losses named."""
    folder = tables.table_dir("sst5", tmp_path)
    kept = settings.grid("sst5")[:3]
    old = {"loss": "as_speed", "lr": 1e-4, "batch_size": 16, "epochs": 1, "delta": 0.3}
    stray = [{**row, "key": row["key"].replace("as_softmax", "as_speed"), "loss": "as_speed"}
             for row in synthetic_rows([{**old, "loss": "as_softmax"}])]  # fmt: skip
    tables.write_shard(folder, synthetic_rows(kept) + stray)
    with pytest.raises(SystemExit, match="1 configs outside the grid.*prune --dataset sst5"):
        tables.grid_table("sst5", tmp_path)
    assert tables.prune("sst5", tmp_path, log=lambda _: None) == len(settings.SEEDS)
    table = tables.grid_table("sst5", tmp_path)
    assert set(table["key"]) == {settings.config_key(c) for c in kept}
    assert len(list(folder.glob("part-*.parquet"))) == 1
    assert json.loads((folder / tables.DIGEST_FILE).read_text())["runs"] == 3 * len(settings.SEEDS)
    softmax = recorder.grid_of_losses("sst5", "softmax")
    assert softmax and {c["loss"] for c in softmax} == {"softmax"}
    with pytest.raises(SystemExit, match="--losses must name grid losses.*got 'as_speed'"):
        recorder.grid_of_losses("sst5", "as_speed")


def test_a_replay_refuses_a_table_the_grid_outgrew(tmp_path):
    """A table that lacks runs of its grid (CLINC150's before its 8-epoch runs) is refused by
    the replay in one line naming how many runs are missing; the reference (refresh_reference)
    still reads it whole, leaving out the configs short of seeds. Two shards written within
    one second both stay."""
    folder = tables.table_dir("clinc_oos", tmp_path)
    four = [c for c in settings.grid("clinc_oos") if c["epochs"] <= 4]
    tables.write_shard(folder, synthetic_rows(four))
    missing = (len(settings.grid("clinc_oos")) - len(four)) * len(settings.SEEDS)
    assert missing == 288
    with pytest.raises(SystemExit, match=f"lacks {missing} of its grid's 1152 runs.*epochs=8"):
        tables.complete_table("clinc_oos", tmp_path)
    assert len(tables.grid_table("clinc_oos", tmp_path)) == len(synthetic_rows(four))
    tables.write_shard(
        folder, synthetic_rows([c for c in settings.grid("clinc_oos") if c not in four])
    )
    assert tables.runs_of(tables.complete_table("clinc_oos", tmp_path)) == {
        (settings.config_key(c), s) for c in settings.grid("clinc_oos") for s in settings.SEEDS
    }


def test_the_fast_levers_are_grouped_by_length_and_keyed_apart():
    """A fast lever's grid config trains AS-Softmax with AS-Skip (the soft policy: InfoBatch's
    pruning too) and grouped micro-batches; its key names the window, so an ungrouped run is
    another config."""
    levers = [c for c in settings.grid("sst5") if c["loss"] in settings.FAST_LEVERS]
    assert {c["loss"] for c in levers} == set(settings.FAST_LEVERS)
    for config in levers:
        fields = settings.train_fields("sst5", config, 0)
        assert fields["loss"] == "as_softmax" and fields["as_skip"] is True
        assert fields.get("skip_policy", "zero") == ("soft" if "soft" in config["loss"] else "zero")
        assert fields["length_window"] == settings.FAST_LENGTH_WINDOW
        assert settings.config_key(config).endswith(f"length_window={settings.FAST_LENGTH_WINDOW}")
    plain = next(c for c in settings.grid("sst5") if c["loss"] == "as_softmax")
    assert "length_window" not in settings.train_fields("sst5", plain, 0)
    assert "length_window" not in settings.config_key(plain)


def test_the_packaged_prior_is_the_one_its_pinned_tables_build(tmp_path):
    """The tables hash to their pins, the packaged prior names those pins, and building it again
    from them gives the packaged file, its date apart: every config, score and rank comes from
    the pinned tables. The probe's difficulty is taken as recorded (each probe is a few seconds
    of training; tests/test_recommend.py measures it)."""
    pins = prior.read_pins()
    assert set(pins) == set(settings.DATASETS)
    for name, digest in pins.items():
        folder = tables.table_dir(name)
        assert tables.table_digest(folder)["sha256"] == digest  # recomputed from the shards
        assert json.loads((folder / tables.DIGEST_FILE).read_text())["sha256"] == digest
    packaged = json.loads(PRIOR_FILE.read_text())
    assert packaged["tables"] == pins
    runs = packaged.get("full_size_runs")
    assert runs == prior.read_full_size_pin()
    entries, about = prior.build_prior(
        list(pins), pins, difficulty=prior.recorded_difficulty(), full_size_runs=runs
    )
    rebuilt = json.loads(write_reference(tmp_path / "prior.json", entries, **about).read_text())
    assert {**rebuilt, "made_on": None} == {**packaged, "made_on": None}


def test_a_table_that_left_its_pin_is_refused():
    with pytest.raises(SystemExit, match="sst5: its table hashes to [0-9a-f]{64}, not to its pin"):
        prior.check_pins(["sst5"], {"sst5": "0" * 64})
    with pytest.raises(SystemExit, match="clinc_oos: its table is not pinned"):
        prior.check_pins(["clinc_oos"], {})


def test_pinning_anew_keeps_an_unchanged_tables_recorded_difficulty(monkeypatch):
    """`prior --pin --full-size` to add full-size runs must not move a table's difficulty: the
    probe is not bit-for-bit the same across machines and thread counts, so a table at the pin
    the packaged prior was built from keeps its recorded difficulty; a table pinned anew is
    probed."""
    probed: list[str] = []

    def probe(name: str) -> tuple[float, str]:
        probed.append(name)
        return 0.5, "single_label"

    monkeypatch.setattr(prior, "difficulty_of", probe)
    of = prior.kept_difficulty({**prior.read_pins(), "sst5": "0" * 64})
    recorded = prior.recorded_difficulty()
    assert of("clinc_oos") == recorded("clinc_oos") and of("go_emotions") == recorded("go_emotions")
    assert probed == []
    assert of("sst5") == (0.5, "single_label") and probed == ["sst5"]
