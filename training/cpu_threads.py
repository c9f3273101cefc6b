"""torch's intra-op threads while an env is stepped on the CPU."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["cpu_threads"]


@contextlib.contextmanager
def cpu_threads(threads: int, device: torch.device | str) -> Iterator[None]:
    """torch on ``threads`` intra-op threads inside the block when ``device`` is the CPU and
    ``threads > 0``; otherwise unchanged. The previous count is restored on exit.

    While a Warp env steps on the CPU, its host threads share the cores with torch's: after each of
    the policy's parallel ops torch's idle OpenMP workers spin on those cores and slow the env's
    step down, so the small per-step policy runs faster overall on one thread."""
    before = torch.get_num_threads()
    if torch.device(device).type == "cpu" and threads > 0:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
