"""FPS meter: completed steps per second over a window, for all envs and per env."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

__all__ = ["FPSMeter"]


class FPSMeter:
    """Counts steps and, once per window, synchronizes the device and reports the rate.

    The window opens after the first step completes, so compile time never enters a reading. A
    reading counts only finished work: the device is synchronized before the clock is read (once
    per window, not per step).
    """

    def __init__(self, n_envs: int, synchronize: Callable[[], None], interval: float = 1.0):
        self.n_envs = max(n_envs, 1)
        self.synchronize = synchronize
        self.interval = interval
        self.fps: float | None = None  # last reading, steps/s of the whole batch
        self._t0: float | None = None
        self._steps = 0

    @property
    def env_fps(self) -> float | None:
        """Last reading in env-steps per second (steps/s times the number of envs)."""
        return None if self.fps is None else self.fps * self.n_envs

    def tick(self, show: bool) -> None:
        if self._t0 is None:
            self.synchronize()
            self._t0, self._steps = time.perf_counter(), 0
            return
        self._steps += 1
        now = time.perf_counter()
        if now - self._t0 < self.interval:
            return
        self.synchronize()
        now = time.perf_counter()
        self.fps = self._steps / (now - self._t0)
        self._t0, self._steps = now, 0
        if show:
            print(
                f"[sim_core] Running at {self.fps * self.n_envs:,.0f} FPS "
                f"({self.fps:,.1f} FPS per env, {self.n_envs} envs).",
                file=sys.stderr,
                flush=True,
            )
