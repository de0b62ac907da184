"""Traffic between the host and the device, and the few places where a run may wait for it.

A search packs many trials onto one card, and a host that waits for the card (a sync) stalls
every trial on it, so a training step never waits: what it sends goes through pinned memory
without blocking (:func:`to_device`), what the host must know is copied back without blocking
and read one step later (:class:`HostCopy`), and counts stay on the device in between. A run
waits only inside one of :data:`SYNC_PLACES`, entered with :func:`sync_place`;
:mod:`astune.training.sync_audit` counts what would wait anywhere else.

A branch that exists only on the host (a label check that the CPU makes for free, where CUDA
kernels assert instead) asks :func:`on_host`, the one seam the audit overrides, so that on the
CPU it judges each call as it would behave on CUDA.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

SYNC_PLACES = ("evaluation", "epoch", "checkpoint", "end")
"""Where a run may wait for its device: a validation or test evaluation (its metrics are read
on the host), an epoch's boundary (AS-Skip's and InfoBatch's plans of the next epoch read each
sample's last loss), a checkpoint (its state is written to disk) and the run's end."""

_local = threading.local()
_host_judges: list[Callable[[Tensor], bool | None]] = []


@contextmanager
def sync_place(name: str) -> Iterator[None]:
    """Mark the code inside as one of :data:`SYNC_PLACES` (nested places keep the outermost)."""
    if name not in SYNC_PLACES:
        raise ValueError(f"sync place must be one of {SYNC_PLACES}, but got {name!r}.")
    stack = _place_stack()
    stack.append(name)
    try:
        yield
    finally:
        stack.pop()


def current_sync_place() -> str | None:
    """The outermost :func:`sync_place` the calling thread is in (None: a step, where nothing
    may wait)."""
    stack = _place_stack()
    return stack[0] if stack else None


def _place_stack() -> list[str]:
    if not hasattr(_local, "places"):
        _local.places = []
    return _local.places


def on_host(tensor: Tensor) -> bool:
    """Whether ``tensor`` lives in host memory, where reading it waits for nothing; never while
    ``torch.compile`` traces (a traced tensor has no value to read)."""
    if torch.compiler.is_compiling():
        return False
    for judge in _host_judges:
        verdict = judge(tensor)
        if verdict is not None:
            return verdict
    return tensor.device.type == "cpu"


@contextmanager
def host_judge(judge: Callable[[Tensor], bool | None]) -> Iterator[None]:
    """Let ``judge`` decide :func:`on_host` (None: no verdict) while inside; the sync audit
    uses it to treat CPU tensors that stand for device ones as device tensors."""
    _host_judges.append(judge)
    try:
        yield
    finally:
        _host_judges.remove(judge)


def to_device(tensor: Tensor, device: torch.device) -> Tensor:
    """``tensor`` on ``device`` without waiting: a copy to a GPU goes through pinned memory,
    since one from pageable memory first waits for the GPU's queue to drain (the host could
    not prepare the next step while the GPU runs this one)."""
    if device.type == "cuda" and tensor.device.type == "cpu":
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)


class HostCopy:
    """The values of a device tensor, copied to the host without waiting; :meth:`values`
    waits for the copy, which by the next step has long finished (no stall: the device already
    holds that step's work)."""

    def __init__(self, tensor: Tensor):
        # A non-blocking copy from CUDA lands in pinned memory, and the event marks its end.
        self._host = tensor.detach().to("cpu", non_blocking=True)
        self._event = None
        if tensor.is_cuda:
            self._event = torch.cuda.Event()
            self._event.record()

    def values(self) -> list:
        """The copied values as Python numbers (``tolist``)."""
        if self._event is not None:
            self._event.synchronize()
        return self._host.tolist()
