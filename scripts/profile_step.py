#!/usr/bin/env python
"""Where the CPU step kernel's time goes: by stage of the step, and by contact-solver function.

Runs a task with random actions, or with a checkpoint's policy plus Gaussian exploration noise (the
states training visits), or one of ``bench_sim.py``'s scenes driven as it drives them (fresh random
joint targets every step), samples the process with Linux ``perf`` and maps the samples in the
generated step kernel to its stages and to the Warp functions inlined into it.

    python scripts/profile_step.py --task WarpGym/FrankaLift-v0
    python scripts/profile_step.py --checkpoint runs/lift/checkpoints/last.pt --n-envs 1024
    python scripts/profile_step.py --scene arm_cube --n-envs 16384
    python scripts/profile_step.py --scene cube_held   # the pads hold the cube: a grasp's contacts

Needs ``perf`` and binutils (``objdump``, ``addr2line``). The generated kernels are compiled once more
with line tables (``-debug-info-kind=line-tables-only``, otherwise the same flags; Warp caches them
under their own hash). Warp's CPU loader places the object's code section in one piece, so a
sample's address less the step kernel's entry point gives its offset in the object; ``addr2line``
turns it into the chain of inlined functions and the generated C++ line, whose ``<L n>`` comment
names the line of the generated Python, and the nearest ``# ---- stage`` comment above that line
names the stage. Functions Warp does not inline (the narrow phase's large pair functions) carry no
caller and are listed under their own names. The figures are shares of the samples in the step
kernel's module and, for the stages, CPU time per env-step (ns, over every thread that ran the
step), which compares batch sizes. Last, the contact load of the driven states: contacts per env,
the contact solver's rounds, and the shares of envs its warm start already solves and of split
steps.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import torch

import sim_core as sc
import sim_core.step
import warpgym  # noqa: F401  (registers the tasks)

LINE_TABLES = " -debug-info-kind=line-tables-only -dwarf-version=4"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="WarpGym/FrankaLift-v0", help="ignored with --checkpoint (its task)")
    p.add_argument("--checkpoint", help="drive the env with this checkpoint's policy (plus --noise)")
    scenes = ("arm", "arm_cube", "cube_held")
    p.add_argument("--scene", choices=scenes, help="a bench_sim.py scene instead of a task")
    p.add_argument("--noise", type=float, default=0.3, help="std of the Gaussian added to the policy's actions")
    p.add_argument("--n-envs", type=int, default=1024)
    p.add_argument("--warmup-steps", type=int, default=60, help="env steps before sampling starts")
    p.add_argument("--seconds", type=float, default=10.0, help="sampling time")
    p.add_argument("--frequency", type=int, default=1999, help="perf samples per second")
    p.add_argument("--top", type=int, default=12, help="rows per table")
    return p.parse_args(argv)


def task_driver(args):
    """The task's solver, one env step per call (after ``--warmup-steps`` of them), a label, and the
    steps over which to count the contact load: an episode's (the envs start their episodes
    together, so fewer steps would see some phases of an episode only)."""
    env, policy = make_env(args)
    obs = [env.reset(seed=0)[0]]

    def advance():
        obs[0] = env.step(policy(obs[0]))[0]

    for _ in range(args.warmup_steps):
        advance()
    driven = f"policy of {args.checkpoint}" if args.checkpoint else "random actions"
    label = f"{env.spec.id if env.spec else args.task}, {driven}"
    return env.unwrapped.scene.sim.rigid_solver, advance, label, env.unwrapped.max_episode_steps


def scene_driver(args):
    """A ``bench_sim.py`` scene's solver, one step per call with fresh random joint targets (on one
    host thread, as ``bench_sim.py`` runs it by default; after its warm-up), a label and the steps
    over which to count the contact load."""
    from bench_sim import build_scene, drive, warm_up

    torch.manual_seed(0)
    scene, franka = build_scene(sc, args.scene, args.n_envs, threads=1)
    advance = warm_up(scene, franka, drive(args.scene, scene.mjmodel, 200), args.n_envs, sc.device)
    return scene.sim.rigid_solver, advance, f"scene {args.scene}, random joint targets", CONTACT_LOAD_STEPS


def make_env(args) -> tuple[gym.vector.VectorEnv, object]:
    """The env and a policy (observations -> actions in [-1, 1])."""
    g = torch.Generator().manual_seed(0)
    if args.checkpoint is None:
        env = gym.make_vec(args.task, num_envs=args.n_envs, seed=0)
        dim = env.single_action_space.shape[0]
        return env, lambda obs: torch.rand(args.n_envs, dim, generator=g) * 2 - 1

    from warpgym.training.checkpoint import load_checkpoint
    from warpgym.training.config import RunSpec, TrainConfig, from_dict
    from warpgym.training.models import ActorCritic
    from warpgym.training.normalizer import ObsNormalizer
    from warpgym.training.runner import make_env as make_run_env

    ckpt = load_checkpoint(args.checkpoint)
    saved = ckpt["spec"]
    train = from_dict(TrainConfig, saved["train"], "train")
    spec = RunSpec(saved["task"], saved["config_file"], saved["env_overrides"], train)
    env = make_run_env(spec, args.n_envs, torch.device("cpu"), 0)
    obs_dim, act_dim = env.single_observation_space.shape[0], env.single_action_space.shape[0]
    model = ActorCritic(obs_dim, act_dim, train.policy)
    model.load_state_dict(ckpt["model"])
    normalizer = ObsNormalizer(obs_dim, enabled=train.ppo.normalize_obs)
    normalizer.load_state_dict(ckpt["normalizer"])

    @torch.inference_mode()
    def policy(obs):
        a = model.actor(normalizer(obs))
        return (a + args.noise * torch.randn(a.shape, generator=g)).clamp(-1.0, 1.0)

    return env, policy


def step_kernel_location(solver) -> tuple[int, Path, Path]:
    """The step kernel's entry point in memory, its module's object file and the generated Python."""
    kernel = solver.kernels.step
    module_exec = next(iter(kernel.module.execs.values()))
    entry = ctypes.cast(module_exec.get_kernel_hooks(kernel).forward, ctypes.c_void_p).value
    return entry, Path(module_exec.binary_path), Path(solver.kernels.module.__file__)


def sample(advance, n_envs: int, seconds: float, frequency: int, out: Path) -> tuple[float, int]:
    """Calls ``advance`` for ``seconds`` under ``perf record``; returns env-steps/s and env-steps."""
    perf = subprocess.Popen(
        ["perf", "record", "-q", "-F", str(frequency), "-p", str(os.getpid()), "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # perf attaches
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        advance()
        steps += 1
    rate = steps * n_envs / (time.perf_counter() - t0)
    perf.send_signal(signal.SIGINT)
    perf.wait()
    return rate, steps * n_envs


def symbol_offsets(obj: Path) -> tuple[dict[str, int], int]:
    """Offsets of the functions in the object's code section, and where its last function ends."""
    out, end = {}, 0
    for line in subprocess.run(
        ["objdump", "-t", str(obj)], capture_output=True, text=True, check=True
    ).stdout.splitlines():
        f = line.split()
        if len(f) >= 6 and f[2] == "F" and "text" in f[3]:
            out[f[-1]] = int(f[0], 16)
            end = max(end, int(f[0], 16) + int(f[4], 16))
    return out, end


def _name(fn: str) -> str:
    """A function of the generated C++ as the Warp function it came from: ``_solve_normals_21(...)``
    -> ``_solve_normals``; the kernel's own body -> ``kernel``."""
    fn = fn.split("(")[0].split("<")[0].split()[-1].rsplit("::", 1)[-1]
    if re.match(r"^\w+_[0-9a-f]{8}_cpu_kernel_forward$", fn):
        return "kernel"
    return re.sub(r"(_[0-9a-f]{8})?(_\d+)?$", "", fn)


def inline_chains(obj: Path, offsets: list[int]) -> dict[int, list[tuple[str, int | None]]]:
    """For each offset, its inline chain, innermost first: (function, line of the generated C++)."""
    text = subprocess.run(
        ["addr2line", "-e", str(obj), "-f", "-i", "-a", "-C"],
        input="\n".join(hex(o) for o in offsets),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    chains, cur, i = {}, None, 0
    while i < len(text):
        if text[i].startswith("0x"):
            cur = int(text[i], 16)
            chains[cur] = []
            i += 1
            continue
        m = re.search(r":(\d+)", text[i + 1])
        chains[cur].append((_name(text[i]), int(m.group(1)) if m else None))
        i += 2
    return chains


def stage_of_lines(cpp: Path, py: Path) -> list[str]:
    """For each line of the generated C++, the stage of the generated Python line it comes from."""
    stages, current = [], "?"
    for line in py.read_text().splitlines():
        m = re.match(r"^\s+# ---- ([^:]+):", line)
        current = m.group(1) if m else current
        stages.append(current)
    out, current = [], "?"
    for line in cpp.read_text().splitlines():
        m = re.search(r"<L (\d+)>\s*$", line)
        if m and int(m.group(1)) <= len(stages):
            current = stages[int(m.group(1)) - 1]
        out.append(current)
    return out


BREAKDOWNS = ("solve_contacts", "_solve_normals")  # functions whose samples are split by their callee


def report(counts: dict[int, int], chains, stage_at: list[str], top: int, ns_per_sample: float) -> None:
    """The tables; ``ns_per_sample``: CPU time per env-step that one sample stands for."""
    total = sum(counts.values())
    by_stage, contacts = collections.Counter(), collections.Counter()
    callees = {f: collections.Counter() for f in BREAKDOWNS}
    for off, c in counts.items():
        chain = chains.get(off) or [("?", None)]
        names = [n for n, _ in chain]
        outer, line = chain[-1]
        for f, table in callees.items():
            if f in names:
                i = names.index(f)
                table[names[i - 1] if i > 0 else f"{f} itself"] += c
        if outer != "kernel":
            by_stage[f"{outer} (not inlined)"] += c
            continue
        stage = stage_at[line - 1] if line and line <= len(stage_at) else "?"
        by_stage[stage] += c
        if stage == "contacts":
            called = names[-2] if len(names) > 1 else "kernel"
            known = ("solve_contacts", "start_row", "idle_row", "copy_contacts")
            contacts[called if called in known else "rows (the generated J, A^-1 J^T, W)"] += c
    tables = [
        ("the step kernel's module, by stage", by_stage),
        ("the contacts stage, by the function it calls", contacts),
    ]
    tables += [(f"{f}, by the function it calls", table) for f, table in callees.items()]
    for title, table in tables:
        per_env = table is by_stage
        print(f"\n{title} (share of the module's samples{', ns per env-step' if per_env else ''}):")
        for k, v in table.most_common(top):
            print(f"  {v / total:6.1%}  {f'{v * ns_per_sample:6.0f}  ' if per_env else ''}{k}")


CONTACT_LOAD_STEPS = 20  # steps of a scene over which the contact load is counted


def contact_load(solver, advance, steps: int = CONTACT_LOAD_STEPS) -> str:
    """Over ``steps`` more steps: contacts per env, the contact solver's rounds in a step's last
    substep (``get_solver_rounds``), the share of envs whose warm start already solved their
    contacts (0 rounds) and of steps redone in finer substeps (``get_step_splits``)."""
    try:
        solver.get_contacts()
    except sc.InvalidValueError:  # no colliding geom pairs, or collision off
        return "no contacts"
    contacts = rounds = idle = split = 0.0
    for _ in range(steps):
        advance()
        contacts += solver.get_contacts()["valid_mask"].sum(-1).float().mean().item()
        r = solver.get_solver_rounds()
        rounds += r.float().mean().item()
        idle += (r == 0).float().mean().item()
        split += (solver.get_step_splits() > 1).float().mean().item()
    return (
        f"{contacts / steps:.1f} contacts per env, {rounds / steps:.1f} solver rounds per substep, "
        f"{idle / steps:.0%} of envs solved by their warm start, {split / steps:.1%} of steps split"
    )


def main(argv=None) -> int:
    args = parse_args(argv)
    flags = sim_core.step.cpu_compiler_flags
    sim_core.step.cpu_compiler_flags = lambda: flags() + LINE_TABLES
    torch.set_num_threads(1)
    sc.init(backend=sc.cpu)
    solver, advance, label, load_steps = (scene_driver if args.scene else task_driver)(args)
    entry, obj, py = step_kernel_location(solver)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        rate, env_steps = sample(advance, args.n_envs, args.seconds, args.frequency, data)
        ips = subprocess.run(
            ["perf", "script", "-i", str(data), "-F", "ip"], capture_output=True, text=True, check=True
        )
    symbols, size = symbol_offsets(obj)
    base = entry - next(
        off for name, off in symbols.items() if name.startswith("step_") and name.endswith("_cpu_forward")
    )
    samples = [int(x, 16) - base for x in ips.stdout.split()]
    counts = collections.Counter(o for o in samples if 0 <= o < size)
    module = sum(counts.values())
    ns_per_sample = 1e9 / args.frequency / env_steps
    print(
        f"{label}, {args.n_envs} envs: {rate:,.0f} env-steps/s while sampled; "
        f"{module / max(len(samples), 1):.1%} of {len(samples)} samples in the step kernel's module, "
        f"{module * ns_per_sample:,.0f} ns per env-step"
    )
    chains = inline_chains(obj, sorted(counts))
    cpp = obj.with_name(obj.name.split(".cpu")[0] + ".cpp")
    report(counts, chains, stage_of_lines(cpp, py), args.top, ns_per_sample)
    print(f"\ncontact load over {load_steps} more steps: {contact_load(solver, advance, load_steps)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
