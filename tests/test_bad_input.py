# ruff: noqa: E501 -- the table keeps one case a line
"""Bad input through the command line, as one table: each case exits 2 with one line on stderr
naming the bad value (and what is accepted), no traceback, and starts no work.

Each case is its own process with its own exit code and stderr. A few run as a user runs them
(``python -m astune ...``); the others are forked, one each, from one helper process that has
imported astune's heavy dependencies once (torch, transformers, MLflow: seconds per process),
so that the table costs seconds instead of minutes. The forked child runs ``astune.cli.main``
as ``python -m astune`` does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# (argv, a fragment of the one line: the bad value and, where there is a list, what is accepted)
CASES: list[tuple[str, str]] = [
    ("search --dataset sst5 --space wrongtype.yaml", "num_samples must be an integer in [1, inf), but got 'many'"),
    ("search --dataset sst5 --space unknown.yaml", "bogus_key: unknown top-level key; expected one of"),
    ("search --dataset sst5 --space empty.yaml", "params.lr: choices must be a non-empty list, got []"),
    ("search --dataset sst5 --space lowhigh.yaml", "params.lr: low 0.1 must be <= high 0.01"),
    ("search --dataset sst5 --space logzero.yaml", "params.lr: log: true needs low > 0, got low 0.0"),
    ("search --dataset sst5 --space missing.yaml", "missing.yaml: no such file"),
    ("search --dataset sst5 --num-samples 0", "--num-samples must be an integer in [1, inf), but got 0"),
    ("search --dataset sst5 --epochs -1", "--epochs must be in (0.0, inf), but got -1.0"),
    ("search --dataset sst5 --objectives objective,speed", "unknown objective 'speed' in 'objective,speed'; accepted:"),
    ("search --dataset sst5 --sampler bogus", "invalid choice: 'bogus' (choose from 'tpe', 'neighbours', 'random', 'qmc', 'cmaes', 'gp', 'nsgaii', 'nsgaiii')"),
    ("search --dataset sst5 --scheduler bogus", "invalid choice: 'bogus' (choose from 'asha', 'hyperband', 'none')"),
    ("search --dataset sst5 --tracking-uri ftp://x/y", "has the scheme 'ftp', which MLflow does not store runs in; accepted: sqlite"),
    ("search --dataset sst5 --backbone minilm --storage-path /proc/astune", "--storage-path /proc/astune: cannot create it"),
    ("search --dataset sst5 --backbone minilm --losses focal", "error: --losses: unknown loss 'focal'; known losses: softmax,"),
    ("search --dataset sst5 --max-length 2", "--max-length must be an integer in [8, inf), but got 2"),
    ("search --dataset sst5 --max-concurrent 0", "--max-concurrent must be an integer in [1, inf), but got 0"),
    ("search --dataset sst5 --cpus-per-trial 0", "--cpus-per-trial must be in (0.0, inf), but got 0.0"),
    ("search --dataset sst5 --checkpoint-every 5x", "--checkpoint-every must be 'eval' (every evaluation), 'end'"),
    ("search --dataset sst5 --validation-fraction 1.5", "--validation-fraction must be in (0.0, 1.0), but got 1.5"),
    ("search --dataset sst5 --seed -1", "--seed must be an integer in [0, inf), but got -1"),
    ("search --dataset sst5 --storage-timeout -5", "--storage-timeout must be in [0.0, inf), but got -5.0"),
    ("confirm --experiment x --storage-timeout -5", "--storage-timeout must be in [0.0, inf), but got -5.0"),
    ("search --dataset sst5 --max-failures 1", "unrecognized arguments: --max-failures 1"),
    ("search --dataset sst5 --resume --name never", "--resume: no search 'never' at"),
    ("search --dataset sst5 --no-portfolio --reference ref.json", "--reference is read by --warm-start and the portfolio; add --warm-start or leave out --no-portfolio"),
    ("search --dataset sst5 --warm-start --reference nope.json", "--reference nope.json: no such file"),
    ("recommend --dataset sst5 --reference nope.json", "--reference nope.json: no such file; give a reference file (as reference_trials.json"),
    ("search --dataset sst5 --probe-backbone minilm", "--probe-backbone is read by --warm-start only; add --warm-start"),
    ("search --dataset sst5 --backbone minilm --loss-kernel triton", "kernel='triton' needs CUDA tensors"),
    ("search --dataset sst5 --loss-kernel fused", "invalid choice: 'fused' (choose from 'auto', 'triton', 'torch')"),
    ("search --dataset sst5 --backbone minilm --num-layers 9", "--num-layers must be an integer in [1, 6] (backbone 'minilm' has 6 layers), but got 9"),
    ("recommend --dataset sst5 --num-layers 0", "--num-layers must be an integer in [1, inf), but got 0"),
    ("search --dataset nope", "unknown dataset 'nope'; known: sst5"),
    ("search --dataset broken_parquet", "broken_parquet"),
    ("search --dataset broken_csv", "broken_csv/train.csv is not a readable CSV file"),
    ("search --dataset float_labels", "0.5"),
    ("search --dataset missing_label", "missing_label/train.csv (row 2): 'label' is missing (an empty cell, a null)"),
    ("search --dataset broken_image", "broken_image/train/a/2.png' in"),
    ("train --dataset sst5 --delta 1.5", "--delta must be in (0.0, 1.0], but got 1.5"),
    ("train --dataset sst5 --output-dir finished_run", "--output-dir finished_run holds a run already (final.json); continue it with --resume"),
    ("train --dataset sst5 --resume --overwrite", "--resume continues the run in --output-dir, --overwrite replaces it: give one"),
    ("train --dataset sst5 --lr -1", "--lr must be in (0.0, 1.0], but got -1.0"),
    ("train --dataset sst5 --batch-size 0", "--batch-size must be an integer in [1, inf), but got 0"),
    ("train --dataset sst5 --warmup-ratio 2", "--warmup-ratio must be in [0.0, 1.0], but got 2.0"),
    ("train --dataset sst5 --loss nope", "--loss must be one of 'softmax',"),
    ("train --dataset sst5 --precision fp8", "invalid choice: 'fp8' (choose from 'auto', 'fp32', 'bf16')"),
    ("train --dataset sst5 --max-accum-steps 0", "--max-accum-steps must be an integer in [1, inf), but got 0"),
    ("train --dataset sst5 --lam 0", "--lam must be in (0.0, inf), but got 0.0"),
    ("train --dataset sst5 --loss softmax --as-skip", "as_skip needs an AS loss (as_softmax, multilabel_as_softmax), but loss is 'softmax'"),
    ("train --config other_tool.yaml", "unknown config key 'foo'; accepted: as_skip"),
    ("export --experiment nope", "no MLflow store at"),
    ("export --experiment x --tracking-uri missing.db", "no MLflow store at"),
    ("export --experiment x --format xml", "invalid choice: 'xml' (choose from 'yaml', 'json', 'python', 'hf')"),
    ("confirm --experiment nope --seeds 1", "--seeds must be an integer in [2, inf), but got 1"),
    ("recommend --dataset nope", "unknown dataset 'nope'; known: sst5"),
    ("report --experiment nope --tracking-uri missing.db", "no MLflow store at"),
    ("prepare sighan --train missing.json --test missing.json --out o", "cannot read missing.json"),
    ("prepare data --datasets sst5,nope", "--datasets: cannot prepare 'nope'; accepted (comma-separated): sst5, clinc_oos"),
    ("prepare data --out /proc/astune", "--out '/proc/astune' is not a writable folder"),
    ("datasets --bogus", "unrecognized arguments: --bogus"),
]  # fmt: skip
AS_A_USER = {0, 9, 11}  # cases run as `python -m astune ...`: the entry point itself


def write_inputs(folder: Path) -> None:
    """The bad files the cases name, in ``folder`` (the cases' working directory)."""
    spaces = {
        "wrongtype.yaml": "extends: default\nnum_samples: many\n",
        "unknown.yaml": "extends: default\nbogus_key: 1\n",
        "empty.yaml": "extends: default\nparams:\n  lr: {type: categorical, choices: []}\n",
        "lowhigh.yaml": "extends: default\nparams:\n  lr: {type: float, low: 0.1, high: 0.01}\n",
        "logzero.yaml": "extends: default\nparams:\n  lr: {type: float, low: 0.0, high: 0.01, "
        "log: true}\n",
        "other_tool.yaml": "foo: bar\n",  # a config file of another tool
    }
    for name, text in spaces.items():
        (folder / name).write_text(text)
    (folder / "finished_run").mkdir()
    (folder / "finished_run" / "final.json").write_text("{}")  # a run's folder, as one ends
    rows = [{"text": f"text {i}", "label": i % 2} for i in range(8)]
    meta = {"task": "single_label", "text_column": "text", "label_column": "label"}
    for name, broken, content in (
        ("broken_parquet", "train.parquet", b"PAR1 this is not a parquet file"),
        ("broken_csv", "train.csv", b'text,label\n"an unclosed quote,1\n'),
    ):
        data = folder / name
        data.mkdir()
        (data / "dataset.json").write_text(json.dumps(meta))
        for split in ("validation", "test"):
            (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (data / broken).write_bytes(content)
    write_broken_image_folder(folder / "broken_image")
    names = folder / "missing_label"  # class names, one empty cell (raw BANKING77 has 13)
    names.mkdir()
    (names / "dataset.json").write_text(json.dumps(meta))
    for split in ("train", "validation", "test"):
        cells = ["pos", "", "neg", "pos"] if split == "train" else ["pos", "neg", "pos", "neg"]
        lines = ["text,label", *(f"t{i},{label}" for i, label in enumerate(cells))]
        (names / f"{split}.csv").write_text("\n".join(lines) + "\n")
    floats = folder / "float_labels"
    floats.mkdir()
    (floats / "dataset.json").write_text(json.dumps(meta))
    for split in ("train", "validation", "test"):
        lines = [json.dumps({"text": f"t{i}", "label": i + 0.5}) for i in range(4)]
        (floats / f"{split}.jsonl").write_text("\n".join(lines) + "\n")


def write_broken_image_folder(folder: Path) -> None:
    """Two 8x8 grey PNGs per class and split, and in ``train/a`` one that does not decode."""
    import numpy as np
    from PIL import Image

    for split in ("train", "validation", "test"):
        for label in ("a", "b"):
            (folder / split / label).mkdir(parents=True)
            for i in range(2):
                pixels = np.full((8, 8), 40 * i, np.uint8)
                Image.fromarray(pixels, mode="L").save(folder / split / label / f"{i}.png")
    (folder / "train" / "a" / "2.png").write_bytes(b"\x89PNG\r\n\x1a\n not an image after all")
    (folder / "dataset.json").write_text(json.dumps({"task": "image"}))


HEAVY = ("torch", "transformers", "mlflow", "ray", "datasets")
"""What no refusal may import: seconds each (torch alone 2-3 s here); bad input is refused first."""

ZYGOTE = textwrap.dedent(
    f"""
    import json, os, sys, tempfile
    import astune.cli  # light: every forked case starts from it, as `python -m astune` does
    results = []
    for argv in json.loads(sys.stdin.read()):
        with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as heavy:
            pid = os.fork()
            if pid == 0:
                os.dup2(err.fileno(), 2)
                sys.stderr = open(2, "w", closefd=False)
                try:
                    code = astune.cli.main(argv)
                except SystemExit as done:
                    code = done.code if isinstance(done.code, int) else 1
                sys.stderr.flush()
                loaded = [m for m in {HEAVY!r} if m in sys.modules]
                os.write(heavy.fileno(), json.dumps(loaded).encode())
                os._exit(code)
            _, status = os.waitpid(pid, 0)
            err.seek(0)
            heavy.seek(0)
            loaded = json.loads(heavy.read() or b"null")
            results.append([os.waitstatus_to_exitcode(status), err.read().decode(), loaded])
    print(json.dumps(results))
    """
)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> list[tuple[int, str, list[str] | None]]:
    """Each case's exit code, stderr and the heavy packages it imported (None: run as a user),
    in the order of CASES."""
    folder = tmp_path_factory.mktemp("bad-input")
    write_inputs(folder)
    argvs = [argv.split() for argv, _ in CASES]
    forked = [a for i, a in enumerate(argvs) if i not in AS_A_USER]
    zygote = subprocess.run(
        [sys.executable, "-c", ZYGOTE],
        input=json.dumps(forked),
        capture_output=True,
        text=True,
        cwd=folder,
        timeout=600,
    )
    assert zygote.returncode == 0, zygote.stderr[-3000:]
    results = iter(json.loads(zygote.stdout.strip().splitlines()[-1]))
    out = []
    for i, argv in enumerate(argvs):
        if i in AS_A_USER:
            user = subprocess.run(
                [sys.executable, "-m", "astune", *argv],
                capture_output=True,
                text=True,
                cwd=folder,
                timeout=120,
            )
            out.append((user.returncode, user.stderr, None))
        else:
            out.append(tuple(next(results)))
    return out


def test_the_table_has_at_least_forty_cases():
    assert len(CASES) >= 40 and len({argv for argv, _ in CASES}) == len(CASES)


@pytest.mark.parametrize("case", range(len(CASES)), ids=[argv for argv, _ in CASES])
def test_bad_input_exits_2_with_one_line_naming_it(outcomes, case):
    argv, fragment = CASES[case]
    code, err, _ = outcomes[case]
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, (code, err[-2000:])
    assert "Traceback" not in err
    assert lines[0].startswith(
        f"astune{'' if 'unrecognized' in fragment else ' ' + argv.split()[0]}"
    )
    assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("case", range(len(CASES)), ids=[argv for argv, _ in CASES])
def test_bad_input_is_refused_before_the_heavy_imports(outcomes, case):
    """No refusal waits for torch, transformers, MLflow, Ray or datasets to import."""
    _, err, loaded = outcomes[case]
    assert loaded in ([], None), (CASES[case][0], loaded, err[-500:])
