"""A guard for code that must never wait on the device: ``no_host_sync()`` raises ``HostSyncError`` on
any torch op that reads device memory on the host, needs a data-dependent output size, or copies host
data to the device (which a CUDA graph cannot record), and on Warp's host reads and waits. On the
CPU it proves that the same code is safe to capture on CUDA."""

from __future__ import annotations

import contextlib

import torch
import warp as wp
from torch.utils._python_dispatch import TorchDispatchMode


class HostSyncError(AssertionError):
    """An op that reads device memory on the host (or waits for the device) ran in a guarded block."""


_SYNC_OPS = {  # aten ops that need a value on the host, or an output size only the data decides
    "_local_scalar_dense",
    "item",
    "is_nonzero",
    "equal",
    "nonzero",
    "nonzero_numpy",
    "argwhere",
    "masked_select",
    "unique",
    "_unique",
    "_unique2",
    "unique_dim",
    "unique_consecutive",
    "unique_dim_consecutive",
    "repeat_interleave",
    "_assert_async",
    "bincount",
    "histc",
}


class _NoSync(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name in _SYNC_OPS:
            raise HostSyncError(f"{func} syncs with the device")
        if name in ("lift_fresh", "lift_fresh_copy"):  # torch.tensor / new_tensor of host data
            raise HostSyncError(f"{func} copies host data into a new tensor")
        if name in ("index", "index_put", "index_put_", "_index_put_impl_"):
            indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
            if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices if i is not None):
                raise HostSyncError(f"{func} with a boolean mask (its size is read on the host)")
        if name in ("copy_", "_to_copy"):  # a device-to-host copy
            src = args[1] if name == "copy_" else args[0]
            dst_device = args[0].device if name == "copy_" else kwargs.get("device", src.device)
            if (
                isinstance(src, torch.Tensor)
                and src.device.type != "cpu"
                and torch.device(dst_device).type == "cpu"
            ):
                raise HostSyncError(f"{func} copies device memory to the host")
        return func(*args, **kwargs)


@contextlib.contextmanager
def no_host_sync():
    """Raise ``HostSyncError`` on any torch op that syncs and on Warp's host reads and waits."""

    def refuse(what):
        def fail(*args, **kwargs):
            raise HostSyncError(f"{what} reads device memory on the host or waits for the device")

        return fail

    patched = {
        (wp.array, "numpy"): refuse("wp.array.numpy"),
        (wp.array, "list"): refuse("wp.array.list"),
        (wp, "synchronize"): refuse("wp.synchronize"),
        (wp, "synchronize_device"): refuse("wp.synchronize_device"),
        (wp, "synchronize_stream"): refuse("wp.synchronize_stream"),
        (torch.cuda, "synchronize"): refuse("torch.cuda.synchronize"),
        (torch.Tensor, "tolist"): refuse("Tensor.tolist"),  # host reads that bypass the dispatcher
        (torch.Tensor, "numpy"): refuse("Tensor.numpy"),
    }
    saved = {key: getattr(*key) for key in patched}
    for (owner, name), fn in patched.items():
        setattr(owner, name, fn)
    try:
        with _NoSync():
            yield
    finally:
        for (owner, name), fn in saved.items():
            setattr(owner, name, fn)
