"""``WarpVectorEnv``: the Gymnasium ``VectorEnv`` base of every task, over one batched ``sim_core`` scene.

Everything the env returns is a torch tensor on the simulator's device (observations and rewards
float32, terminations and truncations bool, info entries with Gymnasium's ``_key`` masks). Finished
envs are reset in place through ``envs_idx`` masks, never by rebuilding, and every reset draws fresh
randomness from per-env streams (``rng.EnvRNG``).

Autoreset follows Gymnasium 1.x's ``AutoresetMode`` (https://farama.org/Vector-Autoreset-Mode):

- ``SAME_STEP`` (default): an env that finishes in ``step`` is reset in that call; the returned
  observation is its new episode's first one; ``infos["final_obs"]`` (``(num_envs, *obs_shape)``,
  valid where ``infos["_final_obs"]``) holds the terminal observation and ``infos["final_info"]`` the
  terminal step's info. Step info keys at the top level are masked out for the reset envs.
- ``NEXT_STEP``: an env that finished is reset by the next ``step``, which ignores its action and
  returns its first observation with reward 0 and both flags False.
- ``DISABLED``: nothing is reset automatically; ``reset(options={"reset_mask": mask})`` resets exactly
  the masked envs and returns every env's current observation.

Every finished episode adds ``infos["episode"] = {"r", "l", "success", "success_once", "sim_error"}``
with the mask ``infos["_episode"]`` (``sim_error``: the episode was cut short because the env's
state went non-finite or overflowed its contact budget; it is then truncated and reset alone).
Actions outside the action space are clipped to it; actions of the wrong shape,
device or dtype, or containing NaN/inf, raise ``ValueError``/``TypeError`` before anything changes.

Subclasses build the scene and implement ``_reset_envs``, ``_apply_action``, ``_observe`` and
``_evaluate`` (see their docstrings).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

import sim_core as sc

from .render import Marker, RenderConfig, SceneRenderer
from .rng import EnvRNG

__all__ = ["WarpVectorEnv", "resolve_device", "masked_assign"]

_RESET_STREAM, _STEP_STREAM = 1, 2


def resolve_device(device: str | torch.device | None) -> torch.device:
    """Initialize ``sim_core`` on ``device`` if needed and return it; one device per process.

    ``None`` means the device ``sim_core`` already uses, else CUDA when available, else the CPU.
    """
    if sc.is_initialized():
        current = sc.device
        if device is not None and _same_device(torch.device(device), current) is False:
            raise ValueError(
                f"device: sim_core already runs on {current} in this process and a process drives one "
                f"device; got {device!r} (run one process per GPU, see scripts/multi_gpu.py)"
            )
        return current
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device: expected 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    sc.init(backend=sc.gpu if dev.type == "cuda" else sc.cpu, device=dev)
    return sc.device


def masked_assign(buf: torch.Tensor, mask: torch.Tensor, value: torch.Tensor | float) -> None:
    """``buf[mask] = value`` in place without a device sync; ``value`` is a scalar, a row
    broadcastable to ``buf[0]``, or a full ``(num_envs, ...)`` tensor whose masked rows are taken."""
    full = isinstance(value, torch.Tensor) and value.ndim == buf.ndim and value.shape[0] == buf.shape[0]
    if buf.device.type == "cpu":  # rows by index: cost follows the rows written
        idx = torch.nonzero(mask).reshape(-1)
        buf[idx] = value[idx] if full else value
    else:
        m = mask.reshape((-1,) + (1,) * (buf.ndim - 1))
        buf.copy_(torch.where(m, value, buf))


def _same_device(a: torch.device, b: torch.device) -> bool:
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


class WarpVectorEnv(gym.vector.VectorEnv):
    """Base class of the batched tasks (see the module docstring for the contract).

    Args:
        num_envs: number of envs simulated together (>= 1).
        device: "cpu", "cuda" or "cuda:N" (None: see ``resolve_device``).
        max_episode_steps: time limit in control steps; reaching it is a truncation.
        autoreset_mode: an ``AutoresetMode`` or its string value.
        seed: seed of the per-env random streams (``reset(seed=...)`` reseeds); None: fresh entropy.
        validate_actions: check actions for NaN/inf in ``step`` (one device read per step on CUDA).
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": ["rgb_array"]}

    def __init__(
        self,
        num_envs: int,
        *,
        device: str | torch.device | None,
        max_episode_steps: int,
        autoreset_mode: AutoresetMode | str,
        seed: int | None,
        validate_actions: bool = True,
    ):
        if isinstance(num_envs, bool) or int(num_envs) != num_envs or num_envs < 1:
            raise ValueError(f"num_envs: expected an integer >= 1, got {num_envs!r}")
        if int(max_episode_steps) != max_episode_steps or max_episode_steps < 1:
            raise ValueError(f"max_episode_steps: expected an integer >= 1, got {max_episode_steps!r}")
        try:
            mode = AutoresetMode(autoreset_mode)
        except ValueError:
            modes = [m.value for m in AutoresetMode]
            raise ValueError(
                f"autoreset_mode: expected an AutoresetMode or one of {modes}, got {autoreset_mode!r}"
            ) from None
        self.num_envs = int(num_envs)
        self.device = resolve_device(device)
        self.max_episode_steps = int(max_episode_steps)
        self.autoreset_mode = mode
        self.metadata = {**type(self).metadata, "autoreset_mode": mode}
        self.validate_actions = validate_actions
        if seed is None:  # as Gymnasium: unseeded means fresh entropy; pass a seed to repeat a run
            seed = int(np.random.SeedSequence().entropy % (2**62))
        self.rng = EnvRNG(self.num_envs, self.device, seed)
        n, dev = self.num_envs, self.device
        self.episode_length = torch.zeros(n, dtype=torch.int32, device=dev)  # control steps so far
        self.episode_return = torch.zeros(n, dtype=torch.float32, device=dev)
        self.episode_success_once = torch.zeros(n, dtype=torch.bool, device=dev)
        self._reset_count = torch.zeros(n, dtype=torch.int32, device=dev)  # counter of the reset stream
        self._step_count = torch.zeros(n, dtype=torch.int32, device=dev)  # counter of the step stream
        self._pending = torch.zeros(n, dtype=torch.bool, device=dev)  # finished, not yet reset
        self._forced = torch.zeros(n, dtype=torch.int8, device=dev)  # 1: terminate, 2: truncate next step
        self._all = torch.ones(n, dtype=torch.bool, device=dev)
        self._none = torch.zeros(n, dtype=torch.bool, device=dev)
        self._obs: torch.Tensor | None = None
        self._reset_draws = self._step_draws = None  # recorded on first use (sizes set by the task)

    def _set_spaces(self, obs_dim: int, act_dim: int) -> None:
        """Box observation (unbounded) and action ([-1, 1]) spaces, float32, single and batched."""
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (act_dim,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    # ---- what a task implements ------------------------------------------------------------------
    def _reset_envs(self, mask: torch.Tensor, noise: torch.Tensor) -> None:
        """Re-randomize the envs where ``mask (num_envs,)`` is True, through ``envs_idx=mask``.

        ``noise`` is ``(num_envs, reset_noise_dim)`` uniform [0, 1) draws of each env's reset stream.
        """
        raise NotImplementedError

    reset_noise_dim = 0  # uniform numbers a reset draws per env
    step_noise_dim = 0  # uniform numbers an observation draws per env (observation noise)

    def _apply_action(self, action: torch.Tensor) -> None:
        """Turn clipped actions ``(num_envs, act_dim)`` into controls and advance the physics."""
        raise NotImplementedError

    def _observe(self, noise: torch.Tensor) -> torch.Tensor:
        """Observations ``(num_envs, obs_dim)`` float32 of the current state; ``noise`` as in reset."""
        raise NotImplementedError

    def _evaluate(self, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """``(reward, terminated, success, info)`` after a step: ``(num_envs,)`` float32, bool, bool, and a
        dict of ``(num_envs, ...)`` tensors (step info)."""
        raise NotImplementedError

    # ---- Gymnasium API ------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset every env, or with ``options={"reset_mask": mask}`` only the masked ones.

        ``seed`` reseeds every env's streams (and the counters), so everything that follows repeats.
        Returns ``(obs, infos)``; ``infos`` is empty.
        """
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if options:
            raise ValueError(f"options: unknown keys {sorted(options)}; known: ['reset_mask']")
        if seed is not None:
            self.rng.reseed(seed)
            self._reset_count.zero_()
            self._step_count.zero_()
        if mask is None:
            mask = self._all
        else:
            mask = self._check_mask(mask)
        self._reset_masked(mask)
        self._pending &= ~mask
        self._forced.masked_fill_(mask, 0)
        obs = self._observe(self._step_noise())
        self._obs = obs if self._obs is None else torch.where(mask[:, None], obs, self._obs)
        return self._obs, {}

    def step(self, actions):
        """Advance every env by one control step; see the module docstring for autoreset."""
        action = self._check_action(actions)
        pending = self._pending if self.autoreset_mode == AutoresetMode.NEXT_STEP else self._none
        self._apply_action(action)
        self._step_count += 1
        noise = self._step_noise()  # one draw per step, also for the observation after a reset
        obs = self._observe(noise)
        reward, terminated, success, step_info = self._evaluate(action)
        error = self.scene.sim.rigid_solver.get_error_envs_mask()
        if self._may_have(error):  # a blown-up env must not poison the batch: zeros, and truncated
            obs = torch.where(error[:, None], 0.0, torch.nan_to_num(obs, nan=0.0, posinf=0.0, neginf=0.0))
            reward = torch.where(error, 0.0, torch.nan_to_num(reward))
        terminated = (terminated & ~error) | (self._forced == 1)
        self.episode_length += 1
        truncated = (self.episode_length >= self.max_episode_steps) | error | (self._forced == 2)
        truncated &= ~terminated
        self._forced.zero_()
        self.episode_return += reward
        self.episode_success_once |= success
        active = ~pending
        terminated &= active
        truncated &= active
        done = terminated | truncated
        step_info = {**step_info, "success": success, "sim_error": error}
        infos: dict[str, Any] = {
            "episode": {
                "r": self.episode_return.clone(),
                "l": self.episode_length.clone(),
                "success": success.clone(),
                "success_once": self.episode_success_once.clone(),
                "sim_error": error,
            },
            "_episode": done,
        }
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            infos["final_obs"], infos["_final_obs"] = obs, done
            infos["final_info"] = _with_masks(step_info, done)
            infos["_final_info"] = done
            infos.update(_with_masks(step_info, ~done))
            if self._may_have(done):
                self._reset_masked(done)
                obs = self._observe(noise)  # the other envs' rows come out the same
        elif self.autoreset_mode == AutoresetMode.NEXT_STEP:
            infos.update(_with_masks(step_info, active))
            if self._may_have(pending):
                self._reset_masked(pending)
                obs = self._observe(noise)
                reward = torch.where(pending, 0.0, reward)
            self._pending = done
        else:
            infos.update(_with_masks(step_info, self._all))
            self._pending = done
        self._obs = obs
        return obs, reward, terminated, truncated, infos

    def force_episode_end(self, mask, *, terminated: bool = True) -> None:
        """Make the masked envs' next ``step`` end their episodes (as a termination, or a truncation
        with ``terminated=False``), whatever the task says; for conformance checks and tests."""
        mask = self._check_mask(mask, name="mask")
        self._forced.masked_fill_(mask, 1 if terminated else 2)

    # ---- rendering ----------------------------------------------------------------------------
    render_cfg: RenderConfig | None = None  # set by tasks that render
    render_envs_idx: tuple[int, ...] | list[int] = (0,)  # which envs ``render()`` draws (env_spacing grid)

    def _set_render(
        self, render_mode: str | None, render_envs_idx, cfg: RenderConfig, control_dt: float
    ) -> None:
        """Validate the render options a task was given (nothing is created until ``render()``)."""
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode: expected None or 'rgb_array', got {render_mode!r}")
        self.render_mode, self.render_cfg = render_mode, cfg
        self.metadata = {**self.metadata, "render_fps": round(1.0 / control_dt)}
        if render_envs_idx is not None:
            idx = [int(i) for i in render_envs_idx]
            if not idx or min(idx) < 0 or max(idx) >= self.num_envs:
                raise ValueError(f"render_envs_idx: expected indices in [0, {self.num_envs - 1}], got {idx}")
            self.render_envs_idx = idx
        self._renderer = None

    def _render_markers(self) -> list[Marker]:
        """Task markers (targets, goals) drawn by ``render()``; none by default."""
        return []

    def render(self):
        """``(H, W, 3)`` uint8 image of the envs in ``render_envs_idx`` (``render_mode="rgb_array"``),
        laid out on the ``env_spacing`` grid; ``None`` without a render mode, as in Gymnasium."""
        if self.render_mode is None:
            return None
        if self._renderer is None:
            self._renderer = SceneRenderer(self.scene, self.render_cfg)
        return self._renderer.render(self.render_envs_idx, self._render_markers())

    def close_extras(self, **kwargs) -> None:
        if getattr(self, "_renderer", None) is not None:
            self._renderer.close()
            self._renderer = None
        self.scene = None

    # ---- helpers ----------------------------------------------------------------------------
    def _reset_masked(self, mask: torch.Tensor) -> None:
        if self._reset_draws is None:
            self._reset_draws = self.rng.stream(_RESET_STREAM, self._reset_count, max(self.reset_noise_dim, 1))
        noise = self._reset_draws.draw()
        self._reset_count += mask
        self.episode_length.masked_fill_(mask, 0)
        self.episode_return.masked_fill_(mask, 0.0)
        self.episode_success_once.masked_fill_(mask, False)
        # the simulator's own per-env state first (controls, applied forces, contact warm starts), so
        # that nothing of the last episode carries over; the task then sets what it randomizes
        self.scene.sim.rigid_solver.reset(envs_idx=mask)
        self._reset_envs(mask, noise)

    def _may_have(self, mask: torch.Tensor) -> bool:
        """False only if ``mask`` is surely all False: checked on the CPU, where reading it costs no
        transfer; assumed True on a GPU, where the masked work is cheaper than a device sync."""
        return self.device.type != "cpu" or bool(mask.any())

    def _step_noise(self) -> torch.Tensor:
        if self._step_draws is None:
            self._step_draws = self.rng.stream(_STEP_STREAM, self._step_count, max(self.step_noise_dim, 1))
        return self._step_draws.draw()

    def _check_mask(self, mask, name: str = "options['reset_mask']") -> torch.Tensor:
        if isinstance(mask, np.ndarray):
            mask = torch.from_numpy(mask)
        if (
            not isinstance(mask, torch.Tensor)
            or mask.dtype != torch.bool
            or tuple(mask.shape) != (self.num_envs,)
        ):
            got = f"{type(mask).__name__} {getattr(mask, 'dtype', '')} {tuple(getattr(mask, 'shape', ()))}"
            raise ValueError(f"{name}: expected a boolean array of shape ({self.num_envs},), got {got}")
        return mask.to(self.device)

    def _check_action(self, actions) -> torch.Tensor:
        shape = (self.num_envs, *self.single_action_space.shape)
        if isinstance(actions, np.ndarray):
            if self.device.type != "cpu":
                raise TypeError(
                    f"actions: got a NumPy array but the env runs on {self.device}; pass a torch tensor "
                    f"on that device (copying every step would be a hidden host-device transfer)"
                )
            actions = torch.from_numpy(actions)
        elif not isinstance(actions, torch.Tensor):
            raise TypeError(f"actions: expected a torch tensor of shape {shape}, got {type(actions).__name__}")
        if not _same_device(actions.device, self.device):
            raise ValueError(f"actions: expected a tensor on {self.device}, got one on {actions.device}")
        if not (actions.dtype.is_floating_point or _is_int(actions.dtype)):
            raise TypeError(f"actions: dtype {actions.dtype} cannot be cast to float32")
        if tuple(actions.shape) != shape:
            raise ValueError(
                f"actions: expected shape {shape} (num_envs x action_space {self.single_action_space}), "
                f"got {tuple(actions.shape)}"
            )
        actions = actions.to(torch.float32)
        # the sum is finite unless some entry is NaN/inf (or the sum overflows: then look closer)
        if (
            self.validate_actions
            and not bool(torch.isfinite(actions.sum()))
            and not bool(torch.isfinite(actions).all())
        ):
            raise ValueError("actions: contain NaN or inf")
        return actions.clamp(-1.0, 1.0)  # the action space is [-1, 1] (see _set_spaces)


def _is_int(dtype: torch.dtype) -> bool:
    return dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def _with_masks(info: dict[str, torch.Tensor], mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """``info`` plus a ``_key`` mask for every key (Gymnasium's vector info convention)."""
    out = dict(info)
    for k in info:
        out[f"_{k}"] = mask
    return out
