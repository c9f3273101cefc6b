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
import warp as wp
from gymnasium.vector import AutoresetMode

from .config import config_path, from_dict, merge, read_toml
from .franka import N_ARM, ArmConfig, FrankaTaskEnv, SimConfig
from .render import Marker, RenderConfig
from .vector_env import masked_assign

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
    render: RenderConfig


def load_reach_config(config: str = "franka_reach", overrides: dict[str, Any] | None = None) -> ReachConfig:
    """The ``[env]`` table of a task config file, with ``overrides`` merged in, validated."""
    path = config_path(config)
    return from_dict(ReachConfig, merge(read_toml(path).get("env", {}), overrides), "env")


@wp.kernel(enable_backward=False)
def _reach_kernel(
    qpos: wp.array2d(dtype=wp.float32),
    qvel: wp.array2d(dtype=wp.float32),
    xpos: wp.array2d(dtype=wp.vec3),
    xquat: wp.array2d(dtype=wp.vec4),
    q0: int,
    v0: int,
    hand: int,
    ee_offset: wp.vec3,
    default_q: wp.array(dtype=wp.float32),
    target: wp.array(dtype=wp.vec3),
    action: wp.array2d(dtype=wp.float32),
    prev_action: wp.array2d(dtype=wp.float32),
    noise: wp.array2d(dtype=wp.float32),
    noise_q: float,
    noise_qd: float,
    w: wp.array(dtype=wp.float32),
    threshold: float,
    obs: wp.array2d(dtype=wp.float32),
    reward: wp.array(dtype=wp.float32),
    success: wp.array(dtype=wp.bool),
    distance: wp.array(dtype=wp.float32),
):
    """Observation, reward terms and success of one env from the state (layout: module docstring).

    ``w``: (distance, distance_tanh, tanh_std, action_rate, joint_vel, success_bonus).
    """
    e = wp.tid()
    qh = xquat[e, hand]
    ee = xpos[e, hand] + wp.quat_rotate(wp.quat(qh[1], qh[2], qh[3], qh[0]), ee_offset)
    qd2 = float(0.0)
    for i in range(7):
        obs[e, i] = qpos[e, q0 + i] - default_q[i] + noise_q * (2.0 * noise[e, i] - 1.0)
        v = qvel[e, v0 + i]
        obs[e, 7 + i] = v + noise_qd * (2.0 * noise[e, 7 + i] - 1.0)
        qd2 += v * v
    tgt = target[e]
    for k in range(3):
        obs[e, 14 + k] = ee[k]
        obs[e, 17 + k] = tgt[k]
        obs[e, 20 + k] = tgt[k] - ee[k]
    rate = float(0.0)
    for a in range(action.shape[1]):
        obs[e, 23 + a] = action[e, a]
        da = action[e, a] - prev_action[e, a]
        rate += da * da
    d = wp.length(tgt - ee)
    ok = d < threshold
    r = w[0] * d + w[1] * (1.0 - wp.tanh(d / w[2])) + w[3] * rate + w[4] * qd2
    if ok:
        r += w[5]
    reward[e] = r
    success[e] = ok
    distance[e] = d


class FrankaReachEnv(FrankaTaskEnv):
    """Batched FrankaReach (see the module docstring).

    Args:
        num_envs, device, autoreset_mode, seed, validate_actions: see ``WarpVectorEnv``.
        max_episode_steps, control_mode: override the config's values when given.
        config: a config name in ``configs/`` or a path to a TOML file with an ``[env]`` table.
        render_mode: ``None`` or ``"rgb_array"`` (``render()`` draws the arm, the floor and the target).
        render_envs_idx: envs drawn by ``render()`` (default: env 0); several are laid out on a grid.
        **overrides: config keys to override, tables as dicts: ``reward={"success_bonus": 5.0}``.
    """

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
        render_envs_idx: list[int] | None = None,
        **overrides: Any,
    ):
        cfg = load_reach_config(config, self.fold(overrides, max_episode_steps, control_mode))
        super().__init__(
            cfg,
            num_envs,
            device=device,
            autoreset_mode=autoreset_mode,
            seed=seed,
            validate_actions=validate_actions,
            render_mode=render_mode,
            render_envs_idx=render_envs_idx,
        )
        self.reset_noise_dim = N_ARM + 3
        self.build_scene()
        dev, n = self.device, self.num_envs
        self._target_low = torch.tensor(cfg.target_low, dtype=torch.float32, device=dev)
        self._target_span = torch.tensor(cfg.target_high, dtype=torch.float32, device=dev) - self._target_low
        # persistent buffers, updated in place (the kernel reads them through fixed Warp views)
        self.target_pos = torch.zeros(n, 3, device=dev)  # (num_envs, 3) m
        self.last_action = torch.zeros(n, self.arm.action_dim, device=dev)
        self._prev_action = torch.zeros_like(self.last_action)
        w = cfg.reward
        weights = [w.distance, w.distance_tanh, w.tanh_std, w.action_rate, w.joint_vel, w.success_bonus]
        self._weights = torch.tensor(weights, dtype=torch.float32, device=dev)
        self._set_spaces(23 + self.arm.action_dim, self.arm.action_dim)
        self._eval: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        obs_dim = self.single_observation_space.shape[0]
        self._out = (  # kernel outputs: observation, reward, success, distance
            torch.empty(n, obs_dim, device=dev),
            torch.empty(n, device=dev),
            torch.empty(n, dtype=torch.bool, device=dev),
            torch.empty(n, device=dev),
        )
        self._cmd = self._cmd_noise = None
        data = self.scene.sim.rigid_solver.data
        e = self.arm.entity
        self._kernel_inputs = [
            data.qpos,
            data.qvel,
            data.xpos,
            data.xquat,
            e._q_start,
            e._dof_start,
            self.arm.hand.idx,
            wp.vec3(*cfg.arm.ee_offset),
            wp.from_torch(self.arm.default_q),
            wp.from_torch(self.target_pos, dtype=wp.vec3),
            wp.from_torch(self.last_action),
            wp.from_torch(self._prev_action),
        ]
        self._kernel_params = [
            cfg.obs_noise.joint_pos,
            cfg.obs_noise.joint_vel,
            wp.from_torch(self._weights),
            cfg.success_threshold,
        ]

    def _render_markers(self) -> list[Marker]:
        return [Marker(self.target_pos, 0.02, (0.9, 0.15, 0.15, 0.8))]

    def _reset_envs(self, mask: torch.Tensor, noise: torch.Tensor) -> None:
        self.arm.reset(mask, noise[:, :N_ARM])
        masked_assign(self.target_pos, mask, self._target_low + self._target_span * noise[:, N_ARM : N_ARM + 3])
        masked_assign(self.last_action, mask, 0.0)
        masked_assign(self._prev_action, mask, 0.0)

    def _observe(self, noise: torch.Tensor) -> torch.Tensor:
        """One recorded kernel launch computes the observation and the step's reward terms (kept for
        ``_evaluate``) from the link poses, brought up to date first."""
        self.scene.sim.rigid_solver.poses()
        if self._cmd is None or self._cmd_noise is not noise:  # (re)record for this noise buffer
            self._cmd_noise = noise
            self._cmd = wp.launch(
                _reach_kernel,
                dim=self.num_envs,
                inputs=[*self._kernel_inputs, wp.from_torch(noise), *self._kernel_params],
                outputs=[wp.from_torch(t) for t in self._out],
                device=self.scene.sim.rigid_solver.wp_device,
                record_cmd=True,
            )
        self._cmd.launch()
        obs, reward, success, distance = (t.clone() for t in self._out)
        self._eval = (reward, success, distance)
        return obs

    def _evaluate(self, action: torch.Tensor):
        reward, success, distance = self._eval
        terminated = success & self.cfg.terminate_on_success
        return reward, terminated, success, {"distance": distance}
