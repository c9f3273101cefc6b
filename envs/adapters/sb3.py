"""Stable-Baselines3 ``VecEnv`` over a warpgym vector env.

SB3 wants NumPy arrays and a list of one info dict per env. The adapter converts each step's batch
once (observations, rewards, flags: one device-to-host copy each), and fills the info dicts only for
the envs whose episode ended, with what SB3 reads there:

- ``terminal_observation``: the real terminal observation (the env's ``infos["final_obs"]``);
- ``TimeLimit.truncated``: True when the episode was truncated and not terminated (SB3 bootstraps it);
- ``episode``: ``{"r", "l", "t"}`` as SB3's ``Monitor`` writes it (so the adapter counts as Monitor-
  wrapped for ``evaluate_policy`` and the logger's ``rollout/ep_rew_mean``);
- ``is_success``: the episode's success, for SB3's ``rollout/success_rate``.

The wrapped env must use ``SAME_STEP`` autoreset (SB3's convention). ``get_attr``/``set_attr``/
``env_method`` act on the one batched env, so every index sees the same attribute. ``get_images``
draws each env alone (env made with ``render_mode="rgb_array"``), which SB3's ``render()`` tiles.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvStepReturn

__all__ = ["Sb3VecEnv"]


class Sb3VecEnv(VecEnv):
    """``Sb3VecEnv(gymnasium.make_vec("WarpGym/FrankaReach-v0", num_envs=64))``."""

    def __init__(self, env: gym.vector.VectorEnv):
        base = env.unwrapped
        if base.metadata.get("autoreset_mode") != AutoresetMode.SAME_STEP:
            raise ValueError("env: Sb3VecEnv needs autoreset_mode=SAME_STEP (SB3 resets inside step)")
        self.env = env
        self.device = base.device
        self._actions: torch.Tensor | None = None
        self._start = time.time()
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)

    # ---- the VecEnv interface -------------------------------------------------------------------
    def reset(self) -> np.ndarray:
        seed = self._seeds[0]  # SB3's seed(s) gives seed + i to env i: the batched env takes the first
        options = self._options[0] or None
        obs, _ = self.env.reset(seed=seed, options=options)
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return obs.cpu().numpy()

    def step_async(self, actions: np.ndarray) -> None:
        a = torch.as_tensor(np.asarray(actions, dtype=np.float32))
        self._actions = a.to(self.device).reshape(self.num_envs, -1)

    def step_wait(self) -> VecEnvStepReturn:
        obs, reward, terminated, truncated, info = self.env.step(self._actions)
        done = terminated | truncated
        obs_np, reward_np, done_np = obs.cpu().numpy(), reward.cpu().numpy(), done.cpu().numpy()
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        ended = np.flatnonzero(done_np)
        if ended.size:
            idx = torch.as_tensor(ended, device=self.device)
            final = info["final_obs"][idx].cpu().numpy()
            time_limit = (truncated & ~terminated)[idx].cpu().numpy()
            ep = info["episode"]
            r, length, success = (ep[k][idx].cpu().numpy() for k in ("r", "l", "success"))
            elapsed = round(time.time() - self._start, 6)
            for j, i in enumerate(ended):
                infos[i] = {
                    "terminal_observation": final[j],
                    "TimeLimit.truncated": bool(time_limit[j]),
                    "episode": {"r": float(r[j]), "l": int(length[j]), "t": elapsed},
                    "is_success": bool(success[j]),
                }
        return obs_np, reward_np, done_np, infos

    def close(self) -> None:
        self.env.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        value = getattr(self.env.unwrapped, attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        if len(list(self._get_indices(indices))) != self.num_envs:
            raise ValueError("indices: the envs share one batched env; set_attr applies to all of them")
        setattr(self.env.unwrapped, attr_name, value)

    def env_method(
        self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs
    ) -> list[Any]:
        result = getattr(self.env.unwrapped, method_name)(*method_args, **method_kwargs)
        return [result for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """True for ``Monitor``: the adapter itself writes Monitor's ``episode`` info."""
        return [wrapper_class is Monitor for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        """One ``(height, width, 3)`` uint8 frame per env, each env drawn alone (SB3's contract:
        ``render()`` tiles them); with a render mode other than ``"rgb_array"``, a warning and
        ``None`` per env, as SB3's ``DummyVecEnv`` does. One frame per env costs one render each."""
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"The render mode is {self.render_mode}, but this method assumes it is `rgb_array` "
                "to obtain images.",
                stacklevel=2,
            )
            return [None for _ in range(self.num_envs)]
        base = self.env.unwrapped
        shown = base.render_envs_idx
        try:
            images = []
            for i in range(self.num_envs):
                base.render_envs_idx = [i]
                images.append(base.render())
        finally:
            base.render_envs_idx = shown
        return images
