"""Registry entries read from the hub: real ``datasets.load_dataset`` calls on snapshots written
in the hub's layouts by tests/hub_mirror.py (a repository of parquet files with README configs;
the parquet export of a script repository, one folder per config and split) and found through
``$ASTUNE_HUB_MIRROR``; their label ids checked against the copies in ``../shared/data``. And
the entries that are local-only."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest
from hub_mirror import label_names, shared_rows, write_clinc, write_conll

from astune.data import load_dataset_splits
from astune.data.errors import DataError
from astune.data.hub import HUB_MIRROR_ENV, hub_load_call, map_labels_by_name
from astune.data.registry import get_spec

ROWS = 120  # rows of each split written to a snapshot


@pytest.fixture
def mirror(tmp_path, monkeypatch) -> Path:
    """An empty hub mirror, and no local data in the environment; datasets caches what it
    prepares under ``tmp_path``."""
    root = tmp_path / "hub"
    monkeypatch.setenv(HUB_MIRROR_ENV, str(root))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets-cache")
    monkeypatch.delenv("ASTUNE_DATA_DIR", raising=False)
    return root


def test_clinc_from_a_parquet_repository_gets_the_shared_copys_ids(mirror, data_dir):
    """clinc/clinc_oos, config plus: parquet files named by the README's configs, intents in an
    order of the hub's own (here: shuffled); astune maps them by name to the registry's."""
    write_clinc(mirror, data_dir, ROWS)  # and a config "small" beside it: the right one is read
    loaded = load_dataset_splits("clinc_oos")
    assert loaded.source == "hub:clinc/clinc_oos[plus]"
    assert loaded.spec.label_names == tuple(label_names(data_dir, "clinc_oos"))
    assert loaded.spec.num_labels == 151
    for split in ("train", "validation", "test"):
        rows = shared_rows(data_dir, "clinc_oos", split, ROWS)
        expected = [(r["text"], r["intent"]) for r in rows]
        assert [(r["text"], r["label"]) for r in loaded.splits[split]] == expected, split


def test_conll_from_the_parquet_export_reads_the_revision_and_the_config_folder(mirror, data_dir):
    """eriktks/conll2003 is a script repository: astune reads its parquet export, revision
    refs/convert/parquet, folder conll2003/<split>/0000.parquet; another config folder beside
    it must not be read."""
    write_conll(mirror, data_dir, ROWS)
    export = mirror / "eriktks" / "conll2003" / "refs" / "convert" / "parquet"
    path, kwargs = hub_load_call(get_spec("conll2003"))
    assert Path(path) == export and kwargs == {"data_dir": "conll2003"}

    loaded = load_dataset_splits("conll2003")
    assert loaded.source == "hub:eriktks/conll2003@refs/convert/parquet/conll2003"
    local = load_dataset_splits("conll2003", data_dir=data_dir)
    for split in ("train", "validation", "test"):
        assert loaded.splits[split] == local.splits[split][:ROWS], split


def test_the_hub_call_names_the_revision_and_folder_without_a_mirror(monkeypatch):
    monkeypatch.delenv(HUB_MIRROR_ENV, raising=False)
    assert hub_load_call(get_spec("conll2003")) == (
        "eriktks/conll2003",
        {"data_dir": "conll2003", "revision": "refs/convert/parquet"},
    )
    assert hub_load_call(get_spec("clinc_oos")) == ("clinc/clinc_oos", {"name": "plus"})


def test_a_mirror_without_the_snapshot_says_which_folder_it_expected(mirror):
    with pytest.raises(DataError, match=r"ASTUNE_HUB_MIRROR has no snapshot of clinc/clinc_oos"):
        load_dataset_splits("clinc_oos")


@pytest.mark.parametrize("name", ["wikiart", "wos", "eurlex", "chest_falsetto", "sighan2015"])
def test_local_only_entries_fail_in_one_line_saying_where_to_get_the_data(mirror, name):
    """Their hub sources are not known to load with datasets >= 4: astune does not ask the hub
    (nor the mirror), and says where the data is and how to point at it."""
    spec = get_spec(name)
    assert spec.local_only and spec.data_source
    with pytest.raises(DataError) as info:
        load_dataset_splits(name)
    message = str(info.value)
    assert "\n" not in message and "so it is local-only" in message
    assert spec.data_source in message
    assert f"--data-dir DIR or ASTUNE_DATA_DIR (DIR/{name}/" in message
    assert "--dataset FOLDER (a folder with a dataset.json)" in message


def test_a_local_wos_copy_with_the_hubs_columns_becomes_two_level_multi_label(tmp_path):
    folder = tmp_path / "wos"
    folder.mkdir()
    for split, count in (("train", 40), ("test", 10)):
        rows = [
            {"input_data": f"{split} {i}", "label": i % 134, "label_level_1": i % 7}
            for i in range(count)
        ]
        (folder / f"{split}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    loaded = load_dataset_splits("wos", data_dir=tmp_path)
    assert loaded.sizes() == {"train": 36, "validation": 4, "test": 10}
    for row in (r for split in loaded.splits.values() for r in split):
        i = int(row["text"].split()[1])
        assert row["label"] == [i % 7, 7 + i % 134]


def test_hub_names_the_registry_lacks_are_refused_in_one_line():
    spec = get_spec("conll2003")
    changed = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "B-NEW")
    with pytest.raises(DataError, match=r"has ner_tags names 'B-NEW' that 'conll2003' lacks"):
        map_labels_by_name(spec, changed)
    reordered = spec.label_names[::-1]
    same, ids = map_labels_by_name(spec, reordered)
    assert same is spec and [spec.label_names[i] for i in ids] == list(reordered)
    assert map_labels_by_name(spec, spec.label_names) == (spec, None)


# ------------------------------------------------------------------------ datasets --check
@pytest.mark.parametrize(
    "name, files, status",
    [
        ("sst5", ["README.md", "train.jsonl", "validation.jsonl", "test.jsonl"], "OK"),
        ("sst5", ["README.md", "sst5.py", "data/train.jsonl"], "a loading script (sst5.py)"),
        ("sst5", ["README.md", ".gitattributes"], "no data files"),
        ("clinc_oos", ["README.md", "plus/train-00000-of-00001.parquet"], "OK"),
        ("clinc_oos", ["small/train-00000-of-00001.parquet"], "no data files of config 'plus'"),
        ("cola", ["cola/train-00000-of-00001.parquet", "mrpc/test-0.parquet"], "OK"),
        # the parquet export of a script repository: the script is not read at that revision
        ("conll2003", ["conll2003.py", "conll2003/train/0000.parquet"], "OK"),
        ("conll2003", ["other/train/0000.parquet"], "no data files under conll2003/"),
    ],
)
def test_a_listing_is_judged_by_what_datasets_would_load(name, files, status):
    from astune.data.hub_check import judge_listing

    assert judge_listing(get_spec(name), files).startswith(status)


def test_local_only_entries_are_checked_without_the_hub():
    from astune.data.hub_check import check_registry, format_check

    rows = check_registry([get_spec("wikiart"), get_spec("sighan2015")])
    assert [(r.name, r.status) for r in rows] == [
        ("wikiart", "local only"),
        ("sighan2015", "local only"),
    ]
    assert format_check(rows).splitlines()[2].startswith("wikiart ")


def test_an_unreachable_hub_is_said_in_one_line(monkeypatch, capsys):
    import socket

    from huggingface_hub import constants

    from astune.cli import main
    from astune.data.hub_check import hub_unreachable

    with socket.socket() as closed:  # a port nobody listens on once this closes it
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    reason = hub_unreachable(f"http://127.0.0.1:{port}", offline=False, timeout=2.0)
    assert reason.startswith(f"no connection to 127.0.0.1:{port} within 2 s (")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert main(["datasets", "--check"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"the hub ({constants.ENDPOINT}) is unreachable: HF_HUB_OFFLINE is set" in err
