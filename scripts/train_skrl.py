#!/usr/bin/env python
"""Train skrl's PPO on a warpgym task through the torch-native ``warpgym.adapters.skrl.wrap``.

pip install -e ".[adapters]"
python scripts/train_skrl.py --num-envs 1024 --timesteps 2000
"""

from __future__ import annotations

import argparse

import gymnasium as gym
from skrl.agents.torch.ppo import PPO, PPO_CFG
from skrl.memories.torch import RandomMemory
from skrl.trainers.torch import SequentialTrainer

import warpgym  # noqa: F401
from warpgym.adapters.skrl import default_models, wrap


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="WarpGym/FrankaReach-v0")
    p.add_argument("--num-envs", type=int, default=1024)
    p.add_argument("--device", default="cpu")
    p.add_argument("--timesteps", type=int, default=2000, help="vector steps")
    p.add_argument("--logdir", default="runs/skrl")
    args = p.parse_args(argv)
    env = wrap(gym.make_vec(args.task, num_envs=args.num_envs, device=args.device))
    models = default_models(env)
    cfg = PPO_CFG(rollouts=16, learning_epochs=5, mini_batches=4, discount_factor=0.98, learning_rate=1e-3)
    cfg.experiment.directory = args.logdir
    memory = RandomMemory(memory_size=cfg.rollouts, num_envs=env.num_envs, device=env.device)
    agent = PPO(
        models=models,
        memory=memory,
        cfg=cfg,
        observation_space=env.observation_space,
        action_space=env.action_space,
        device=env.device,
    )
    SequentialTrainer(env=env, agents=agent, cfg={"timesteps": args.timesteps, "headless": True}).train()


if __name__ == "__main__":
    main()
