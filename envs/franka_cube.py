"""``WarpGym/FrankaLift-v0``, ``WarpGym/FrankaPush-v0``, ``WarpGym/FrankaPickPlace-v0`` and
``WarpGym/FrankaStack-v0``: a cube on the floor in front of the arm (Stack: two).

- **Lift**: grasp the cube and lift it so that its centre is at least at the goal height (a point
  drawn above the cube's start; only its height counts). Success: the cube has been at or above the
  goal height for ``hold_steps`` consecutive control steps.
- **Push**: push the cube along the floor until its centre is within ``goal_radius`` of a goal point
  drawn ahead of it, without lifting it. Success: within the radius, resting on the floor.
- **PickPlace**: grasp the cube and carry it to a goal point drawn in a box around and above its
  start (a goal drawn below the cube's resting height lies on the floor). Success, as ManiSkill3's
  PickCube defines it: the cube's centre within ``goal_radius`` of the goal and the arm at rest, its
  seven joint speeds ``|qd|`` (2-norm) at most ``rest_speed``.
- **Stack**: grasp the (red) cube and stack it on the other (blue) one, ``B``, then let go of it.
  The goal is where the cube's centre rests centred on B, following B. Success: the cube centred
  on B within half its edge, at its height on B within ``stack_tol``, in contact with B, its
  speed at most ``static_speed``, and the fingers off it and open at least its edge plus
  ``open_width``.

Episodes end by the time limit (truncation) or when a cube leaves the workspace (termination); a
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
43:46   3     goal position (stack: the cube's place on B), m
46:49   3     goal minus cube position, m
49:     A     the last action
======  ====  ==================================================================

Rewards per control step, weights in ``configs/franka_lift.toml`` / ``franka_push.toml`` /
``franka_pick_place.toml`` / ``franka_stack.toml`` (``d`` distances in m, ``t(x, s) = 1 - tanh(x / s)``)::

    lift: reach * t(d_ee_cube, reach_std) + grasp * grasped + lift * grasped * progress
          + success_bonus * success + penalties
    push: reach * t(d_ee_behind, reach_std) + push * t(d_cube_goal, push_std) + lifted * lifted
          + success_bonus * success + penalties
    pick-place: reach * t(d_ee_cube, reach_std) + grasp * grasped
          + place * grasped * t(d_cube_goal, place_std) + lift * grasped * rise
          + rest * placed * t(|qd|, rest_std)
          + success_bonus * success + penalties
    stack: not placed: reach * t(d_ee_cube, reach_std) + grasp * grasped
                       + place * grasped * t(d_cube_goal, place_std)
           placed: reach + grasp + place + release * (gripper command + not touched) / 2
                   + still * t(|v_cube|, still_std)
          + success_bonus * success + penalties
    penalties: action_rate * |a - a_prev|^2 + joint_vel * |qd|^2 + floor_push * pushed

``grasped``: both finger pads squeeze the cube toward each other (each pad's contact force on it at
least 0.5 N along the fingers' closing direction and within 60 degrees of it, at the last substep;
pads pressing down on its top do not count).
``progress``: the cube's rise toward ``lift_margin`` above the goal height, clipped to [0, 1] (a
policy paid up to the goal height alone hovers right at it, and a millimetre of sag fails it).
``rise``: pick-place, the cube's rise from resting toward the goal's height, clipped to [0, 1] (1 for
a goal on the floor): the place term alone teaches the high goals last, its pull fading with distance.
``pushed``: the z action that ``ee_z_min`` discarded this step (action units, 0 to 2): pressing
down where the hand cannot go moves nothing, so without a cost a policy that descended to the cube
keeps pressing once it holds it, and learns to lift late.
``d_ee_behind``: from the end effector to the point just behind the cube on the side away from the
goal, at its height.
``placed``: pick-place, the cube's centre within ``goal_radius`` of the goal; stack, the cube on B
as its success needs (centred, at its height, in contact). ``gripper command``: the step's gripper
action from 0 (closed) to 1 (open); the command, not the fingers' opening, which a held cube blocks.
``touched``: a finger touches the cube.

Domain randomization (``[env.randomization]``), drawn per env at every reset through per-env model
parameters: cube mass, edge length and friction (each cube's own in Stack), joint damping (scale of
the model's), PD gains (scale of the model's kp and kv). Observation noise per step:
``[env.obs_noise]``.

``cube_kernels.py`` computes all of it per env on the device (the rewards' forms: ``lift_reward``,
``push_reward``, ``pick_place_reward``, ``stack_reward``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import warp as wp
from gymnasium.vector import AutoresetMode

import sim_core as sc

from .arm import N_ARM
from .config import config_path, from_dict, merge, read_toml
from .cube_kernels import LIFT, OBS_DIM, PICK_PLACE, PUSH, STACK, CubeTask, cube_kernel, cube_rewards_kernel
from .franka import ArmConfig, FrankaTaskEnv, SimConfig
from .render import Marker, RenderConfig

__all__ = ["FrankaLiftEnv", "FrankaPushEnv", "FrankaPickPlaceEnv", "FrankaStackEnv", "CubeTaskConfig"]
__all__ += ["OBS_DIM"]


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
    floor_push: float = 0.0  # weight of the z action that ee_z_min discards (a penalty: < 0)
    grasp: float = 0.0  # lift: weight of grasped
    lift: float = 0.0  # lift: weight of grasped * progress; pick-place: of grasped * rise
    lift_margin: float = 0.0  # lift: progress is full this far above the goal height, m
    push: float = 0.0  # push: weight of t(d_cube_goal, push_std)
    push_std: float = 0.1  # m
    lifted: float = 0.0  # push: weight of the cube being off the floor (a penalty: < 0)
    place: float = 0.0  # pick-place: weight of grasped * t(d_cube_goal, place_std)
    place_std: float = 0.1  # m
    rest: float = 0.0  # pick-place: weight of placed * t(|qd|, rest_std)
    rest_std: float = 0.2  # rad/s
    release: float = 0.0  # stack: weight of placed * (opened + not touched) / 2
    still: float = 0.0  # stack: weight of placed * t(|v_cube|, still_std)
    still_std: float = 0.05  # m/s


@dataclass(frozen=True)
class CubeTaskConfig:
    max_episode_steps: int  # control steps
    control_mode: Literal["joint_delta", "ee_delta", "ee_yaw_delta"]
    goal_low: tuple[float, float, float]  # lift, pick-place: goal offset from the cube's start (x, y,
    goal_high: tuple[float, float, float]  # height of its centre above the floor); push: (dx, dy, unused), m
    goal_radius: float  # push, pick-place: success radius, m
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
    rest_speed: float = 0.0  # pick-place: success needs the arm's joint speeds |qd| at most this, rad/s
    pair_distance: tuple[float, float] = (0.0, 0.0)  # stack: the cubes' centres this far apart at reset, m
    stack_tol: float = 0.0  # stack: the cube's centre within this of its height on B, m
    static_speed: float = 0.0  # stack: the cube's speed at most this, m/s
    open_width: float = 0.0  # stack: the fingers open at least the cube's edge plus this, m


def load_cube_config(config: str, overrides: dict[str, Any] | None = None) -> CubeTaskConfig:
    """The ``[env]`` table of a task config file, with ``overrides`` merged in, validated."""
    return from_dict(CubeTaskConfig, merge(read_toml(config_path(config)).get("env", {}), overrides), "env")


class _CubeTaskEnv(FrankaTaskEnv):
    """The arm, a free cube and a goal; the tasks differ in goals, rewards and success."""

    step_noise_dim = 2 * N_ARM + 3
    reset_noise_dim = N_ARM + 3 + 3 + 5  # arm, cube xy and yaw, goal, randomization
    default_config: str = ""
    task: int = LIFT
    cube_color = (0.85, 0.45, 0.2, 1.0)  # RGBA in pictures
    base_color = (0.2, 0.45, 0.85, 1.0)  # stack: B's

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
        first_env: int = 0,
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
            first_env=first_env,
            render_mode=render_mode,
            render_envs_idx=render_envs_idx,
        )
        c = cfg.cube
        x0 = 0.5 * (c.spawn_low[0] + c.spawn_high[0])
        material = sc.materials.Rigid(rho=c.density, friction=c.friction)
        box = sc.morphs.Box(size=(c.size,) * 3, pos=(x0, 0.0, c.size / 2), color=self.cube_color)
        self.cube = self.scene.add_entity(box, material=material)
        self.base_cube = None  # stack: the cube the other is stacked on
        if self.task == STACK:
            at = (x0, 2 * c.size, c.size / 2)
            self.base_cube = self.scene.add_entity(
                sc.morphs.Box(size=(c.size,) * 3, pos=at, color=self.base_color), material=material
            )
        self.build_scene()
        n, dev = self.num_envs, self.device
        # per-env episode state, updated in place by the kernel
        self.goal_pos = torch.zeros(n, 3, device=dev)  # (num_envs, 3) m
        self.cube_size = torch.full((n,), c.size, device=dev)  # (num_envs,) edge length this episode, m
        self.base_size = torch.full((n,), c.size, device=dev)  # (num_envs,) stack: B's edge this episode, m
        self.hold = torch.zeros(n, dtype=torch.int32, device=dev)  # lift: consecutive steps above the goal
        self._set_spaces(OBS_DIM + self.arm.action_dim, self.arm.action_dim)
        self._task = self._make_task(cfg)

    def _make_task(self, cfg: CubeTaskConfig) -> CubeTask:
        """The kernel's constants from the config and the built scene."""
        solver, e, c, r = self.scene.sim.rigid_solver, self.arm.entity, cfg.cube, cfg.randomization
        free = self.cube.joints[0]
        k = CubeTask()
        k.task, k.q0, k.d0 = self.task, free.qs_idx[0], free.dofs_idx[0]
        k.geom, k.slot = self.cube.geoms_idx[0], self.cube.inertial_slot
        fingers = [e.get_link("left_finger").idx, e.get_link("right_finger").idx]
        k.left_finger, k.right_finger = fingers
        geom_body = solver.model.mjmodel.geom_bodyid
        pad = np.array([fingers.index(b) if b in fingers else -1 for b in geom_body], dtype=np.int32)
        k.pad_finger = wp.array(pad, dtype=wp.int32, device=solver.wp_device)
        k.built_mass = float(solver.model.body_mass[self.cube.links[0].idx])
        k.built_size = c.size
        k.spawn_low, k.spawn_span = wp.vec2(*c.spawn_low), wp.vec2(*np.subtract(c.spawn_high, c.spawn_low))
        k.yaw_range = c.yaw_range
        k.goal_low, k.goal_span = wp.vec3(*cfg.goal_low), wp.vec3(*np.subtract(cfg.goal_high, cfg.goal_low))
        k.ws_low, k.ws_high = wp.vec2(*cfg.workspace_low), wp.vec2(*cfg.workspace_high)
        k.mass_range, k.size_range, k.friction_range = (wp.vec2(*x) for x in _dr_ranges(r)[:3])
        k.damping_range, k.gain_range = (wp.vec2(*x) for x in _dr_ranges(r)[3:])
        nz = cfg.obs_noise
        k.noise_joint_pos, k.noise_joint_vel, k.noise_cube_pos = nz.joint_pos, nz.joint_vel, nz.cube_pos
        w = cfg.reward
        for name in ("reach", "reach_std", "grasp", "lift", "lift_margin", "push", "push_std", "lifted"):
            setattr(k, name, getattr(w, name))
        k.place, k.place_std, k.rest, k.rest_std = w.place, w.place_std, w.rest, w.rest_std
        k.success_bonus, k.action_rate, k.joint_vel = w.success_bonus, w.action_rate, w.joint_vel
        k.floor_push = w.floor_push
        k.hold_steps, k.goal_radius, k.rest_speed = cfg.hold_steps, cfg.goal_radius, cfg.rest_speed
        k.q1 = k.d1 = k.geom_b = k.slot_b = -1
        if self.base_cube is not None:
            base = self.base_cube.joints[0]
            k.q1, k.d1 = base.qs_idx[0], base.dofs_idx[0]
            k.geom_b, k.slot_b = self.base_cube.geoms_idx[0], self.base_cube.inertial_slot
        k.pair_low, k.pair_high = cfg.pair_distance
        k.stack_tol, k.static_speed, k.open_width = cfg.stack_tol, cfg.static_speed, cfg.open_width
        k.release, k.still, k.still_std = w.release, w.still, w.still_std
        return k

    def _task_pass(self, phase, share, obs_out, out, episodes, noise):
        solver, arm = self.scene.sim.rigid_solver, self.arm
        views = [solver.state_view(), solver.contacts_view(), solver.reset_view(), solver.params_view()]
        episode = [wp.from_torch(self.goal_pos, dtype=wp.vec3), wp.from_torch(self.cube_size)]
        episode += [wp.from_torch(self.base_size), wp.from_torch(self.hold), episodes]
        inputs = [phase, share, self._task, arm.model, *views, arm.state, *episode, noise, obs_out, out]
        return cube_kernel, inputs

    def rewards(self, s: dict[str, torch.Tensor], hold: torch.Tensor) -> tuple:
        """``(reward, success, out_of_workspace, info, hold)`` of the task's reward for given state
        terms ``s``, each ``(n, ...)``: ``ee``, ``cube_pos``, ``goal`` (3, m), ``cube_size`` (m),
        ``grasped`` (bool), ``action_rate``, ``joint_vel_sq``, and for Stack ``cube_speed`` (m/s),
        ``on_base`` and ``touched`` (bool), ``opening`` (m), ``gripper_command`` (0 closed to 1 open),
        ``floor_push`` (the z action the floor discarded) (``cube_kernels.Terms``; 0 / False when
        absent); ``hold`` (int32): consecutive steps above the goal before this one (lift), returned
        updated. The same ``@wp.func`` as the step's; pure: no env state changes."""
        n, dev = hold.shape[0], self.device
        f32 = lambda key: s[key].to(device=dev, dtype=torch.float32).contiguous()  # noqa: E731
        vec = lambda key: wp.from_torch(f32(key), dtype=wp.vec3)  # noqa: E731
        out = [torch.empty(n, device=dev), torch.empty(n, dtype=torch.bool, device=dev)]
        out += [torch.empty(n, dtype=torch.bool, device=dev), torch.empty(n, device=dev)]
        out += [torch.empty(n, dtype=torch.int32, device=dev)]
        inputs = [self._task, vec("ee"), vec("cube_pos"), wp.from_torch(f32("cube_size")), vec("goal")]
        inputs += [wp.from_torch(s["grasped"].to(dev).contiguous(), dtype=wp.bool)]
        inputs += [wp.from_torch(f32("action_rate")), wp.from_torch(f32("joint_vel_sq"))]
        inputs += [wp.from_torch(hold.to(device=dev, dtype=torch.int32).contiguous())]
        zeros, no = torch.zeros(n, device=dev), torch.zeros(n, dtype=torch.bool, device=dev)
        inputs += [wp.from_torch(f32("cube_speed") if "cube_speed" in s else zeros)]
        for key in ("on_base", "touched"):
            inputs += [wp.from_torch(s[key].to(dev).contiguous() if key in s else no, dtype=wp.bool)]
        for key in ("opening", "gripper_command", "floor_push"):
            inputs += [wp.from_torch(f32(key) if key in s else zeros)]
        outputs = [wp.from_torch(t, dtype=wp.bool) if t.dtype == torch.bool else wp.from_torch(t) for t in out]
        wp.launch(
            cube_rewards_kernel,
            dim=n,
            inputs=inputs,
            outputs=outputs,
            device=self.scene.sim.rigid_solver.wp_device,
        )
        reward, success, out_of_workspace, info, hold = out
        return reward, success, out_of_workspace, self._reward_info(info, s), hold

    def _reward_info(self, info: torch.Tensor, s: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def _render_markers(self) -> list[Marker]:
        return [Marker(self.goal_pos, 0.015, (0.15, 0.75, 0.2, 0.8))]


class FrankaLiftEnv(_CubeTaskEnv):
    """Batched FrankaLift (see the module docstring); arguments as ``FrankaReachEnv``'s."""

    default_config = "franka_lift"
    task = LIFT
    info_keys = (("cube_height", float), ("grasped", bool))

    def _reward_info(self, info, s):
        return {"cube_height": info, "grasped": s["grasped"]}


class FrankaPushEnv(_CubeTaskEnv):
    """Batched FrankaPush (see the module docstring); arguments as ``FrankaReachEnv``'s."""

    default_config = "franka_push"
    task = PUSH
    info_keys = (("goal_distance", float),)

    def _reward_info(self, info, s):
        return {"goal_distance": info}


class FrankaPickPlaceEnv(_CubeTaskEnv):
    """Batched FrankaPickPlace (see the module docstring); arguments as ``FrankaReachEnv``'s."""

    default_config = "franka_pick_place"
    task = PICK_PLACE
    info_keys = (("goal_distance", float), ("grasped", bool))

    def _reward_info(self, info, s):
        return {"goal_distance": info, "grasped": s["grasped"]}


class FrankaStackEnv(_CubeTaskEnv):
    """Batched FrankaStack (see the module docstring); arguments as ``FrankaReachEnv``'s."""

    default_config = "franka_stack"
    task = STACK
    cube_color = (0.85, 0.2, 0.2, 1.0)
    reset_noise_dim = _CubeTaskEnv.reset_noise_dim + 3  # B's mass, edge and friction
    info_keys = (("goal_distance", float), ("grasped", bool))

    def _reward_info(self, info, s):
        return {"goal_distance": info, "grasped": s["grasped"]}

    def _render_markers(self) -> list[Marker]:
        return []


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
    lo, hi = cfg.pair_distance
    if not 0.0 <= lo <= hi:
        raise ValueError(f"env.pair_distance: expected 0 <= low <= high, got {[lo, hi]}")
    for name in ("goal_radius", "rest_speed", "stack_tol", "static_speed", "open_width"):
        if not getattr(cfg, name) >= 0.0:
            raise ValueError(f"env.{name}: expected a value >= 0, got {getattr(cfg, name)}")
