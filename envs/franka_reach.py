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

``reach_kernel`` computes all of it per env on the device (the reward's form: ``reach_reward``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
import warp as wp
from gymnasium.vector import AutoresetMode

from sim_core.host_threads import Share, first_env
from sim_core.views import ContactsView, ResetView, StateView, env_error, reset_env

from .arm import N_ARM, ArmModel, ArmState, ee_point, observe_action, observe_joints, penalties, reset_arm
from .config import config_path, from_dict, merge, read_toml
from .episode import (
    F_TASK,
    PASS_EVALUATE,
    PASS_OBSERVE,
    PASS_RESET,
    PASS_STEP,
    Episodes,
    StepOut,
    begin_episode,
    clean_row,
    end_step,
    step_key,
    write_terms,
)
from .franka import ArmConfig, FrankaTaskEnv, SimConfig
from .render import Marker, RenderConfig
from .rng import uniform

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


@wp.struct
class ReachTask:
    """Reach's constants (from the config)."""

    distance: float  # reward weights (ReachRewardConfig)
    distance_tanh: float
    tanh_std: float  # m
    action_rate: float
    joint_vel: float
    success_bonus: float
    success_threshold: float  # m
    terminate_on_success: int
    target_low: wp.vec3  # target sampling box, m
    target_span: wp.vec3
    noise_joint_pos: float  # uniform +- observation noise, rad
    noise_joint_vel: float  # rad/s


@wp.func
def reach_reward(t: ReachTask, d: float, action_rate: float, joint_vel_sq: float, success: bool) -> float:
    """The reward of a step (module docstring): ``d`` distance to the target, m; ``action_rate``
    ``|a - a_prev|^2``; ``joint_vel_sq`` ``|qd|^2``."""
    r = t.distance * d + t.distance_tanh * (1.0 - wp.tanh(d / t.tanh_std))
    r += penalties(t.action_rate, t.joint_vel, action_rate, joint_vel_sq)
    if success:
        r += t.success_bonus
    return r


@wp.func
def _reset_reach(
    t: ReachTask,
    arm: ArmModel,
    r: ResetView,
    st: ArmState,
    target: wp.array(dtype=wp.vec3),
    ep: Episodes,
    e: int,
):
    """A new episode in env ``e``: the arm near its default pose, a target drawn in the box (reset
    draws 7-9)."""
    reset_env(r, e)
    h = begin_episode(ep, e)
    reset_arm(arm, r.state, st, e, h)
    u = wp.vec3(uniform(h, N_ARM), uniform(h, N_ARM + 1), uniform(h, N_ARM + 2))
    target[e] = t.target_low + wp.cw_mul(t.target_span, u)


@wp.kernel(enable_backward=False)
def reach_kernel(
    phase: int,  # PASS_STEP, PASS_OBSERVE, PASS_RESET or PASS_EVALUATE (episode.py)
    share: Share,  # the envs of this launch's threads (sim_core.host_threads)
    # Model:
    t: ReachTask,
    arm: ArmModel,
    # Data in and out:
    s: StateView,
    c: ContactsView,
    r: ResetView,
    st: ArmState,
    target: wp.array(dtype=wp.vec3),  # (num_envs,) target positions, m
    ep: Episodes,
    # In:
    given_noise: wp.array2d(dtype=wp.float32),  # (num_envs, 14) uniform draws to use, or (0, 0)
    # Out:
    obs_out: wp.array2d(dtype=wp.float32),  # (num_envs, 23 + action_dim)
    out: StepOut,  # task info row F_TASK: distance, m
):
    """One pass of Reach over the envs (``episode.py``): the observation (layout: module docstring),
    reward, success and distance of the state, the episode's bookkeeping and resets."""
    e0 = first_env(share, wp.tid())
    for e in range(e0, wp.min(e0 + share.per_thread, obs_out.shape[0])):
        if phase == PASS_RESET:
            if ep.reset_now[e]:
                _reset_reach(t, arm, r, st, target, ep, e)
            continue
        h = step_key(ep, e, phase == PASS_STEP)
        ee = ee_point(arm, s, e)
        qd2 = observe_joints(arm, s, e, h, given_noise, t.noise_joint_pos, t.noise_joint_vel, obs_out)
        tgt = target[e]
        for k in range(3):
            obs_out[e, 14 + k] = ee[k]
            obs_out[e, 17 + k] = tgt[k]
            obs_out[e, 20 + k] = tgt[k] - ee[k]
        rate = observe_action(st, e, obs_out, 23)
        error = env_error(s.qpos, s.qvel, c.overflow, e)
        clean_row(obs_out, e, error)
        if phase == PASS_OBSERVE:
            continue
        d = wp.length(tgt - ee)
        success = d < t.success_threshold
        reward = reach_reward(t, d, rate, qd2, success)
        terminated = success and t.terminate_on_success != 0
        out.f[F_TASK, e] = d
        if phase == PASS_EVALUATE:
            write_terms(out, e, reward, terminated, success, error)
        elif end_step(ep, out, e, reward, terminated, success, error):
            _reset_reach(t, arm, r, st, target, ep, e)


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
    reset_noise_dim = N_ARM + 3
    info_keys = (("distance", float),)

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
        first_env: int = 0,
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
            first_env=first_env,
            render_mode=render_mode,
            render_envs_idx=render_envs_idx,
        )
        self.build_scene()
        self.target_pos = torch.zeros(self.num_envs, 3, device=self.device)  # (num_envs, 3) m, per episode
        self._set_spaces(23 + self.arm.action_dim, self.arm.action_dim)
        w, t = cfg.reward, ReachTask()
        t.distance, t.distance_tanh, t.tanh_std = w.distance, w.distance_tanh, w.tanh_std
        t.action_rate, t.joint_vel, t.success_bonus = w.action_rate, w.joint_vel, w.success_bonus
        t.success_threshold, t.terminate_on_success = cfg.success_threshold, int(cfg.terminate_on_success)
        low = wp.vec3(*cfg.target_low)
        t.target_low, t.target_span = low, wp.vec3(*cfg.target_high) - low
        t.noise_joint_pos, t.noise_joint_vel = cfg.obs_noise.joint_pos, cfg.obs_noise.joint_vel
        self._task = t

    def _render_markers(self) -> list[Marker]:
        return [Marker(self.target_pos, 0.02, (0.9, 0.15, 0.15, 0.8))]

    def _task_pass(self, phase, share, obs_out, out, episodes, noise):
        solver, arm = self.scene.sim.rigid_solver, self.arm
        target = wp.from_torch(self.target_pos, dtype=wp.vec3)
        views = [solver.state_view(), solver.contacts_view(), solver.reset_view()]
        inputs = [
            phase,
            share,
            self._task,
            arm.model,
            *views,
            arm.state,
            target,
            episodes,
            noise,
            obs_out,
            out,
        ]
        return reach_kernel, inputs
