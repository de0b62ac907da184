"""A local mirror of the hub (``$ASTUNE_HUB_MIRROR``, astune/data/hub.py) holding the four test
datasets, written from the shared copies in the layouts their hub repositories have:

- SetFit/sst5: JSON lines files at the repository's root (``text``, ``label``, ``label_text``);
- clinc/clinc_oos: parquet files per config named by the README's ``configs``, intents as a
  ClassLabel in an order of the hub's own (here: shuffled), which astune maps back by name;
- eriktks/conll2003: a script repository, read from its parquet export
  (revision refs/convert/parquet, one folder per config and split; a config ``other`` beside);
- google-research-datasets/go_emotions: parquet files per config (``raw`` beside the
  ``simplified`` that astune reads), ``labels`` a list of ClassLabel, and an ``id`` column.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import datasets

SPLITS = ("train", "validation", "test")


def shared_rows(data_dir: Path, name: str, split: str, limit: int | None = None) -> list[dict]:
    """The first ``limit`` rows (all: None) of a shared copy's split."""
    with (data_dir / name / f"{split}.jsonl").open(encoding="utf-8") as handle:
        lines = [line for _, line in zip(range(limit or 10**9), handle)]
    return [json.loads(line) for line in lines]


def label_names(data_dir: Path, name: str) -> list[str]:
    return json.loads((data_dir / name / "dataset.json").read_text())["label_names"]


def write_parquet(rows: list[dict], features: datasets.Features, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = {name: [row[name] for row in rows] for name in features}
    datasets.Dataset.from_dict(columns, features=features).to_parquet(str(path))


def write_card(repo: Path, configs: dict[str, list[str]]) -> None:
    """A README whose ``configs`` name each config's split files."""
    card = ["---", "configs:"]
    for config, splits in configs.items():
        card += [f"- config_name: {config}", "  data_files:"]
        for split in splits:
            card += [f"  - split: {split}", f"    path: {config}/{split}-*"]
    (repo / "README.md").write_text("\n".join([*card, "---", ""]))


def write_sst5(mirror: Path, data_dir: Path, limit: int | None) -> None:
    repo = mirror / "SetFit" / "sst5" / "main"
    repo.mkdir(parents=True)
    for split in SPLITS:
        rows = shared_rows(data_dir, "sst5", split, limit)
        (repo / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_clinc(mirror: Path, data_dir: Path, limit: int | None) -> None:
    names = label_names(data_dir, "clinc_oos")
    hub_order = names[:]
    random.Random(5).shuffle(hub_order)
    to_hub = {i: hub_order.index(name) for i, name in enumerate(names)}
    features = datasets.Features(
        {"text": datasets.Value("string"), "intent": datasets.ClassLabel(names=hub_order)}
    )
    repo = mirror / "clinc" / "clinc_oos" / "main"
    for config in ("plus", "small"):  # two configs: the right one must be asked for
        for split in SPLITS:
            rows = shared_rows(data_dir, "clinc_oos", split, limit)
            rows = rows if config == "plus" else rows[: len(rows) // 2]
            hub_rows = [{**row, "intent": to_hub[row["intent"]]} for row in rows]
            write_parquet(hub_rows, features, repo / config / f"{split}-00000-of-00001.parquet")
    write_card(repo, {config: list(SPLITS) for config in ("plus", "small")})


def write_conll(mirror: Path, data_dir: Path, limit: int | None) -> None:
    features = datasets.Features(
        {
            "tokens": datasets.Sequence(datasets.Value("string")),
            "ner_tags": datasets.Sequence(
                datasets.ClassLabel(names=label_names(data_dir, "conll2003"))
            ),
        }
    )
    export = mirror / "eriktks" / "conll2003" / "refs" / "convert" / "parquet"
    for split in SPLITS:
        rows = shared_rows(data_dir, "conll2003", split, limit)
        write_parquet(rows, features, export / "conll2003" / split / "0000.parquet")
        write_parquet(rows[:3], features, export / "other" / split / "0000.parquet")


def write_go_emotions(mirror: Path, data_dir: Path, limit: int | None) -> None:
    labels = datasets.Sequence(datasets.ClassLabel(names=label_names(data_dir, "go_emotions")))
    simplified = datasets.Features(
        {"text": datasets.Value("string"), "labels": labels, "id": datasets.Value("string")}
    )
    raw = datasets.Features({"text": datasets.Value("string"), "id": datasets.Value("string")})
    repo = mirror / "google-research-datasets" / "go_emotions" / "main"
    for split in SPLITS:
        rows = shared_rows(data_dir, "go_emotions", split, limit)
        rows = [{**row, "id": f"{split}{i}"} for i, row in enumerate(rows)]
        write_parquet(rows, simplified, repo / "simplified" / f"{split}-00000-of-00001.parquet")
    write_parquet(rows[:5], raw, repo / "raw" / "train-00000-of-00001.parquet")
    write_card(repo, {"raw": ["train"], "simplified": list(SPLITS)})


WRITERS = {
    "sst5": write_sst5,
    "clinc_oos": write_clinc,
    "conll2003": write_conll,
    "go_emotions": write_go_emotions,
}


def write_mirror(mirror: Path, data_dir: Path, limits: dict[str, int | None]) -> Path:
    """Snapshots of the datasets in ``limits`` (name -> rows per split, None: all) under
    ``mirror``, from the shared copies in ``data_dir``."""
    for name, limit in limits.items():
        WRITERS[name](mirror, data_dir, limit)
    return mirror
