"""``WarpGym/FrankaReach-v0``: bring the end effector to a target point in front of the arm.

Observation ``(num_envs, 23 + action_dim)`` float32, in the env's frame (the arm's base is the origin):

==========  ====  ===========================================================
slice       size  content
==========  ====  ===========================================================
0:7         7     arm joint angles minus the default pose, rad (+ noise)
7:14        7     arm joint velocities, rad/s (+ noise)
14:17       3     end-effector position, m
17:20       3     target position, m
20:23       3     target minus end-effector position, m
23:         7|3   the last action (``joint_delta``: 7, ``ee_delta``: 3)
==========  ====  ===========================================================

Reward per control step, with weights from ``configs/franka_reach.toml`` (``d``: distance to target, m)::

    distance * d + distance_tanh * (1 - tanh(d / tanh_std)) + action_rate * |a - a_prev|^2
      + joint_vel * |qd|^2 + success_bonus * success

Success: ``d < success_threshold``; with ``terminate_on_success`` the episode then terminates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from gymnasium.vector import AutoresetMode

import sim_core as sc

from .config import config_path, from_dict, merge, read_toml
from .franka import N_ARM, ArmConfig, FrankaArm, SimConfig
from .vector_env import WarpVectorEnv

__all__ = ["FrankaReachEnv", "ReachConfig", "ReachRewardConfig", "ObsNoiseConfig"]


@dataclass(frozen=True)
class ObsNoiseConfig:
    joint_pos: float  # uniform +- noise on the observed joint angles, rad
    joint_vel: float  # uniform +- noise on the observed joint velocities, rad/s


@dataclass(frozen=True)
class ReachRewardConfig:
    distance: float  # weight of the distance, per m
    distance_tanh: float  # weight of 1 - tanh(d / tanh_std)
    tanh_std: float  # m
    action_rate: float  # weight of |a - a_prev|^2
    joint_vel: float  # weight of |qd|^2, per (rad/s)^2
    success_bonus: float  # added on every step that is a success


@dataclass(frozen=True)
class ReachConfig:
    max_episode_steps: int  # control steps
    control_mode: Literal["joint_delta", "ee_delta"]
    success_threshold: float  # m
    terminate_on_success: bool
    target_low: tuple[float, float, float]  # target sampling box, m
    target_high: tuple[float, float, float]
    sim: SimConfig
    arm: ArmConfig
    obs_noise: ObsNoiseConfig
    reward: ReachRewardConfig


def load_reach_config(config: str = "franka_reach", overrides: dict[str, Any] | None = None) -> ReachConfig:
    """The ``[env]`` table of a task config file, with ``overrides`` merged in, validated."""
    path = config_path(config)
    return from_dict(ReachConfig, merge(read_toml(path).get("env", {}), overrides), "env")


class FrankaReachEnv(WarpVectorEnv):
    """Batched FrankaReach (see the module docstring).

    Args:
        num_envs, device, autoreset_mode, seed, validate_actions: see ``WarpVectorEnv``.
        max_episode_steps, control_mode: override the config's values when given.
        config: a config name in ``configs/`` or a path to a TOML file with an ``[env]`` table.
        render_mode: none is implemented yet (``None`` only).
        **overrides: config keys to override, tables as dicts: ``reward={"success_bonus": 5.0}``.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}
    step_noise_dim = 2 * N_ARM

    def __init__(
        self,
        num_envs: int = 1,
        *,
        device: str | torch.device | None = None,
        max_episode_steps: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        seed: int | None = None,
        control_mode: str | None = None,
        config: str = "franka_reach",
        validate_actions: bool = True,
        render_mode: str | None = None,
        **overrides: Any,
    ):
        if render_mode is not None:
            raise ValueError(f"render_mode: FrankaReach renders nothing yet; got {render_mode!r}")
        if max_episode_steps is not None:
            overrides["max_episode_steps"] = max_episode_steps
        if control_mode is not None:
            overrides["control_mode"] = control_mode
        cfg = load_reach_config(config, overrides)
        super().__init__(
            num_envs,
            device=device,
            max_episode_steps=cfg.max_episode_steps,
            autoreset_mode=autoreset_mode,
            seed=seed,
            validate_actions=validate_actions,
        )
        self.cfg = cfg
        self.render_mode = None
        self.reset_noise_dim = N_ARM + 3
        self.scene = sc.Scene(
            sim_options=sc.SimOptions(dt=cfg.sim.dt, substeps=cfg.sim.substeps),
            profiling_options=sc.ProfilingOptions(show_FPS=False),
        )
        self.arm = FrankaArm(self.scene, cfg.arm, cfg.control_mode)
        self.scene.build(n_envs=self.num_envs, env_spacing=cfg.sim.env_spacing)
        self.arm.on_build(self.num_envs)
        dev, n = self.device, self.num_envs
        self._target_low = torch.tensor(cfg.target_low, dtype=torch.float32, device=dev)
        self._target_span = torch.tensor(cfg.target_high, dtype=torch.float32, device=dev) - self._target_low
        self.target_pos = torch.zeros(n, 3, device=dev)  # (num_envs, 3) m
        self.last_action = torch.zeros(n, self.arm.action_dim, device=dev)
        self._prev_action = torch.zeros_like(self.last_action)
        self._ee = torch.zeros(n, 3, device=dev)
        self._qd = torch.zeros(n, N_ARM, device=dev)
        self._set_spaces(23 + self.arm.action_dim, self.arm.action_dim)

    def _reset_envs(self, mask: torch.Tensor, noise: torch.Tensor) -> None:
        self.arm.reset(mask, noise[:, :N_ARM])
        target = self._target_low + self._target_span * noise[:, N_ARM : N_ARM + 3]
        self.target_pos = torch.where(mask[:, None], target, self.target_pos)
        self.last_action = torch.where(mask[:, None], 0.0, self.last_action)
        self._prev_action = torch.where(mask[:, None], 0.0, self._prev_action)

    def _apply_action(self, action: torch.Tensor) -> None:
        self._prev_action, self.last_action = self.last_action, action
        self.arm.apply(action)
        for _ in range(self.cfg.sim.decimation):
            self.scene.step()

    def _observe(self, noise: torch.Tensor) -> torch.Tensor:
        arm, nz = self.arm, self.cfg.obs_noise
        q, qd = arm.joint_pos(), arm.joint_vel()
        self._ee, self._qd = arm.ee_pos(), qd
        q_noisy = q - arm.default_q + nz.joint_pos * (2.0 * noise[:, :N_ARM] - 1.0)
        qd_noisy = qd + nz.joint_vel * (2.0 * noise[:, N_ARM:] - 1.0)
        to_target = self.target_pos - self._ee
        return torch.cat([q_noisy, qd_noisy, self._ee, self.target_pos, to_target, self.last_action], dim=1)

    def _evaluate(self, action: torch.Tensor):
        w = self.cfg.reward
        d = torch.linalg.vector_norm(self.target_pos - self._ee, dim=1)
        success = d < self.cfg.success_threshold
        reward = (
            w.distance * d
            + w.distance_tanh * (1.0 - torch.tanh(d / w.tanh_std))
            + w.action_rate * (action - self._prev_action).square().sum(1)
            + w.joint_vel * self._qd.square().sum(1)
            + w.success_bonus * success
        )
        terminated = success & self.cfg.terminate_on_success
        return reward, terminated, success, {"distance": d}
