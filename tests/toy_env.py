"""A trivially learnable torch vector env for trainer tests: move a point onto a target in the plane."""

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space


class PointEnv(gym.vector.VectorEnv):
    """obs = (position, target - position); action = velocity in [-1, 1]^2 (0.2 per step); reward
    -distance per step, +1 on success (within 0.1, terminates); truncated after ``max_episode_steps``."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, num_envs=64, *, device="cpu", seed=0, max_episode_steps=20, **_ignored):
        self.num_envs, self.device, self.max_episode_steps = num_envs, torch.device(device), max_episode_steps
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.gen = torch.Generator().manual_seed(seed)  # draws on the CPU, then moved: a toy
        dev = self.device
        self.pos = torch.zeros(num_envs, 2, device=dev)
        self.target = torch.zeros(num_envs, 2, device=dev)
        self.t = torch.zeros(num_envs, dtype=torch.int32, device=dev)
        self.ret = torch.zeros(num_envs, device=dev)

    def _reset(self, mask):
        k = int(mask.sum())
        self.pos[mask] = (torch.rand(k, 2, generator=self.gen) * 2 - 1).to(self.device)
        self.target[mask] = (torch.rand(k, 2, generator=self.gen) * 2 - 1).to(self.device)
        self.t[mask] = 0
        self.ret[mask] = 0

    def _obs(self):
        return torch.cat([self.pos, self.target - self.pos], 1)

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.gen.manual_seed(seed)
        self._reset(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        return self._obs(), {}

    def step(self, actions):
        self.pos += 0.2 * actions.clamp(-1, 1)
        d = (self.target - self.pos).norm(dim=1)
        success = d < 0.1
        reward = -d + success.float()
        self.t += 1
        self.ret += reward
        terminated = success
        truncated = (self.t >= self.max_episode_steps) & ~terminated
        done = terminated | truncated
        final = self._obs()
        info = {
            "final_obs": final,
            "_final_obs": done,
            "episode": {"r": self.ret.clone(), "l": self.t.clone(), "success": success},
            "_episode": done,
        }
        self._reset(done)
        return self._obs(), reward, terminated, truncated, info
