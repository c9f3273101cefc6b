#!/usr/bin/env python
"""Train rsl_rl's PPO (``rsl-rl-lib`` 5.x ``OnPolicyRunner``) on a warpgym task through
``warpgym.adapters.rsl_rl.RslRlVecEnv``; logs and checkpoints go to ``--logdir`` (TensorBoard).

    pip install -e ".[adapters]"
    python scripts/train_rsl_rl.py --num-envs 1024 --iterations 100
    python scripts/train_rsl_rl.py --device cuda --num-envs 4096
"""

from __future__ import annotations

import argparse

import gymnasium as gym
from rsl_rl.runners import OnPolicyRunner

import warpgym  # noqa: F401
from warpgym.adapters.rsl_rl import RslRlVecEnv, runner_cfg


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="WarpGym/FrankaReach-v0")
    p.add_argument("--num-envs", type=int, default=1024)
    p.add_argument("--device", default="cpu")
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--logdir", default="runs/rsl_rl")
    args = p.parse_args(argv)
    env = RslRlVecEnv(gym.make_vec(args.task, num_envs=args.num_envs, device=args.device))
    runner = OnPolicyRunner(env, runner_cfg(), log_dir=args.logdir, device=str(env.device))
    runner.learn(num_learning_iterations=args.iterations, init_at_random_ep_len=True)


if __name__ == "__main__":
    main()
