#!/usr/bin/env python
"""Compile every Warp kernel the tasks and the speed benchmark run, for a CUDA GPU, without one.

Warp's wheel carries NVRTC, which compiles CUDA code on a machine with no GPU or driver. This
builds each registered task (and ``bench_sim.py``'s scenes) on the CPU, which generates their
models' step kernels, then compiles every Warp module that holds kernels (the generated steps,
the task layer, sim_core's own) for the GPU architecture ``--arch`` (``wp.compile_aot_module``)
and prints each module's result and NVRTC time. The generated source of a step is the same for
every device, so what compiles here is what ``scene.build()`` compiles on that GPU; a failure
names the module and NVRTC's message. Compiling is not running: the CUDA test suite
(``scripts/gpu_check.sh``) still has to run on the GPU.

    python scripts/cuda_compile_check.py                  # sm_90 (H100, H200)
    python scripts/cuda_compile_check.py --arch 89 --tasks WarpGym/FrankaLift-v0 --scenes
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

import gymnasium as gym
import torch
import warp as wp
from warp._src.context import user_modules

import sim_core as sc
import warpgym


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", type=int, default=90, help="CUDA compute capability as one number (90: sm_90)")
    p.add_argument("--tasks", nargs="*", default=list(warpgym.TASKS), help="task ids to build (default: all)")
    scenes = ("arm", "arm_cube", "cube_held")
    p.add_argument("--scenes", nargs="*", choices=scenes, default=list(scenes), help="bench_sim.py scenes")
    return p.parse_args(argv)


def build_models(tasks: list[str], scenes: list[str]) -> None:
    """Build (and step once) each task and scene on the CPU, so their step kernels are generated."""
    for task in tasks:
        env = gym.make_vec(task, num_envs=2, seed=0)
        env.reset(seed=0)
        env.step(torch.zeros(env.action_space.shape))
        env.close()
    if scenes:
        from bench_sim import build_scene

        for name in scenes:
            scene, _ = build_scene(sc, name, 2, threads=1)
            scene.step()


def compile_all(arch: int, prefixes: tuple[str, ...] = ("",)) -> dict[str, bool]:
    """Compile every module with kernels whose name starts with one of ``prefixes`` for
    ``sm_<arch>``; returns each module's name and whether it compiled."""
    compiled = {}
    for module in list(user_modules.values()):
        if not module.kernels or not module.name.startswith(prefixes):
            continue
        t0 = time.perf_counter()
        try:
            with tempfile.TemporaryDirectory() as out:
                wp.compile_aot_module(module, arch=arch, module_dir=out)
        except Exception as e:  # report every module, then fail
            compiled[module.name] = False
            print(f"FAILED {module.name}: {type(e).__name__}: {e}", flush=True)
            continue
        compiled[module.name] = True
        seconds = time.perf_counter() - t0
        print(f"ok     {module.name}: {len(module.kernels)} kernels, {seconds:.1f} s", flush=True)
    return compiled


def main(argv=None) -> int:
    args = parse_args(argv)
    sc.init(backend=sc.cpu)
    build_models(args.tasks, args.scenes)
    failed = [name for name, ok in compile_all(args.arch).items() if not ok]
    verdict = f"{len(failed)} failed: {', '.join(failed)}" if failed else "every module compiled"
    print(f"sm_{args.arch}: {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
