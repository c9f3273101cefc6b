#!/usr/bin/env python
"""Train skrl's PPO on a warpgym task through the torch-native ``envs.adapters.skrl.wrap``.

pip install -e ".[adapters]"
python scripts/train_skrl.py --num-envs 1024 --timesteps 2000
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import torch
from skrl.agents.torch.ppo import PPO, PPO_CFG
from skrl.memories.torch import RandomMemory
from skrl.models.torch import DeterministicMixin, GaussianMixin, Model
from skrl.trainers.torch import SequentialTrainer

import envs  # noqa: F401
from envs.adapters.skrl import wrap


def _mlp(n_in: int, n_out: int) -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Linear(n_in, 256),
        torch.nn.ELU(),
        torch.nn.Linear(256, 128),
        torch.nn.ELU(),
        torch.nn.Linear(128, n_out),
    )


class Policy(GaussianMixin, Model):
    def __init__(self, observation_space, action_space, device):
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
        GaussianMixin.__init__(self, clip_actions=False)
        self.net = _mlp(self.num_observations, self.num_actions)
        self.log_std = torch.nn.Parameter(torch.full((self.num_actions,), -0.5))

    def compute(self, inputs, role):
        return self.net(inputs["observations"]), {"log_std": self.log_std}


class Value(DeterministicMixin, Model):
    def __init__(self, observation_space, action_space, device):
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
        DeterministicMixin.__init__(self)
        self.net = _mlp(self.num_observations, 1)

    def compute(self, inputs, role):
        return self.net(inputs["observations"]), {}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="WarpGym/FrankaReach-v0")
    p.add_argument("--num-envs", type=int, default=1024)
    p.add_argument("--device", default="cpu")
    p.add_argument("--timesteps", type=int, default=2000, help="vector steps")
    p.add_argument("--logdir", default="runs/skrl")
    args = p.parse_args(argv)
    env = wrap(gym.make_vec(args.task, num_envs=args.num_envs, device=args.device))
    models = {
        name: cls(env.observation_space, env.action_space, env.device)
        for name, cls in (("policy", Policy), ("value", Value))
    }
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
