"""``SingleEnv``: one env of a batched task as a plain ``gymnasium.Env`` with NumPy arrays.

This is what ``gymnasium.make("WarpGym/...")`` returns: a vector env with ``num_envs=1`` and autoreset
``DISABLED`` underneath, so it passes ``gymnasium.utils.env_checker.check_env`` and works with
single-env wrappers (``RecordVideo``, ``TimeLimit``, ...). For speed use ``gymnasium.make_vec``.
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

import sim_core as sc

from .vector_env import WarpVectorEnv

__all__ = ["SingleEnv"]


def _load(task: str | type[WarpVectorEnv]) -> type[WarpVectorEnv]:
    if isinstance(task, str):
        module, _, name = task.partition(":")
        return getattr(importlib.import_module(module), name)
    return task


class SingleEnv(gym.Env):
    """One env of ``task`` (a ``WarpVectorEnv`` subclass or ``"module:Class"``); ``kwargs`` go to it.

    The device defaults to the one sim_core already runs on in this process, else the CPU (NumPy
    arrays live there anyway).
    """

    def __init__(self, task: str | type[WarpVectorEnv], *, device: str | None = None, **kwargs: Any):
        kwargs.pop("num_envs", None)
        if device is None:
            device = sc.device if sc.is_initialized() else "cpu"
        kwargs["autoreset_mode"] = AutoresetMode.DISABLED
        self.vector_env = _load(task)(num_envs=1, device=device, **kwargs)
        self.observation_space = self.vector_env.single_observation_space
        self.action_space = self.vector_env.single_action_space
        self.metadata = {k: v for k, v in self.vector_env.metadata.items() if k != "autoreset_mode"}
        self.render_mode = self.vector_env.render_mode

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        obs, info = self.vector_env.reset(seed=seed, options=options)
        return _np(obs[0]), _single_info(info)

    def step(self, action):
        a = torch.as_tensor(np.asarray(action, dtype=np.float32), device=self.vector_env.device)
        obs, reward, terminated, truncated, info = self.vector_env.step(a.reshape(1, -1))
        return _np(obs[0]), float(reward[0]), bool(terminated[0]), bool(truncated[0]), _single_info(info)

    def render(self):
        """The env's image, ``(H, W, 3)`` uint8, with ``render_mode="rgb_array"``."""
        return self.vector_env.render()

    def close(self) -> None:
        self.vector_env.close()


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().copy()


def _single_info(info: dict[str, Any]) -> dict[str, Any]:
    """Row 0 of a vector info dict, keeping only the keys whose ``_key`` mask is set."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if key.startswith("_") or key in ("final_obs", "final_info"):
            continue
        mask = info.get(f"_{key}")
        if mask is not None and not bool(mask[0]):
            continue
        if isinstance(value, dict):
            out[key] = {k: _item(v[0]) for k, v in value.items() if not k.startswith("_")}
        else:
            out[key] = _item(value[0])
    return out


def _item(v: torch.Tensor) -> Any:
    return v.item() if v.ndim == 0 else _np(v)
