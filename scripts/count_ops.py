#!/usr/bin/env python
"""Torch ops and Warp launches per ``env.step`` and per ``env.reset(options={"reset_mask": ...})``.

Every registered task is built on the CPU, warmed up, then stepped while a ``TorchDispatchMode``
counts the torch ops that reach the dispatcher (views included) and a wrapper counts Warp launches
(``wp.launch``, recorded ``wp.Launch.launch`` and ``host_threads.PackedLaunch.launch``, sim_core's
own included; a launch whose envs are shared among host threads counts once: only launches made
on the calling thread are counted, not the shares that worker threads run). The counted steps
are steps in which some envs end and reset: before each one, ``force_episode_end`` (not counted)
ends a quarter of the envs. Autoreset ``SAME_STEP`` with ``validate_actions=False`` is the trainer's
setting; the other modes and ``validate_actions=True`` are printed too. ``tests/test_task_layer.py``
holds the budgets with these counters.

    python scripts/count_ops.py                      # every task, 256 envs
    python scripts/count_ops.py --n-envs 4096 --tasks WarpGym/FrankaLift-v0 --ops
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import threading
from collections.abc import Iterator

import gymnasium as gym
import torch
import warp as wp
from torch.utils._python_dispatch import TorchDispatchMode

import warpgym
from sim_core import host_threads

__all__ = ["Counts", "count", "measure"]


class Counts(TorchDispatchMode):
    """Counts the torch ops dispatched while active (``ops``: per op name) and Warp launches."""

    def __init__(self):
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()
        self.launches = 0

    @property
    def torch_ops(self) -> int:
        return sum(self.ops.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


_active: list[Counts] = []


def _counting(fn):
    def wrapper(*args, **kwargs):
        if threading.current_thread() is threading.main_thread():
            for c in _active:
                c.launches += 1
        return fn(*args, **kwargs)

    wrapper.__wrapped__ = fn
    return wrapper


@contextlib.contextmanager
def count() -> Iterator[Counts]:
    """Count torch ops and Warp launches inside the block."""
    patched = not _active
    if patched:
        launch, recorded, packed = wp.launch, wp.Launch.launch, host_threads.PackedLaunch.launch
        wp.launch, wp.Launch.launch = _counting(launch), _counting(recorded)
        host_threads.PackedLaunch.launch = _counting(packed)
    c = Counts()
    _active.append(c)
    try:
        with c:
            yield c
    finally:
        _active.remove(c)
        if patched:
            wp.launch, wp.Launch.launch, host_threads.PackedLaunch.launch = launch, recorded, packed


def measure(task: str, n: int, mode: str, validate: bool, steps: int = 10) -> dict:
    """Counts of ``task`` (``n`` envs, autoreset ``mode``): per step and per masked reset, the mean
    (``step_ops``, ...) and the most in one call (``step_ops_max``, ...), and ``ops``, the step's
    ops by name (summed over the counted steps)."""
    env = gym.make_vec(task, num_envs=n, device="cpu", autoreset_mode=mode, validate_actions=validate)
    u = env.unwrapped
    env.reset(seed=0)
    g = torch.Generator().manual_seed(0)
    dim = env.single_action_space.shape[0]
    actions = [torch.rand(n, dim, generator=g) * 2 - 1 for _ in range(steps)]
    ends = torch.zeros(n, dtype=torch.bool)
    ends[:: max(1, min(4, n - 1))] = True  # some envs end at every step, never all
    reset_mask = ends.roll(1)

    def run(counted: bool) -> list[Counts]:
        out = []
        for i, a in enumerate(actions):
            u.force_episode_end(ends.roll(i), terminated=bool(i % 2))
            with count() as c:
                env.step(a)
            out.append(c)
        return out if counted else []

    run(False)  # warm-up: kernels compiled and loaded, launches recorded
    step = run(True)
    env.reset(options={"reset_mask": reset_mask})
    reset = []
    for _ in range(steps):
        with count() as c:
            env.reset(options={"reset_mask": reset_mask})
        reset.append(c)
    env.close()
    ops: collections.Counter[str] = collections.Counter()
    for c in step:
        ops.update(c.ops)
    return {
        "step_ops": sum(c.torch_ops for c in step) / steps,
        "step_launches": sum(c.launches for c in step) / steps,
        "step_ops_max": max(c.torch_ops for c in step),
        "step_launches_max": max(c.launches for c in step),
        "reset_ops": sum(c.torch_ops for c in reset) / steps,
        "reset_launches": sum(c.launches for c in reset) / steps,
        "reset_ops_max": max(c.torch_ops for c in reset),
        "reset_launches_max": max(c.launches for c in reset),
        "ops": ops,
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", nargs="+", default=sorted(warpgym.TASKS))
    p.add_argument("--n-envs", type=int, default=256)
    p.add_argument("--ops", action="store_true", help="also list the most frequent ops per step")
    args = p.parse_args(argv)
    settings = [("SameStep", False), ("SameStep", True), ("NextStep", False), ("Disabled", False)]
    print(f"{args.n_envs} envs on the CPU: per env.step (some envs ending in each), per masked reset;")
    print("mean and (most in one call)")
    head = ["task", "autoreset", "validate", "step: torch ops", "launches", "reset: torch ops", "launches"]
    print(f"{head[0]:26} {head[1]:9} {head[2]:8} {head[3]:>16} {head[4]:>10} {head[5]:>17} {head[6]:>10}")
    for task in args.tasks:
        for mode, validate in settings:
            r = measure(task, args.n_envs, mode, validate)
            cols = [
                f"{r[k]:g} ({r[k + '_max']})"
                for k in ("step_ops", "step_launches", "reset_ops", "reset_launches")
            ]
            name = task.removeprefix("WarpGym/")
            print(
                f"{name:26} {mode:9} {validate!s:8} {cols[0]:>16} {cols[1]:>10} {cols[2]:>17} {cols[3]:>10}",
                flush=True,
            )
            if args.ops:
                print("    " + ", ".join(f"{k} {v / 10:g}" for k, v in r["ops"].most_common(10)))


if __name__ == "__main__":
    main()
