#!/usr/bin/env python
"""Throughput of the Gymnasium layer: FrankaReach against raw ``scene.step()`` in the same run.

For each ``n_envs`` (default 1, 64, 1024, 4096) two things are timed, in alternating rounds
(``--repeats``, best round of each kept), after warm-up and with ``sc.synchronize()`` before the
clock starts and before it is read:

* **env**: ``gymnasium.make_vec("WarpGym/FrankaReach-v0", num_envs=n)`` (SAME_STEP autoreset, the
  default config: decimation 2) stepped with fresh uniform random actions in [-1, 1] every step,
  drawn on the device inside the timed loop. Episodes end and reset inside the timed loop.
* **raw**: a bare scene with the same model and options, driven the way the env drives it: every
  control step moves the arm's position targets by a random step of the env's ``joint_delta`` size
  (clamped to the joint ranges), holds the fingers at the env's opening, calls
  ``control_dofs_position`` once and ``scene.step()`` once (a step of ``decimation * substeps``
  substeps, as the env's scene). That is the physics the env does with none of the env's work
  (actions, observations, rewards, resets, infos).

It prints control steps per second (env-steps/s, summed over envs) of both and the env layer's cost
``1 - env / raw``. For each adapter library that is installed (Stable-Baselines3, rsl_rl, skrl) it also
steps the same task through ``warpgym.adapters`` with random actions in that library's form (NumPy for
SB3, device tensors for the others) and prints the rate and its ratio to the native env.
If ``panda-gym`` is installed (``pip install panda-gym``), it also runs its
``PandaReach-v3`` under Gymnasium's ``AsyncVectorEnv`` with ``--panda-workers`` processes (default 2)
and random actions, and prints our env's ratio to it at every size.

The script sets ``OMP_WAIT_POLICY=PASSIVE`` (unless it is set), as ``bench_sim.py`` does, so torch's
OpenMP workers sleep rather than spin on the cores the scene steps on.

    python scripts/bench_env.py                        # CPU, all sizes
    python scripts/bench_env.py --n-envs 1 64 --quick
    python scripts/bench_env.py --device cuda --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

# Before torch loads: its idle OpenMP workers would otherwise spin on a core after each parallel op
# (the raw loop's target updates, parallel from 4096 envs on) and slow that loop's next steps.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import sim_core as sc  # noqa: E402
from warpgym.franka_reach import load_reach_config  # noqa: E402
from warpgym.vector_env import resolve_device  # noqa: E402

TASK = "WarpGym/FrankaReach-v0"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n-envs", type=int, nargs="+", default=[1, 64, 1024, 4096])
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--env-steps", type=int, default=None, help="env-steps per round (default: auto)")
    p.add_argument("--repeats", type=int, default=3, help="alternating rounds; the best of each is kept")
    p.add_argument("--quick", action="store_true", help="~10x shorter rounds")
    p.add_argument("--panda-workers", type=int, default=2, help="AsyncVectorEnv workers for panda-gym")
    p.add_argument("--panda-steps", type=int, default=2000, help="vector steps of the panda-gym run")
    p.add_argument("--no-adapters", action="store_true", help="skip the SB3 / rsl_rl / skrl adapter rows")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--png", default="bench_env.png", help="plot file ('' for none)")
    return p.parse_args(argv)


def steps_for(n: int, args) -> int:
    if args.env_steps is not None:
        return max(1, math.ceil(args.env_steps / n))
    total = 20_000 if args.quick else 200_000
    return max(5, min(2000 if not args.quick else 200, math.ceil(total / n)))


def timed(fn, steps: int) -> float:
    sc.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    sc.synchronize()
    return time.perf_counter() - t0


def make_env_stepper(n: int, device: torch.device):
    env = gym.make_vec(TASK, num_envs=n, device=device)
    env.reset(seed=0)
    dim = env.single_action_space.shape[0]

    def step():
        env.step(torch.rand(n, dim, device=device) * 2.0 - 1.0)

    return step


def make_raw_stepper(n: int, device: torch.device):
    """The env's physics without the env: same model and options, the same kind of commands (arm
    targets on a random walk of the env's joint_delta step size, fingers held at the env's opening)."""
    cfg = load_reach_config()
    sim = cfg.sim
    scene = sc.Scene(  # the env's scene options: a control step is one scene step
        sim_options=sc.SimOptions(dt=sim.dt * sim.decimation, substeps=sim.substeps * sim.decimation),
        profiling_options=sc.ProfilingOptions(show_FPS=False),
    )
    scene.add_entity(sc.morphs.Plane())
    franka = scene.add_entity(sc.morphs.MJCF(file="franka_panda"))
    scene.build(n_envs=n)
    rng = torch.as_tensor(scene.mjmodel.jnt_range[:7], dtype=torch.float32, device=device)
    home = torch.tensor([*cfg.arm.default_joint_pos, cfg.arm.finger_pos, cfg.arm.finger_pos], device=device)
    targets = home.repeat(n, 1)
    franka.set_dofs_position(targets)
    scale = cfg.arm.joint_delta_scale

    def step():
        arm = targets[:, :7] + scale * (torch.rand(n, 7, device=device) * 2.0 - 1.0)
        targets[:, :7] = torch.clamp(arm, rng[:, 0], rng[:, 1])
        franka.control_dofs_position(targets)
        scene.step()

    return step


def bench_panda(args) -> float | None:
    """Env-steps/s of panda-gym's PandaReach-v3 under AsyncVectorEnv, or None if not installed."""
    try:
        import panda_gym  # noqa: F401
    except ImportError:
        return None
    vec = gym.make_vec("PandaReach-v3", num_envs=args.panda_workers, vectorization_mode="async")
    vec.reset(seed=0)
    for _ in range(20):
        vec.step(vec.action_space.sample())
    steps = args.panda_steps // (10 if args.quick else 1)
    t0 = time.perf_counter()
    for _ in range(steps):
        vec.step(vec.action_space.sample())
    seconds = time.perf_counter() - t0
    vec.close()
    return steps * args.panda_workers / seconds


def make_adapter_steppers(n: int, device: torch.device) -> dict:
    """One stepper per installed adapter library, each on its own env: random actions every step in
    the form the library passes them (NumPy for SB3, device tensors for rsl_rl and skrl)."""
    steppers = {}
    try:
        from warpgym.adapters.sb3 import Sb3VecEnv

        sb3 = Sb3VecEnv(gym.make_vec(TASK, num_envs=n, device=device))
        sb3.reset()
        dim = sb3.action_space.shape[0]
        rng = np.random.default_rng(0)
        steppers["sb3"] = lambda: sb3.step(rng.uniform(-1, 1, (n, dim)).astype(np.float32))
    except ImportError:
        pass
    try:
        from warpgym.adapters.rsl_rl import RslRlVecEnv

        rsl = RslRlVecEnv(gym.make_vec(TASK, num_envs=n, device=device))
        steppers["rsl_rl"] = lambda: rsl.step(torch.rand(n, rsl.num_actions, device=device) * 2.0 - 1.0)
    except ImportError:
        pass
    try:
        from warpgym.adapters.skrl import wrap

        sk = wrap(gym.make_vec(TASK, num_envs=n, device=device))
        sk.reset()
        dim = sk.action_space.shape[0]
        steppers["skrl"] = lambda: sk.step(torch.rand(n, dim, device=device) * 2.0 - 1.0)
    except ImportError:
        pass
    return steppers


def main(argv=None) -> None:
    args = parse_args(argv)
    dev = torch.device(args.device)
    resolve_device(dev)
    rows = []
    for n in args.n_envs:
        steppers = {"env": make_env_stepper(n, sc.device), "raw": make_raw_stepper(n, sc.device)}
        if not args.no_adapters:
            steppers.update(make_adapter_steppers(n, sc.device))
        for fn in steppers.values():  # warm-up: compile, load, first launches
            timed(fn, 3)
        steps = steps_for(n, args)
        best = dict.fromkeys(steppers, math.inf)
        for _ in range(args.repeats):  # alternate, keep each one's best round
            for name, fn in steppers.items():
                best[name] = min(best[name], timed(fn, steps))
        rate = {name: n * steps / t for name, t in best.items()}
        rows.append({"n_envs": n, "steps": steps, **rate, "cost": 1 - rate["env"] / rate["raw"]})
        print(f"n_envs={n:6d}  " + "  ".join(f"{k} {v:,.0f}/s" for k, v in rate.items()), flush=True)
    panda = bench_panda(args)
    adapters = [k for k in ("sb3", "rsl_rl", "skrl") if k in rows[0]]
    print()
    header = f"{'n_envs':>7} {'FrankaReach env-steps/s':>24} {'raw scene.step':>15} {'env cost':>9}"
    header += "".join(f" {name + ' (x env)':>22}" for name in adapters)
    if panda is not None:
        header += f" {'x panda-gym':>12}"
    print(header)
    for r in rows:
        line = f"{r['n_envs']:7d} {r['env']:24,.0f} {r['raw']:15,.0f} {r['cost']:9.1%}"
        line += "".join(f" {r[a]:13,.0f} ({r[a] / r['env']:4.2f})" for a in adapters)
        if panda is not None:
            line += f" {r['env'] / panda:12.1f}"
        print(line)
    if panda is None:
        print("panda-gym not installed: pip install panda-gym to add PandaReach-v3 under AsyncVectorEnv")
    else:
        workers = args.panda_workers
        print(f"panda-gym PandaReach-v3, AsyncVectorEnv with {workers} workers: {panda:,.0f} env-steps/s")
    print(f"device {sc.device}; control steps at 1/{load_reach_config().sim.decimation} of the physics rate")
    if args.png:
        from _plots import throughput_png

        names = {
            "env": "FrankaReach (native)",
            "raw": "raw scene.step",
            **{a: f"via {a} adapter" for a in adapters},
        }
        series = {label: [r[key] for r in rows] for key, label in names.items()}
        hlines = {f"panda-gym PandaReach-v3 ({args.panda_workers} workers)": panda} if panda else None
        throughput_png(
            args.png, [r["n_envs"] for r in rows], series, f"FrankaReach env layer, {sc.device}", hlines
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": str(sc.device), "rows": rows, "panda_gym": panda}, f, indent=2)


if __name__ == "__main__":
    main()
