"""``ReplayGraph``: a CPU stand-in for ``training.rollout_graph.RolloutGraph`` that behaves as a
CUDA graph does, so that the code a trainer records on a GPU can be checked on the CPU.

``capture(fn)`` runs ``fn`` once, recording in order every torch op (a ``TorchDispatchMode``) and
every Warp launch (``host_threads.PackedLaunch``, with its packed arguments as they were) it
issues, and then puts back every byte those ops and launches could have written: like a CUDA
capture, it leaves memory as it was and only the Python-side state moved on. ``replay()`` issues
the recorded ops and launches again on the same tensors and arrays, without running any of
``fn``'s Python. So a replay reproduces an eager run only if ``fn`` depends on nothing a CUDA graph
freezes at capture: Python-side state, tensors swapped between calls, values read on the host.
Any other Warp operation inside ``fn`` raises ``AssertionError``: it would escape the record."""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable

import torch
import warp as wp
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from warp._src.codegen import Struct

from sim_core import host_threads


class _Memory:
    """Byte ranges saved before their first write, to be put back in reverse order (so a range
    saved twice ends with its first, pre-capture contents)."""

    def __init__(self):
        self.saved: list[tuple[int, bytes]] = []

    def save(self, ptr: int, nbytes: int) -> None:
        if ptr and nbytes > 0:
            self.saved.append((ptr, ctypes.string_at(ptr, nbytes)))

    def save_tensor(self, t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        self.save(storage.data_ptr(), storage.nbytes())

    def save_args(self, types: list, values: list) -> None:
        """Every Warp array among a kernel's packed arguments (``types``: their Warp types),
        those in struct arguments included: the bytes from its first element to its last."""
        for t, value in zip(types, values, strict=True):
            if wp.types.is_array(t):
                shape, strides = value.shape[: value.ndim], value.strides[: value.ndim]
                if value.ndim and min(shape) > 0:
                    span = sum((n - 1) * abs(st) for n, st in zip(shape, strides, strict=True))
                    self.save(value.data, span + wp.types.type_size_in_bytes(t.dtype))
            elif isinstance(t, Struct):
                self.save_args([v.type for v in t.vars.values()], [getattr(value, k) for k in t.vars])

    def save_launch(self, cmd: host_threads.PackedLaunch) -> None:
        types = [a.type for a in cmd.cmd.kernel.adj.args]
        self.save_args(types, [getattr(cmd._args, name) for name in cmd._names])

    def restore(self) -> None:
        for ptr, data in reversed(self.saved):
            ctypes.memmove(ptr, data, len(data))
        self.saved.clear()


class _TorchRecord(TorchDispatchMode):
    def __init__(self, ops: list, memory: _Memory):
        super().__init__()
        self.ops, self.memory = ops, memory

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for i, arg in enumerate(func._schema.arguments):
            if arg.alias_info is not None and arg.alias_info.is_write:
                value = kwargs.get(arg.name, args[i] if i < len(args) and not arg.kwarg_only else None)
                for t in tree_leaves(value):
                    if isinstance(t, torch.Tensor):
                        self.memory.save_tensor(t)
        out = func(*args, **kwargs)
        self.ops.append(("torch", func, args, kwargs, out))
        return out


class ReplayGraph:
    """``captured``, ``capture(fn)`` and ``replay()`` of ``RolloutGraph``, on the CPU."""

    def __init__(self):
        self.ops: list | None = None

    @property
    def captured(self) -> bool:
        return self.ops is not None

    def capture(self, fn: Callable[[], None]) -> None:
        ops: list = []
        memory = _Memory()
        launch = host_threads.PackedLaunch.launch

        def recorded_launch(cmd: host_threads.PackedLaunch) -> None:
            memory.save_launch(cmd)
            ops.append(("warp", cmd, _bytes(cmd._args), _bytes(cmd.cmd.params[0])))
            launch(cmd)

        def unrecorded(what: str):
            def fail(*args, **kwargs):
                raise AssertionError(f"{what} inside a recorded rollout escapes the record")

            return fail

        patches = {
            (host_threads.PackedLaunch, "launch"): recorded_launch,
            (wp.Launch, "launch"): unrecorded("wp.Launch.launch"),
            (wp, "launch"): unrecorded("wp.launch"),
            (wp, "copy"): unrecorded("wp.copy"),
            (wp.array, "zero_"): unrecorded("wp.array.zero_"),
            (wp.array, "fill_"): unrecorded("wp.array.fill_"),
            (wp.array, "assign"): unrecorded("wp.array.assign"),
        }
        with _patched(patches), _TorchRecord(ops, memory):
            fn()
        memory.restore()
        self.ops = ops

    def replay(self) -> None:
        for op in self.ops:
            if op[0] == "torch":
                _, func, args, kwargs, out = op
                new = func(*args, **kwargs)
                for recorded, fresh in zip(tree_leaves(out), tree_leaves(new), strict=True):
                    if isinstance(recorded, torch.Tensor) and not _same_memory(recorded, fresh):
                        recorded.copy_(fresh)  # an op's output stays at its recorded address
            else:
                _, cmd, args, bounds = op
                now = _bytes(cmd._args), _bytes(cmd.cmd.params[0])
                _set_bytes(cmd._args, args)
                _set_bytes(cmd.cmd.params[0], bounds)
                try:
                    cmd.launch()
                finally:
                    _set_bytes(cmd._args, now[0])
                    _set_bytes(cmd.cmd.params[0], now[1])


def _same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _bytes(value: ctypes.Structure) -> bytes:
    return ctypes.string_at(ctypes.addressof(value), ctypes.sizeof(value))


def _set_bytes(value: ctypes.Structure, data: bytes) -> None:
    ctypes.memmove(ctypes.addressof(value), data, len(data))


@contextlib.contextmanager
def _patched(patches: dict):
    saved = {key: getattr(*key) for key in patches}
    for (owner, name), fn in patches.items():
        setattr(owner, name, fn)
    try:
        yield
    finally:
        for (owner, name), fn in saved.items():
            setattr(owner, name, fn)
