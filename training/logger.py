"""Rank 0's outputs: TensorBoard event files, the resolved config, and a live progress line."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["Logger", "format_duration"]


def format_duration(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):
        return "?"
    seconds = max(0, int(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _fmt(value: float | None, width: int, decimals: int) -> str:
    """``value`` right-aligned in ``width`` characters, or ``-`` when it is missing or NaN."""
    if value is None or value != value:
        return "-".rjust(width)
    return f"{value:{width}.{decimals}f}"


class Logger:
    """Scalars to TensorBoard under ``logdir``; ``config.json`` beside them; one progress line per
    iteration on stdout (rewritten in place on a terminal)."""

    def __init__(self, logdir: Path, config: dict[str, Any], extra: dict[str, Any] | None = None):
        from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package

        logdir.mkdir(parents=True, exist_ok=True)
        (logdir / "config.json").write_text(json.dumps({"train": config, **(extra or {})}, indent=2))
        self.writer = SummaryWriter(str(logdir))
        self.tty = sys.stdout.isatty()
        self._last_print = 0.0

    def log(
        self, it: int, env_steps: int, scalars: dict[str, float], elapsed: float, total: int, max_time_s
    ) -> None:
        for key, value in scalars.items():
            self.writer.add_scalar(key, value, env_steps)
        self.writer.add_scalar("charts/iteration", it, env_steps)
        eta = elapsed / it * (total - it) if (it and total) else float("inf")
        if max_time_s is not None:
            eta = min(eta, max(0.0, max_time_s - elapsed))
        # "-" where no episode ended this iteration (there is no return or success rate to show)
        ret = _fmt(scalars.get("charts/episode_return"), 8, 2)
        succ = _fmt(scalars.get("charts/success_rate"), 5, 2)
        line = (
            f"it {it:5d}/{total or '-'}  steps {env_steps:11,d}  "
            f"{scalars['perf/env_steps_per_s']:9,.0f} steps/s  "
            f"return {ret}  success {succ}  "
            f"elapsed {format_duration(elapsed)}  eta {format_duration(eta)}"
        )
        if self.tty:
            print("\r" + line, end="", flush=True)
        elif time.monotonic() - self._last_print > 2.0 or it == total:
            print(line, flush=True)
            self._last_print = time.monotonic()

    def log_eval(self, result: dict[str, Any]) -> None:
        """An evaluation's result (``Evaluations``): ``eval/`` scalars and a line of its own."""
        for key in ("success_rate", "mean_return"):
            self.writer.add_scalar(f"eval/{key}", result[key], result["env_steps"])
        line = (
            f"eval it {result['iteration']:5d}  steps {result['env_steps']:11,d}  "
            f"success {result['success_rate']:.3f}  return {result['mean_return']:.2f}  "
            f"({result['episodes']} episodes, {result['seconds']:.1f} s){'  best' if result['best'] else ''}"
        )
        print(("\n" if self.tty else "") + line, flush=True)

    def close(self) -> None:
        if self.tty:
            print()
        self.writer.close()
