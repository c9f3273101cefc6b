"""rsl_rl (``rsl-rl-lib`` 5.x) ``VecEnv`` over a warpgym vector env; tensors never leave the device.

rsl_rl resets finished envs inside ``step`` and wants ``dones`` plus ``extras["time_outs"]`` (the
truncations it bootstraps), observations as a ``TensorDict`` of groups (here one group, ``"policy"``,
which the runner config maps to the actor and the critic with ``obs_groups``), and per-episode
metrics under ``extras["log"]`` (keys with "/" go to TensorBoard). ``episode_length_buf`` is the env's
own counter, so ``learn(init_at_random_ep_len=True)`` staggers the episodes for real.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode
from rsl_rl.env import VecEnv
from tensordict import TensorDict

__all__ = ["RslRlVecEnv", "runner_cfg"]


class RslRlVecEnv(VecEnv):
    """``RslRlVecEnv(gymnasium.make_vec("WarpGym/FrankaReach-v0", num_envs=4096, device="cuda"))``."""

    def __init__(self, env: gym.vector.VectorEnv):
        base = env.unwrapped
        if base.metadata.get("autoreset_mode") != AutoresetMode.SAME_STEP:
            raise ValueError("env: RslRlVecEnv needs autoreset_mode=SAME_STEP (rsl_rl resets inside step)")
        self.env, self.base = env, base
        self.num_envs = env.num_envs
        self.num_actions = env.single_action_space.shape[0]
        self.max_episode_length = base.max_episode_steps
        self.device = base.device
        cfg = getattr(base, "cfg", None)
        self.cfg = dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else {}
        self._obs, _ = env.reset()

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self.base.episode_length

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.base.episode_length.copy_(value)

    def _group(self, obs: torch.Tensor) -> TensorDict:
        return TensorDict({"policy": obs}, batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> TensorDict:
        return self._group(self._obs)

    def reset(self) -> tuple[TensorDict, dict]:
        self._obs, info = self.env.reset()
        return self._group(self._obs), info

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        self._obs = obs
        ended = info["_episode"]
        count = ended.float().sum().clamp_min(1.0)
        success = (info["episode"]["success"] & ended).float().sum() / count
        extras = {"time_outs": truncated, "log": {"/episode/success_rate": success}}
        return self._group(obs), reward, terminated | truncated, extras

    def close(self) -> None:
        self.env.close()


def runner_cfg(num_steps: int = 16) -> dict:
    """A complete rsl_rl 5.x ``OnPolicyRunner`` config for the warpgym tasks: PPO with the adaptive
    learning rate, MLP actor and critic with observation normalization, and the one observation group
    (``"policy"``) feeding both."""
    mlp = {
        "class_name": "MLPModel",
        "hidden_dims": [256, 128, 64],
        "activation": "elu",
        "obs_normalization": True,
    }
    return {
        "num_steps_per_env": num_steps,
        "save_interval": 50,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": 5,
            "num_mini_batches": 4,
            "learning_rate": 1e-3,
            "schedule": "adaptive",
            "desired_kl": 0.01,
            "gamma": 0.98,
            "lam": 0.95,
            "entropy_coef": 0.003,
        },
        "actor": {**mlp, "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 0.6}},
        "critic": mlp,
    }
