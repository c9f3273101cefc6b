#!/usr/bin/env python
"""Digests of the final states of the stress scenes and of every task, to show that a change to
``sim_core`` or ``warpgym`` leaves results bit for bit the same on this machine and device.

Scenes: ``tests/test_contacts.py``'s random arm commands with a cube at hand (seeds 0-3, and the
full-range targets of ``bench_sim``; 250 envs x 400 steps each, the adaptive split's first and
second redo included), and each registered task stepped with random actions (256 envs, 120 steps,
through episode ends, autoresets and domain randomization). A digest is the SHA-256 of the final
``qpos``, ``qvel`` (and the task's last observations and rewards) as float32 bytes.

    python scripts/state_digest.py --save before.json      # on the old commit
    python scripts/state_digest.py --compare before.json   # on the new one: exit 1 on any difference

The generated kernels are compiled with ``-ffast-math`` and FMA fusion on the CPU
(``sim_core.step.cpu_compiler_flags``), so the compiler may schedule the same operations
differently when code merely moves (into a function of its own, say), and round-off then differs.
``--strict-fp`` compiles them without either: every operation rounds as written, in the order
written, so equal digests there show that a change keeps every operation and its order, whatever
the fast build's digests do.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import gymnasium as gym
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def _digest(*tensors: torch.Tensor) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()


def _task_digest(task: str, n: int = 256, steps: int = 120) -> str:
    env = gym.make_vec(task, num_envs=n, seed=0)
    obs, _ = env.reset(seed=0)
    g = torch.Generator().manual_seed(0)
    dim = env.single_action_space.shape[0]
    for _ in range(steps):
        action = (torch.rand(n, dim, generator=g) * 2 - 1).to(obs.device)
        obs, reward, *_ = env.step(action)
    solver = env.unwrapped.scene.sim.rigid_solver
    digest = _digest(solver.get_qpos(), solver.get_qvel(), obs, reward)
    env.close()
    return digest


def digests() -> dict[str, str]:
    from test_contacts import random_arm_stress

    import sim_core as sc
    import warpgym

    if not sc.is_initialized():
        sc.init()
    out = {}
    for seed in range(4):
        out[f"random_arm_stress seed {seed}"] = _digest(random_arm_stress(seed=seed)["state"])
        print(f"{list(out)[-1]}: {out[list(out)[-1]]}", flush=True)
    out["random_arm_stress full range"] = _digest(random_arm_stress(full_range=True)["state"])
    print(f"{list(out)[-1]}: {out[list(out)[-1]]}", flush=True)
    for task in sorted(warpgym.TASKS):
        out[task] = _task_digest(task)
        print(f"{task}: {out[task]}", flush=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--save", help="write the digests to this JSON file")
    p.add_argument("--compare", help="compare with the digests in this JSON file")
    p.add_argument("--strict-fp", action="store_true", help="build without fast-math or FMA fusion")
    args = p.parse_args(argv)
    if args.strict_fp:
        import sim_core.step

        sim_core.step.cpu_compiler_flags = lambda: "-march=native -ffp-contract=off"
    out = digests()
    if args.save:
        Path(args.save).write_text(json.dumps(out, indent=2))
    if args.compare:
        before = json.loads(Path(args.compare).read_text())
        differ = [k for k in before.keys() | out.keys() if before.get(k) != out.get(k)]
        print("bit for bit the same" if not differ else f"different: {sorted(differ)}")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
