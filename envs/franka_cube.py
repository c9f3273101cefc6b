"""``WarpGym/FrankaLift-v0`` and ``WarpGym/FrankaPush-v0``: a cube on the floor in front of the arm.

- **Lift**: grasp the cube and lift it so that its centre is at least at the goal height (a point
  drawn above the cube's start; only its height counts). Success: the cube has been at or above the
  goal height for ``hold_steps`` consecutive control steps.
- **Push**: push the cube along the floor until its centre is within ``goal_radius`` of a goal point
  drawn ahead of it, without lifting it. Success: within the radius, resting on the floor.

Episodes end by the time limit (truncation) or when the cube leaves the workspace (termination); a
success does not end them, so the success an episode reports is that of its last step, and the
shaped rewards (all >= 0 but the small penalties) never pay for dawdling short of the goal.

Observation ``(num_envs, 49 + action_dim)`` float32 in the env's frame (the arm's base is the origin):

======  ====  ==================================================================
slice   size  content
======  ====  ==================================================================
0:7     7     arm joint angles minus the default pose, rad (+ noise)
7:14    7     arm joint velocities, rad/s (+ noise)
14:16   2     finger openings, m
16:19   3     end-effector position, m
19:25   6     hand x and z axes
25:28   3     cube position, m (+ noise)
28:34   6     cube x and z axes
34:37   3     cube minus end-effector position, m
37:40   3     cube velocity relative to the end effector, m/s
40:43   3     cube angular velocity, rad/s
43:46   3     goal position, m
46:49   3     goal minus cube position, m
49:     A     the last action
======  ====  ==================================================================

Rewards per control step, weights in ``configs/franka_lift.toml`` / ``franka_push.toml`` (``d``
distances in m, ``t(x, s) = 1 - tanh(x / s)``)::

    lift: reach * t(d_ee_cube, reach_std) + grasp * grasped + lift * grasped * progress
          + success_bonus * success + action_rate * |a - a_prev|^2 + joint_vel * |qd|^2
    push: reach * t(d_ee_behind, reach_std) + push * t(d_cube_goal, push_std) + lifted * lifted
          + success_bonus * success + action_rate * |a - a_prev|^2 + joint_vel * |qd|^2

``grasped``: both finger pads squeeze the cube toward each other (each pad's contact force on it at
least 0.5 N along the fingers' closing direction and within 60 degrees of it, at the last substep;
pads pressing down on its top do not count).
``progress``: the cube's rise toward ``lift_margin`` above the goal height, clipped to [0, 1] (a
policy paid up to the goal height alone hovers right at it, and a millimetre of sag fails it).
``d_ee_behind``: from the end effector to the point just behind the cube on the side away from the
goal, at its height.

Domain randomization (``[env.randomization]``), drawn per env at every reset through per-env model
parameters: cube mass, edge length and friction, joint damping (scale of the model's), PD gains
(scale of the model's kp and kv). Observation noise per step: ``[env.obs_noise]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
from gymnasium.vector import AutoresetMode

import sim_core as sc
from sim_core.transforms import quat_to_mat

from .config import config_path, from_dict, merge, read_toml
from .franka import N_ARM, ArmConfig, FrankaTaskEnv, SimConfig
from .render import Marker, RenderConfig
from .vector_env import masked_assign

__all__ = ["FrankaLiftEnv", "FrankaPushEnv", "CubeTaskConfig", "OBS_DIM"]

OBS_DIM = 49  # without the last action
GRASP_FORCE = 0.5  # N: a finger pad squeezes the cube at least this hard along the closing direction
GRASP_ANGLE = math.radians(60.0)  # ... and its force on the cube is within this of that direction


@dataclass(frozen=True)
class CubeConfig:
    size: float  # edge length as built, m
    density: float  # kg/m^3 as built
    friction: float  # sliding friction as built
    spawn_low: tuple[float, float]  # xy box the cube's centre is drawn in, m
    spawn_high: tuple[float, float]
    yaw_range: float  # yaw drawn in +- this, rad


@dataclass(frozen=True)
class RandomizationConfig:
    """Uniform ranges ``[low, high]`` drawn per env at every reset (equal bounds: no randomization)."""

    cube_mass: tuple[float, float]  # kg
    cube_size: tuple[float, float]  # edge length, m
    cube_friction: tuple[float, float]
    joint_damping_scale: tuple[float, float]  # times the model's joint damping
    pd_gain_scale: tuple[float, float]  # times the model's kp and kv


@dataclass(frozen=True)
class CubeObsNoiseConfig:
    joint_pos: float  # uniform +-, rad
    joint_vel: float  # uniform +-, rad/s
    cube_pos: float  # uniform +-, m


@dataclass(frozen=True)
class RewardConfig:
    reach: float  # weight of t(d, reach_std) toward the cube (lift) or behind it (push)
    reach_std: float  # m
    action_rate: float  # weight of |a - a_prev|^2
    joint_vel: float  # weight of |qd|^2, per (rad/s)^2
    success_bonus: float  # added on every step that is a success
    grasp: float = 0.0  # lift: weight of grasped
    lift: float = 0.0  # lift: weight of grasped * progress
    lift_margin: float = 0.0  # lift: progress is full this far above the goal height, m
    push: float = 0.0  # push: weight of t(d_cube_goal, push_std)
    push_std: float = 0.1  # m
    lifted: float = 0.0  # push: weight of the cube being off the floor (a penalty: < 0)


@dataclass(frozen=True)
class CubeTaskConfig:
    max_episode_steps: int  # control steps
    control_mode: Literal["joint_delta", "ee_delta", "ee_yaw_delta"]
    goal_low: tuple[float, float, float]  # lift: goal offset from the cube's start (x, y, height of
    goal_high: tuple[float, float, float]  # its centre above the floor); push: (dx, dy, unused), m
    goal_radius: float  # push: success radius, m
    hold_steps: int  # lift: control steps at or above the goal height for a success
    workspace_low: tuple[float, float]  # the cube's centre leaving this xy box ends the episode, m
    workspace_high: tuple[float, float]
    sim: SimConfig
    arm: ArmConfig
    cube: CubeConfig
    randomization: RandomizationConfig
    obs_noise: CubeObsNoiseConfig
    reward: RewardConfig
    render: RenderConfig


def load_cube_config(config: str, overrides: dict[str, Any] | None = None) -> CubeTaskConfig:
    """The ``[env]`` table of a task config file, with ``overrides`` merged in, validated."""
    return from_dict(CubeTaskConfig, merge(read_toml(config_path(config)).get("env", {}), overrides), "env")


def _closeness(d: torch.Tensor, std: float) -> torch.Tensor:
    """``t(d, std) = 1 - tanh(d / std)``: 1 at distance 0, falling off over ``std``."""
    return 1.0 - torch.tanh(d / std)


class _CubeTaskEnv(FrankaTaskEnv):
    """The arm, a free cube and a goal; the tasks differ in goals, rewards and success."""

    step_noise_dim = 2 * N_ARM + 3
    default_config: str = ""

    def __init__(
        self,
        num_envs: int = 1,
        *,
        device: str | torch.device | None = None,
        max_episode_steps: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        seed: int | None = None,
        control_mode: str | None = None,
        config: str | None = None,
        validate_actions: bool = True,
        render_mode: str | None = None,
        render_envs_idx: list[int] | None = None,
        **overrides: Any,
    ):
        overrides = self.fold(overrides, max_episode_steps, control_mode)
        cfg = load_cube_config(config or self.default_config, overrides)
        _check_ranges(cfg)
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
        self.reset_noise_dim = N_ARM + 3 + 3 + 5  # arm, cube xy + yaw, goal, randomization
        c = cfg.cube
        x0 = 0.5 * (c.spawn_low[0] + c.spawn_high[0])
        self.cube = self.scene.add_entity(
            sc.morphs.Box(size=(c.size,) * 3, pos=(x0, 0.0, c.size / 2)),
            material=sc.materials.Rigid(rho=c.density, friction=c.friction),
        )
        self.build_scene()
        n, dev = self.num_envs, self.device
        e = self.arm.entity
        self._kp0, self._kv0 = e.get_dofs_kp()[0].clone(), e.get_dofs_kv()[0].clone()
        self._damping0 = e.get_dofs_damping()[0].clone()
        solver = self.scene.sim.rigid_solver
        body = torch.as_tensor(solver.model.mjmodel.geom_bodyid, device=dev)
        self._fingers = [e.get_link("left_finger"), e.get_link("right_finger")]
        self._pad_geoms = [torch.nonzero(body == f.idx).reshape(-1) for f in self._fingers]
        self._cube_geom = self.cube.geoms_idx[0]
        self._spawn_low = torch.tensor(c.spawn_low, device=dev)
        self._spawn_span = torch.tensor(c.spawn_high, device=dev) - self._spawn_low
        self._goal_low = torch.tensor(cfg.goal_low, device=dev)
        self._goal_span = torch.tensor(cfg.goal_high, device=dev) - self._goal_low
        self._ws_low = torch.tensor(cfg.workspace_low, device=dev)
        self._ws_high = torch.tensor(cfg.workspace_high, device=dev)
        # per-env episode state, updated in place
        self.goal_pos = torch.zeros(n, 3, device=dev)  # (num_envs, 3) m
        self.cube_size = torch.full((n,), c.size, device=dev)  # (num_envs,) edge length this episode, m
        self.hold = torch.zeros(n, dtype=torch.int32, device=dev)  # lift: consecutive steps above the goal
        self.last_action = torch.zeros(n, self.arm.action_dim, device=dev)
        self._prev_action = torch.zeros_like(self.last_action)
        self._set_spaces(OBS_DIM + self.arm.action_dim, self.arm.action_dim)
        self._state: dict[str, torch.Tensor] = {}  # reward terms of the last observation
        self._jac: torch.Tensor | None = None  # end-effector Jacobian at the last observation

    # ---- episode start ----------------------------------------------------------------------------
    def _reset_envs(self, mask: torch.Tensor, noise: torch.Tensor) -> None:
        cfg, n = self.cfg, self.num_envs
        self.arm.reset(mask, noise[:, :N_ARM])
        u = noise[:, N_ARM:]
        r = cfg.randomization
        dr = [lo + (hi - lo) * u[:, 6 + k] for k, (lo, hi) in enumerate(_dr_ranges(r))]
        mass, size, friction, damping, gains = dr
        e = self.arm.entity
        self.cube.set_mass(mass, envs_idx=mask, unsafe=True)
        self.cube.set_size(size[:, None].expand(n, 3), envs_idx=mask, unsafe=True)
        self.cube.set_friction(friction, envs_idx=mask, unsafe=True)
        e.set_dofs_damping(self._damping0 * damping[:, None], envs_idx=mask, unsafe=True)
        e.set_dofs_kp(self._kp0 * gains[:, None], envs_idx=mask, unsafe=True)
        e.set_dofs_kv(self._kv0 * gains[:, None], envs_idx=mask, unsafe=True)
        masked_assign(self.cube_size, mask, size)
        xy = self._spawn_low + self._spawn_span * u[:, :2]
        pos = torch.cat([xy, 0.5 * size[:, None] + 1e-4], 1)
        half_yaw = 0.5 * self.cfg.cube.yaw_range * (2.0 * u[:, 2] - 1.0)
        zero = torch.zeros_like(half_yaw)
        self.cube.set_pos(pos, envs_idx=mask, unsafe=True)
        self.cube.set_quat(
            torch.stack([half_yaw.cos(), zero, zero, half_yaw.sin()], 1), envs_idx=mask, unsafe=True
        )
        g = self._goal_low + self._goal_span * u[:, 3:6]
        masked_assign(self.goal_pos, mask, self._goal(pos, g))
        masked_assign(self.hold, mask, 0)
        masked_assign(self.last_action, mask, 0.0)
        masked_assign(self._prev_action, mask, 0.0)

    def _goal(self, cube_pos: torch.Tensor, draw: torch.Tensor) -> torch.Tensor:
        """(num_envs, 3) goal points for cubes starting at ``cube_pos``, from ``draw`` in the goal box."""
        raise NotImplementedError

    # ---- step ---------------------------------------------------------------------------------------
    def _jac_hint(self) -> torch.Tensor | None:
        return self._jac  # the last observation's: the state has not changed since

    def _observe(self, noise: torch.Tensor) -> torch.Tensor:
        cfg, arm, e = self.cfg, self.arm, self.arm.entity
        q, qd = e.get_dofs_position(), e.get_dofs_velocity()
        nz = cfg.obs_noise
        joint_pos = q[:, :N_ARM] - arm.default_q + nz.joint_pos * (2.0 * noise[:, :N_ARM] - 1.0)
        joint_vel = qd[:, :N_ARM] + nz.joint_vel * (2.0 * noise[:, N_ARM : 2 * N_ARM] - 1.0)
        ee = arm.ee_pos()
        self._jac = arm.ee_jacobian()  # (n, 6, nv), also for the next action
        ee_vel = (self._jac[:, :3] @ qd[:, :, None])[..., 0]
        hand_rot = quat_to_mat(arm.hand.get_quat())
        cube_pos, cube_rot = self.cube.get_pos(), quat_to_mat(self.cube.get_quat())
        cube_obs = cube_pos + nz.cube_pos * (2.0 * noise[:, 2 * N_ARM :] - 1.0)
        obs = torch.cat(
            [
                joint_pos,
                joint_vel,
                q[:, N_ARM:],
                ee,
                hand_rot[..., 0],
                hand_rot[..., 2],
                cube_obs,
                cube_rot[..., 0],
                cube_rot[..., 2],
                cube_obs - ee,
                self.cube.get_vel() - ee_vel,
                self.cube.get_ang(),
                self.goal_pos,
                self.goal_pos - cube_obs,
                self.last_action,
            ],
            1,
        )
        self._state = {
            "ee": ee,
            "cube_pos": cube_pos,
            "cube_size": self.cube_size,
            "goal": self.goal_pos,
            "grasped": self._grasped(),
            "action_rate": (self.last_action - self._prev_action).square().sum(1),
            "joint_vel_sq": qd[:, :N_ARM].square().sum(1),
        }
        return obs

    def _grasped(self) -> torch.Tensor:
        """(num_envs,) bool: each finger pad squeezes the cube toward the other finger (last
        substep's contact forces): the pad's summed force on the cube is at least ``GRASP_FORCE``
        along the closing direction and within ``GRASP_ANGLE`` of it. Pads pressing on the cube's top
        face (a closed hand pushing down on it) do not count."""
        tc = self.scene.sim.rigid_solver.tc
        geom, fn = tc["geom"], tc["force"][..., 0]  # (n, C, 2); (n, C) normal force on geom2, N
        valid = torch.arange(geom.shape[1], device=self.device)[None, :] < tc["count"][:, None]
        # +1 / -1: the cube is geom2 / geom1 (the normal points from geom1 to geom2), 0: not in it
        side = (geom[..., 1] == self._cube_geom).float() - (geom[..., 0] == self._cube_geom).float()
        on_cube = (valid * side * fn)[..., None] * tc["normal"]  # (n, C, 3) force on the cube, N
        closing = self._fingers[1].get_pos() - self._fingers[0].get_pos()  # left to right finger
        closing = closing / closing.norm(dim=1, keepdim=True).clamp_min(1e-6)
        grasped = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        for pad, sign in zip(self._pad_geoms, (1.0, -1.0), strict=True):
            force = (on_cube * torch.isin(geom, pad).any(-1)[..., None]).sum(1)  # (n, 3) from this pad
            along = sign * (force * closing).sum(1)
            grasped &= (along >= GRASP_FORCE) & (along >= math.cos(GRASP_ANGLE) * force.norm(dim=1))
        return grasped

    def rewards(self, s: dict[str, torch.Tensor], hold: torch.Tensor) -> tuple:
        """``(reward, success, out_of_workspace, info, hold)`` of a step from the state terms ``s``,
        each ``(num_envs, ...)``: ``ee``, ``cube_pos``, ``goal`` (3, m), ``cube_size`` (m),
        ``grasped`` (bool), ``action_rate``, ``joint_vel_sq``; ``hold`` (int32): consecutive steps
        above the goal before this one (lift), returned updated. Pure: no env state changes."""
        raise NotImplementedError

    def _out_of_workspace(self, cube_pos: torch.Tensor) -> torch.Tensor:
        xy = cube_pos[:, :2]
        return ((xy < self._ws_low) | (xy > self._ws_high)).any(1) | (cube_pos[:, 2] < -0.05)

    def _penalties(self, s: dict[str, torch.Tensor]) -> torch.Tensor:
        w = self.cfg.reward
        return w.action_rate * s["action_rate"] + w.joint_vel * s["joint_vel_sq"]

    def _evaluate(self, action: torch.Tensor):
        reward, success, out, info, hold = self.rewards(self._state, self.hold)
        self.hold.copy_(hold)
        return reward, out, success, info

    def _render_markers(self) -> list[Marker]:
        return [Marker(self.goal_pos, 0.015, (0.15, 0.75, 0.2, 0.8))]


class FrankaLiftEnv(_CubeTaskEnv):
    """Batched FrankaLift (see the module docstring); arguments as ``FrankaReachEnv``'s."""

    default_config = "franka_lift"

    def _goal(self, cube_pos: torch.Tensor, draw: torch.Tensor) -> torch.Tensor:
        return torch.cat([cube_pos[:, :2] + draw[:, :2], draw[:, 2:]], 1)

    def rewards(self, s, hold):
        w = self.cfg.reward
        z, rest = s["cube_pos"][:, 2], 0.5 * s["cube_size"]
        d_reach = (s["cube_pos"] - s["ee"]).norm(dim=1)
        progress = ((z - rest) / (s["goal"][:, 2] + w.lift_margin - rest)).clamp(0.0, 1.0)
        hold = torch.where(z >= s["goal"][:, 2], hold + 1, 0).to(torch.int32)
        success = hold >= self.cfg.hold_steps
        grasped = s["grasped"].float()
        reward = (
            w.reach * _closeness(d_reach, w.reach_std)
            + w.grasp * grasped
            + w.lift * grasped * progress
            + w.success_bonus * success.float()
            + self._penalties(s)
        )
        info = {"cube_height": z - rest, "grasped": s["grasped"]}
        return reward, success, self._out_of_workspace(s["cube_pos"]), info, hold


class FrankaPushEnv(_CubeTaskEnv):
    """Batched FrankaPush (see the module docstring); arguments as ``FrankaReachEnv``'s."""

    default_config = "franka_push"

    def _goal(self, cube_pos: torch.Tensor, draw: torch.Tensor) -> torch.Tensor:
        return torch.cat([cube_pos[:, :2] + draw[:, :2], cube_pos[:, 2:]], 1)

    def rewards(self, s, hold):
        w = self.cfg.reward
        cube, goal = s["cube_pos"], s["goal"]
        to_goal = goal[:, :2] - cube[:, :2]
        d_goal = to_goal.norm(dim=1)
        away = -to_goal / d_goal.clamp_min(1e-6)[:, None]  # behind the cube, seen from the goal
        behind = cube[:, :2] + (0.5 * s["cube_size"] + 0.02)[:, None] * away
        d_reach = (torch.cat([behind, cube[:, 2:]], 1) - s["ee"]).norm(dim=1)
        lifted = cube[:, 2] > 0.5 * s["cube_size"] + 0.01
        success = (d_goal < self.cfg.goal_radius) & ~lifted
        reward = (
            w.reach * _closeness(d_reach, w.reach_std)
            + w.push * _closeness(d_goal, w.push_std)
            + w.lifted * lifted.float()
            + w.success_bonus * success.float()
            + self._penalties(s)
        )
        info = {"goal_distance": d_goal}
        return reward, success, self._out_of_workspace(cube), info, hold


def _dr_ranges(r: RandomizationConfig) -> list[tuple[float, float]]:
    return [r.cube_mass, r.cube_size, r.cube_friction, r.joint_damping_scale, r.pd_gain_scale]


def _check_ranges(cfg: CubeTaskConfig) -> None:
    names = ["cube_mass", "cube_size", "cube_friction", "joint_damping_scale", "pd_gain_scale"]
    for name, (lo, hi) in zip(names, _dr_ranges(cfg.randomization), strict=True):
        if not 0.0 <= lo <= hi or (name in ("cube_mass", "cube_size") and lo <= 0.0):
            raise ValueError(
                f"env.randomization.{name}: expected 0 <= low <= high (> 0 for mass and size), got {[lo, hi]}"
            )
    if cfg.hold_steps < 1:
        raise ValueError(f"env.hold_steps: expected an integer >= 1, got {cfg.hold_steps}")
