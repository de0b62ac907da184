"""glibc keeps large freed blocks for the next step (astune/training/allocator.py): counted in
page faults, which do not depend on the machine's speed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from astune.training.allocator import KEPT_BLOCK_BYTES

# A fresh interpreter: the test process may have trained already, which changed its allocator.
FAULTS_PER_CYCLE = textwrap.dedent(
    """
    import json, resource
    import torch
    from astune.training.allocator import keep_freed_blocks

    def faults(cycles, rows=30_522, width=384):  # MiniLM's word-embedding gradient, 45 MiB
        out = []
        for _ in range(cycles):
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            torch.zeros(rows, width)  # made, touched and freed, as by a backward and zero_grad
            out.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        return out

    plain = faults(8)
    took = keep_freed_blocks()
    print(json.dumps({"plain": plain, "took": took, "kept": faults(16)}))
    """
)


def test_a_large_block_freed_each_step_comes_back_without_page_faults():
    out = subprocess.run(
        [sys.executable, "-c", FAULTS_PER_CYCLE], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    pages = 30_522 * 384 * 4 // 4096
    assert got["took"] is True  # glibc (this machine's Debian)
    assert min(got["plain"]) > pages / 2, got  # unmapped when freed, faulted in each cycle
    # the heap settles within a few cycles (measured: 3 to 6), then reuses the block
    assert max(got["kept"][-6:]) < pages / 100, got
    assert 30_522 * 384 * 4 < KEPT_BLOCK_BYTES
