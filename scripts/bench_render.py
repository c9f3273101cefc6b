#!/usr/bin/env python
"""Rendering speed on this machine, and the task pictures in ``docs/`` (``franka_reach.png``, ...).

Times ``--frames`` (default 100) calls of ``env.render()`` for one env of ``--task`` at 320x240 (the
config's shading: no shadows, floor reflections), each after a control step with random actions, the
step excluded from the time; prints the backend (``MUJOCO_GL``) and seconds per 100 frames. With
``--png PATH`` it also saves a 640x480 picture of four envs of ``--task`` on their grid, with shadows.

    python scripts/bench_render.py
    python scripts/bench_render.py --png docs/franka_reach.png
    python scripts/bench_render.py --task WarpGym/FrankaLift-v0 --frames 10 --png docs/franka_lift.png
"""

from __future__ import annotations

import argparse
import os
import time

import gymnasium as gym
import torch

import warpgym  # noqa: F401


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="WarpGym/FrankaReach-v0")
    p.add_argument("--frames", type=int, default=100)
    p.add_argument("--width", type=int, default=320)
    p.add_argument("--height", type=int, default=240)
    p.add_argument("--png", default=None, help="also save a picture of four envs here")
    args = p.parse_args(argv)
    env = gym.make_vec(
        args.task,
        num_envs=1,
        device="cpu",
        render_mode="rgb_array",
        render={"width": args.width, "height": args.height},
    )
    env.reset(seed=0)
    env.render()  # creates the GL context
    seconds = 0.0
    for _ in range(args.frames):
        env.step(torch.rand(1, env.single_action_space.shape[0]) * 2 - 1)
        t0 = time.perf_counter()
        image = env.render()
        seconds += time.perf_counter() - t0
    print(
        f"MUJOCO_GL={os.environ.get('MUJOCO_GL', '(default)')}: {args.frames} frames of {image.shape[1]}x"
        f"{image.shape[0]} in {seconds:.2f} s ({seconds / args.frames * 1e3:.1f} ms per frame)"
    )
    env.close()
    if args.png:
        import imageio.v2 as imageio

        grid = gym.make_vec(
            args.task,
            num_envs=4,
            device="cpu",
            render_mode="rgb_array",
            render_envs_idx=[0, 1, 2, 3],
            render={"width": 640, "height": 480, "shadows": True},
        )
        grid.reset(seed=3)
        for _ in range(10):
            grid.step(torch.rand(4, grid.single_action_space.shape[0]) * 2 - 1)
        imageio.imwrite(args.png, grid.render())
        print(f"picture saved to {args.png}")
        grid.close()


if __name__ == "__main__":
    main()
