"""What the fused-kernel tests share (tests/test_as_softmax_triton.py,
tests/test_multilabel_triton.py): tolerances of issue 45 (fp32 rtol 1e-5, half precision one
unit in the last place), running a file's checks under the interpreter in a subprocess, and
compiling a kernel for an H100 without one."""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def assert_within_one_ulp(ours: torch.Tensor, expected: torch.Tensor, dtype) -> None:
    """|ours - expected| at most one unit in the last place of ``dtype`` at ``expected``."""
    rounded = expected.to(dtype).abs()
    ulp = (torch.nextafter(rounded, torch.tensor(float("inf"), dtype=dtype)) - rounded).double()
    err = (ours.double().cpu() - expected).abs()
    bad = err > ulp
    assert not bad.any(), f"{int(bad.sum())} beyond one ulp, worst {err[bad].max():.3g}"


def assert_matches(ours, expected, dtype, rows: torch.Tensor | None = None) -> None:
    """fp32: rtol 1e-5; fp16/bf16: one ulp; over ``rows`` only when given."""
    ours, expected = ours.cpu(), expected
    if rows is not None:
        ours, expected = ours[rows], expected[rows]
    if dtype == torch.float32:
        torch.testing.assert_close(ours.double(), expected, rtol=1e-5, atol=1e-6)
    else:
        assert_within_one_ulp(ours, expected, dtype)


def run_checks(checks: list[Callable], device: str, dtypes: list[torch.dtype]) -> list[str]:
    """Every check in every dtype; the failures, each with its traceback."""
    failures = []
    for dtype in dtypes:
        for check in checks:
            try:
                check(device, dtype)
            except Exception:
                failures.append(f"{check.__name__}[{dtype}]:\n{traceback.format_exc()}")
    return failures


def assert_interpreter_checks_pass(test_file: str, checks: list[Callable]) -> None:
    """``test_file`` run as a script under triton's interpreter, in a subprocess (the
    interpreter must be chosen before triton is imported): every check passes in fp32 and fp16."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, test_file], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{2 * len(checks)} checks passed" in done.stdout


def compile_for_h100(kernel, types: dict[str, str], constants: dict, num_warps: int) -> None:
    """Compile ``kernel`` to an sm_90 binary here, with triton's own ptxas: no GPU needed."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature = types | {name: "constexpr" for name in constants}
    position = {name: (index,) for index, name in enumerate(signature)}
    source = ASTSource(
        fn=kernel,
        signature=signature,
        constexprs={position[name]: value for name, value in constants.items()},
    )
    binary = triton.compile(
        source, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps}
    )
    assert binary.asm["cubin"], "ptxas gave no binary"
