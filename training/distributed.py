"""Process set-up for one device per process, alone or as a ``torchrun`` rank under DDP.

Under ``torchrun`` (``WORLD_SIZE > 1``): the rank's device is ``cuda:{LOCAL_RANK mod visible GPUs}``
(so a launcher that pins one GPU per process with ``CUDA_VISIBLE_DEVICES`` works too) with NCCL, or the
CPU with gloo when there is no GPU or ``--device cpu`` was asked for. Collectives time out (default
300 s, ``WARPGYM_DIST_TIMEOUT``) so a rank that dies cannot hang the others forever; ``torchrun``
itself also stops every rank when one fails.
"""

from __future__ import annotations

import datetime
import os
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

__all__ = ["Context", "setup", "teardown", "all_reduce_sum", "is_distributed"]


@dataclass(frozen=True)
class Context:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def setup(device: str | None) -> Context:
    """Choose this process's device and, under torchrun, join the process group."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    want_cuda = torch.cuda.is_available() if device is None else torch.device(device).type == "cuda"
    if want_cuda and not torch.cuda.is_available():
        raise RuntimeError(f"device: {device!r} asked for, but torch sees no CUDA device")
    if want_cuda:
        index = torch.device(device).index if device and world == 1 else None
        dev = torch.device("cuda", index if index is not None else local % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    else:
        dev = torch.device("cpu")
    if world > 1 and not is_distributed():
        timeout = datetime.timedelta(seconds=float(os.environ.get("WARPGYM_DIST_TIMEOUT", "300")))
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo", timeout=timeout)
    return Context(rank, world, local, dev)


def teardown() -> None:
    """Leave the process group together: a rank that tears its connections down while another is
    still in a collective makes gloo abort that rank.

    Then release the GIL for a moment: gloo's worker thread frees each finished collective's work
    (the barrier's, holding the collectives before it) after the caller has returned from it, and
    dropping the work's tensors takes the GIL. A process that reaches interpreter shutdown before
    that thread got the GIL aborts ("terminate called without an active exception", the worker
    thread exiting inside a destructor); a rank exits a few milliseconds after this call, less
    than the interpreter's 5 ms switch interval after which a waiting thread gets the GIL."""
    if is_distributed():
        dist.barrier()
        dist.destroy_process_group()
        time.sleep(0.05)


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum ``t`` over ranks in place (a no-op in a single process)."""
    if is_distributed():
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t
