"""Counting what would make a run wait for a CUDA device, on any machine (the CPU included).

:class:`SyncAudit` runs code under a torch function mode and a dispatch mode and records each
call that would synchronise the host with a CUDA device, judged as it would behave there.
Tensors that stand for device tensors are tagged: the ones :meth:`SyncAudit.tag` is given (a
model's parameters, a batch source's state), what :func:`~astune._device.to_device` or any
``.to(device)`` sends, what a factory makes with an explicit ``device=``, and every result an
operation computes from a tagged tensor. A sync is then:

- **a read** of a tagged tensor on the host: ``.item()``, ``float()``, ``int()``, ``bool()``
  (``aten._local_scalar_dense``), ``tolist()``, ``numpy()``, ``.cpu()``, or ``.to("cpu")``
  without ``non_blocking=True``;
- **a shape that depends on values**: ``nonzero``, boolean-mask indexing (reading or writing),
  ``masked_select``, ``unique``, ``repeat_interleave`` without ``output_size``;
- **a blocking copy**: a host tensor sent with ``.to(device)`` without ``non_blocking=True``,
  ``torch.tensor(..., device=...)``, or a host tensor of more than one element mixed into an
  operation on a tagged one (an implicit copy; on CUDA most such calls fail outright).

Each is recorded with the :func:`~astune._device.current_sync_place` it happened in, so a test
can demand zero outside the named places. A read to the host names ``"cpu"`` (a string) or
calls ``.cpu()``; ``.to(some_torch_device)`` of a tagged tensor is taken as a move between
devices, which is free.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

from astune._device import current_sync_place, host_judge
from astune._private import parse_to, torch_dispatch_mode, tree_leaves

aten = torch.ops.aten
_READS = {aten._local_scalar_dense.default, aten.equal.default, aten.is_nonzero.default}
_VALUE_SHAPED = {
    aten.nonzero,
    aten.masked_select,
    aten._unique,
    aten._unique2,
    aten.unique_dim,
    aten.unique_consecutive,
    aten.masked_scatter,
}
_INDEXING = {aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_}
_FACTORIES = {
    torch.zeros, torch.ones, torch.empty, torch.full, torch.arange, torch.linspace,
    torch.rand, torch.randn, torch.randint, torch.eye,
}  # fmt: skip
_HOST_READS = {Tensor.tolist, Tensor.numpy, Tensor.__array__}


@dataclass(frozen=True)
class Sync:
    """One call that would wait for the device: its ``kind`` (read, value-shaped, blocking
    copy), ``what`` was called, the ``place`` it happened in (None: inside a step) and
    ``where``, the line that asked for it (``module:line``)."""

    kind: str
    what: str
    place: str | None
    where: str


class SyncAudit:
    """Record every call that would synchronise with a CUDA device while inside ``with``.

    Example:
        >>> audit = SyncAudit()
        >>> audit.tag(model)  # doctest: +SKIP
        >>> with audit:  # doctest: +SKIP
        ...     run.micro_step(batch, visit)
        >>> audit.outside_places()  # doctest: +SKIP
        []
    """

    def __init__(self) -> None:
        self._tags: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.syncs: list[Sync] = []
        self._modes = (_FunctionMode(self), _DispatchMode(self))
        self._judge = host_judge(lambda t: False if self.is_tagged(t) else None)

    # -- tags -----------------------------------------------------------------------------------
    def tag(self, *items: Tensor | nn.Module | Iterable[Tensor] | None) -> None:
        """Treat these as device tensors: tensors, a module's parameters and buffers (with
        their gradients), or iterables of tensors; None is passed over."""
        for item in items:
            if isinstance(item, Tensor):
                self._tags[item] = True
                if item.grad is not None:
                    self._tags[item.grad] = True
            elif isinstance(item, nn.Module):
                self.tag(*item.parameters(), *item.buffers())
            elif item is not None:
                self.tag(*item)

    def is_tagged(self, value: Any) -> bool:
        return isinstance(value, Tensor) and value in self._tags

    def _tag_all(self, value: Any) -> None:
        for leaf in tree_leaves(value):
            if isinstance(leaf, Tensor):
                self._tags[leaf] = True

    # -- records --------------------------------------------------------------------------------
    def record(self, kind: str, what: str) -> None:
        self.syncs.append(Sync(kind, what, current_sync_place(), _caller()))

    def outside_places(self) -> list[Sync]:
        """The syncs made inside a step (outside every named place)."""
        return [sync for sync in self.syncs if sync.place is None]

    def by_place(self) -> Counter:
        """Sync counts by place (None: inside a step)."""
        return Counter(sync.place for sync in self.syncs)

    def __enter__(self) -> SyncAudit:
        self._judge.__enter__()
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)
        self._judge.__exit__(*exc)


class _FunctionMode(TorchFunctionMode):
    """What never reaches the dispatcher on the CPU: host reads, moves, factories."""

    def __init__(self, audit: SyncAudit):
        super().__init__()
        self.audit = audit

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        audit = self.audit
        source = args[0] if args else None
        if func in _HOST_READS and audit.is_tagged(source):
            audit.record("read", func.__name__)
        elif func is Tensor.cpu and audit.is_tagged(source):
            audit.record("read", "cpu")
            result = _copy(source)
            audit._tags.pop(result, None)
            return result
        elif func is Tensor.to:
            return self._move(source, args[1:], kwargs)
        elif func in (torch.tensor, torch.as_tensor) and kwargs.get("device") is not None:
            result = func(*args, **kwargs)
            if not audit.is_tagged(args[0]):
                audit.record("blocking copy", f"torch.{func.__name__}(device=...)")
            audit._tag_all(result)
            return result
        result = func(*args, **kwargs)
        if func in _FACTORIES and kwargs.get("device") is not None:
            audit._tag_all(result)
        return result

    def _move(self, source: Tensor, args: tuple, kwargs: dict) -> Tensor:
        parsed = {k: v for k, v in kwargs.items() if k != "copy"}  # _parse_to refuses copy=
        device, _dtype, non_blocking, _format = parse_to(*args, **parsed)
        result = source.to(*args, **kwargs)
        if device is None:
            return result  # a change of dtype: the dispatcher sees it
        audit = self.audit
        to_host = _names_host(args, kwargs)
        if audit.is_tagged(source) and not to_host:
            return result  # already on the device
        if audit.is_tagged(source) or not to_host:
            if not non_blocking:
                audit.record("read" if to_host else "blocking copy", f"to({device})")
            result = _copy(result) if result is source else result
            if to_host:
                audit._tags.pop(result, None)
            else:
                audit._tags[result] = True
        return result


def _names_host(args: tuple, kwargs: dict) -> bool:
    """Whether a ``.to`` call names the host: the string ``"cpu"`` (see the module's note)."""
    device = kwargs.get("device", args[0] if args else None)
    return isinstance(device, str) and device.startswith("cpu")


def _copy(tensor: Tensor) -> Tensor:
    """A fresh copy (on CUDA a move between host and device makes a new tensor); the caller
    sets its tag."""
    return tensor.detach().clone().requires_grad_(tensor.requires_grad)


class _DispatchMode(torch_dispatch_mode()):
    """What the dispatcher runs: value reads, value-shaped ops, implicit copies, and the tags."""

    def __init__(self, audit: SyncAudit):
        super().__init__()
        self.audit = audit

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        audit = self.audit
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, Tensor)]
        tagged = [t for t in inputs if audit.is_tagged(t)]
        result = func(*args, **kwargs)
        if func.overloadpacket is aten.copy_:
            self._copy_between(args, kwargs)
            return result
        if not tagged:
            return result
        packet = func.overloadpacket
        if func in _READS:
            audit.record("read", str(packet.__name__))
        elif packet in _VALUE_SHAPED or _repeats_by_value(func, kwargs):
            audit.record("value-shaped", str(packet.__name__))
        elif packet in _INDEXING and _has_bool_index(args):
            audit.record("value-shaped", f"{packet.__name__} with a boolean mask")
        elif any(not audit.is_tagged(t) and t.numel() > 1 for t in inputs):
            audit.record("blocking copy", f"{packet.__name__} mixing a host tensor in")
        audit._tag_all(result)
        return result

    def _copy_between(self, args: tuple, kwargs: dict) -> None:
        dest, src = args[0], args[1]
        non_blocking = kwargs.get("non_blocking", args[2] if len(args) > 2 else False)
        audit = self.audit
        if audit.is_tagged(dest) != audit.is_tagged(src) and src.numel() > 1 and not non_blocking:
            kind = "read" if audit.is_tagged(src) else "blocking copy"
            audit.record(kind, "copy_ between host and device")


def _repeats_by_value(func: Any, kwargs: dict) -> bool:
    return func is aten.repeat_interleave.Tensor and kwargs.get("output_size") is None


def _has_bool_index(args: tuple) -> bool:
    indices = args[1] if len(args) > 1 else ()
    return any(
        isinstance(i, Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ()
    )


def _caller() -> str:
    """``module:line`` of the innermost frame outside torch and this module: the line that
    asked for the sync."""
    import sys

    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module != __name__ and not module.startswith(("torch", "contextlib")):
            return f"{module}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def run_device_state(run: Any) -> list[Tensor | nn.Module]:
    """What a :class:`~astune.training.Run` keeps on its device, to :meth:`SyncAudit.tag`:
    the model, the loss, the optimizer's state and the batch source's per-sample state (each
    state object names its device tensors in ``DEVICE_STATE``)."""
    state: list[Tensor | nn.Module] = [run.model, run.loss_fn]
    for per_param in run.optimizer.state.values():
        state += [v for v in per_param.values() if isinstance(v, Tensor)]
    for holder in vars(run.batches).values():
        for name in getattr(holder, "DEVICE_STATE", ()):
            state.append(getattr(holder, name))
    return state
