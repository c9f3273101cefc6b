#!/usr/bin/env python
"""What the CPU step's prefetch of the next env's rows (``sim_core/prefetch.py``) gains: the same
scene or task built twice in one process, prefetch off and on, stepped in alternating rounds.

The 2-core VMs this project measures on drift by 20-30% between processes, so the two sides share
one process and alternate; each side keeps its best and its median round, and the ratio of each is
printed (on / off). Scenes are ``bench_sim.py``'s, driven as it drives them (fresh random joint
targets every step, one host thread, 200 warm-up steps); tasks are stepped with random actions on
the default host threads.

    python scripts/bench_prefetch.py                                  # bench_sim's scenes
    python scripts/bench_prefetch.py --task WarpGym/FrankaLift-v0 WarpGym/FrankaPush-v0 --n-envs 2048
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_sim  # noqa: E402  (sets OMP_WAIT_POLICY before torch starts its threads)
import torch  # noqa: E402

import sim_core as sc  # noqa: E402
from sim_core import prefetch  # noqa: E402

OFF = 1 << 62  # a threshold no batch reaches
DEFAULT = prefetch.MIN_BYTES


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scene", nargs="+", default=["arm", "arm_cube"], choices=["arm", "arm_cube"])
    p.add_argument("--task", nargs="+", default=None, help="registered tasks instead of the scenes")
    p.add_argument("--n-envs", nargs="+", type=int, default=[1024, 4096, 16384])
    p.add_argument("--rounds", type=int, default=8, help="rounds per side")
    p.add_argument("--env-steps", type=float, default=3e5, help="env-steps per round")
    return p.parse_args(argv)


def scene_round(kind: str, n: int, steps: int):
    """A scene of ``bench_sim.py``; returns a function that times one round (env-steps/s)."""
    args = argparse.Namespace(threads=1, warmup=200)
    _scene, _start, _build, timed, _box = bench_sim.bench_sim_core(sc, n, steps, args, kind)
    return lambda: n * steps / timed()


def task_round(task: str, n: int, steps: int):
    """The task's vector env after 50 steps of random actions; one round is ``steps`` more."""
    import gymnasium as gym

    import warpgym  # noqa: F401  (registers the tasks)

    env = gym.make_vec(task, num_envs=n, device="cpu")
    env.reset(seed=0)
    g = torch.Generator().manual_seed(0)
    shape = (n, *env.single_action_space.shape)
    for _ in range(50):
        env.step(torch.rand(shape, generator=g) * 2 - 1)

    def timed() -> float:
        actions = [torch.rand(shape, generator=g) * 2 - 1 for _ in range(steps)]
        t0 = time.perf_counter()
        for a in actions:
            env.step(a)
        return n * steps / (time.perf_counter() - t0)

    return timed


def compare(make, rounds: int) -> tuple[list[float], list[float]]:
    """Rounds of the side built with prefetch off and the side built with it on, alternating."""
    sides = []
    for threshold in (OFF, 0):
        prefetch.MIN_BYTES = threshold  # read when the step's launch is recorded, at build
        sides.append(make())
    prefetch.MIN_BYTES = DEFAULT
    rates = ([], [])
    for r in range(rounds):
        for i in (0, 1) if r % 2 == 0 else (1, 0):
            rates[i].append(sides[i]())
    return rates


def main(argv=None) -> int:
    args = parse_args(argv)
    sc.init(backend=sc.cpu)
    if args.task:
        cases = [(task_round, task, n) for task in args.task for n in args.n_envs]
    else:
        torch.set_num_threads(1)  # the target draws on the step's one thread, as bench_sim --threads 1
        cases = [(scene_round, kind, n) for kind in args.scene for n in args.n_envs]
    print(f"prefetch off / on, {args.rounds} alternating rounds each (default threshold {DEFAULT} bytes)")
    print(f"{'case':>24} | {'n_envs':>6} | {'off: best':>11} | {'median':>11} | on/off best | on/off median")
    for build, name, n in cases:
        off, on = compare(functools.partial(build, name, n, max(10, int(args.env_steps / n))), args.rounds)
        b, m = max(off), statistics.median(off)
        print(
            f"{name:>24} | {n:>6} | {b:>11,.0f} | {m:>11,.0f} | {max(on) / b:>10.3f}x | "
            f"{statistics.median(on) / m:>12.3f}x",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
