"""A torch-native skrl wrapper for the warpgym vector envs.

skrl's own ``wrap_env(env, wrapper="gymnasium")`` recognizes a Gymnasium vector env but is written for
NumPy envs: every step it turns the actions into a NumPy array (``untensorize_space``) and copies the
returned tensors again. On the CPU that works at the cost of those copies; on CUDA it fails, since
our env rejects NumPy actions on a GPU rather than copying them silently. ``wrap(env)`` is the same
skrl wrapper without the conversions: tensors stay on the env's device, rewards and flags come back
shaped ``(num_envs, 1)`` as skrl expects, and finished envs have already been reset (``SAME_STEP``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode
from skrl.envs.wrappers.torch.base import Wrapper
from skrl.models.torch import DeterministicMixin, GaussianMixin, Model

__all__ = ["wrap", "SkrlVecEnv", "default_models"]


class SkrlVecEnv(Wrapper):
    def __init__(self, env: gym.vector.VectorEnv):
        if env.unwrapped.metadata.get("autoreset_mode") != AutoresetMode.SAME_STEP:
            raise ValueError("env: the skrl adapter needs autoreset_mode=SAME_STEP")
        super().__init__(env)
        self._obs: torch.Tensor | None = None
        self._info: dict[str, Any] = {}

    @property
    def observation_space(self) -> gym.Space:
        return self._env.single_observation_space

    @property
    def action_space(self) -> gym.Space:
        return self._env.single_action_space

    def reset(self) -> tuple[torch.Tensor, dict[str, Any]]:
        """The first call resets every env; later calls (skrl makes one after any episode end) return
        the current observations, whose finished envs the env has already reset."""
        if self._obs is None:
            self._obs, self._info = self._env.reset()
        return self._obs, self._info

    def step(self, actions: torch.Tensor):
        obs, reward, terminated, truncated, info = self._env.step(actions)
        self._obs, self._info = obs, info
        n = self.num_envs
        return obs, reward.view(n, 1), terminated.view(n, 1), truncated.view(n, 1), info

    def state(self) -> None:
        return None

    def render(self, *args, **kwargs) -> Any:
        """The env's ``render()``: an ``(H, W, 3)`` uint8 image of its ``render_envs_idx`` with
        ``render_mode="rgb_array"``, else None (skrl's trainers call it when not headless)."""
        return self._env.render()

    def close(self) -> None:
        self._env.close()


def wrap(env: gym.vector.VectorEnv) -> SkrlVecEnv:
    """``wrap(gymnasium.make_vec("WarpGym/FrankaReach-v0", num_envs=1024))`` for skrl's agents and trainers."""
    return SkrlVecEnv(env)


def _mlp(n_in: int, hidden: tuple[int, ...], n_out: int) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for a, b in zip((n_in, *hidden), hidden, strict=False):
        layers += [torch.nn.Linear(a, b), torch.nn.ELU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(hidden[-1] if hidden else n_in, n_out))


class _Policy(GaussianMixin, Model):
    def __init__(self, observation_space, action_space, device, hidden):
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
        GaussianMixin.__init__(self, clip_actions=False)
        self.net = _mlp(self.num_observations, hidden, self.num_actions)
        self.log_std = torch.nn.Parameter(torch.full((self.num_actions,), -0.5))

    def compute(self, inputs, role):
        return self.net(inputs["observations"]), {"log_std": self.log_std}


class _Value(DeterministicMixin, Model):
    def __init__(self, observation_space, action_space, device, hidden):
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
        DeterministicMixin.__init__(self)
        self.net = _mlp(self.num_observations, hidden, 1)

    def compute(self, inputs, role):
        return self.net(inputs["observations"]), {}


def default_models(env: SkrlVecEnv, hidden: tuple[int, ...] = (256, 128, 64)) -> dict[str, Model]:
    """skrl PPO models for a wrapped env: a Gaussian MLP policy with a learned state-independent log
    std and an MLP value function (ELU), on the env's device."""
    return {
        "policy": _Policy(env.observation_space, env.action_space, env.device, hidden),
        "value": _Value(env.observation_space, env.action_space, env.device, hidden),
    }
