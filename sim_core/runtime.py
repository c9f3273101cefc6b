"""Process-wide state set by ``init()``: backend, device, seed. One small object, not module globals."""

from __future__ import annotations

import enum
import os
import random
import sys
import tempfile
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
        debug: show Warp's banner, a line per module it loads or compiles, and the C++ compiler's
            warnings; without it Warp prints only its own warnings and errors (see ``_quiet_warp``).
    """
    if _state:
        raise RuntimeError("sim_core is already initialized; call sim_core.destroy() first")
    if not isinstance(backend, Backend):
        raise InvalidValueError(f"backend: expected sc.cpu or sc.gpu, got {backend!r}")
    if precision != "32":
        raise InvalidValueError(f"precision: only '32' is implemented, got {precision!r}")
    _quiet_warp(not debug)
    _init_warp(keep_driver_warning=debug or backend is gpu)
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


_NO_DRIVER = "Could not find or load the NVIDIA CUDA driver"


def _quiet_warp(quiet: bool) -> None:
    """Warp's log level (its banner and module-load lines are info messages) and clang's ``-w``
    among the CPU compiler flags (the warnings of a module's compilation come from clang, in
    process, straight to stderr; ``-w`` changes no code, only Warp's cache key)."""
    wp.config.log_level = wp.LOG_WARNING if quiet else wp.LOG_INFO
    flags = wp.config.cpu_compiler_flags
    tokens = ("-march=native" if flags is None else flags).split()  # None means -march=native
    if quiet != ("-w" in tokens):
        tokens = [t for t in tokens if t != "-w"] + (["-w"] if quiet else [])
        wp.config.cpu_compiler_flags = " ".join(tokens)


def _init_warp(*, keep_driver_warning: bool) -> None:
    """``wp.init()``, with Warp's native warning that no CUDA driver is installed left out unless
    ``keep_driver_warning`` (a CPU run does not need one). The native library writes it to file
    descriptor 2, so that is where it is caught; everything else written there is passed on."""
    if keep_driver_warning:
        wp.init()
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            wp.init()
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            lines = caught.read().decode(errors="replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if _NO_DRIVER not in line))
            sys.stderr.flush()


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
