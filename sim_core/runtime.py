"""Process-wide state set by ``init()``: backend, device, seed. One small object, not module globals."""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass

import numpy as np
import torch
import warp as wp

from .errors import InvalidValueError, NotInitializedError

__all__ = ["Backend", "cpu", "gpu", "init", "destroy", "is_initialized", "current", "synchronize"]


class Backend(enum.Enum):
    CPU = "cpu"
    GPU = "cuda"


cpu = Backend.CPU
gpu = Backend.GPU


@dataclass(frozen=True)
class Runtime:
    backend: Backend
    device: torch.device  # where every tensor the API returns lives
    wp_device: str  # the same device named for Warp ("cpu", "cuda:0", ...)
    seed: int | None
    precision: str


_state: list[Runtime] = []  # empty before init(); one entry after


def init(
    backend: Backend = cpu,
    *,
    seed: int | None = None,
    precision: str = "32",
    device: str | torch.device | None = None,
    debug: bool = False,
) -> None:
    """Initialize sim_core: choose the backend (``sc.cpu`` or ``sc.gpu``) and seed the host RNGs.

    Args:
        backend: ``sc.cpu`` or ``sc.gpu`` (CUDA).
        seed: seeds Python's, NumPy's and torch's generators when given.
        precision: ``"32"`` (float32 state; the only precision implemented).
        device: a specific device of the backend, e.g. ``"cuda:1"``; default: the first one.
        debug: print Warp's compile/load messages.
    """
    if _state:
        raise RuntimeError("sim_core is already initialized; call sim_core.destroy() first")
    if not isinstance(backend, Backend):
        raise InvalidValueError(f"backend: expected sc.cpu or sc.gpu, got {backend!r}")
    if precision != "32":
        raise InvalidValueError(f"precision: only '32' is implemented, got {precision!r}")
    wp.config.quiet = not debug
    wp.init()
    if backend is gpu:
        if not wp.is_cuda_available():
            raise RuntimeError("backend=sc.gpu: Warp finds no CUDA device on this machine")
        dev = torch.device(device if device is not None else "cuda:0")
        if dev.type != "cuda":
            raise InvalidValueError(f"device: backend sc.gpu needs a cuda device, got {device!r}")
        dev = torch.device("cuda", dev.index or 0)
        wp_dev = f"cuda:{dev.index}"
    else:
        if device is not None and torch.device(device).type != "cpu":
            raise InvalidValueError(f"device: backend sc.cpu needs the cpu device, got {device!r}")
        dev, wp_dev = torch.device("cpu"), "cpu"
    if seed is not None:
        random.seed(seed)
        np.random.seed(seed % 2**32)  # noqa: NPY002 (seeding the global generator is the point)
        torch.manual_seed(seed)
    _state.append(Runtime(backend, dev, wp_dev, seed, precision))


def destroy() -> None:
    """Forget the runtime set by ``init()`` (scenes built before stay usable until collected)."""
    _state.clear()


def is_initialized() -> bool:
    return bool(_state)


def current() -> Runtime:
    if not _state:
        raise NotInitializedError("call sim_core.init(backend=...) first")
    return _state[0]


def synchronize() -> None:
    """Wait until all work queued on the sim_core device has finished."""
    wp.synchronize_device(current().wp_device)
