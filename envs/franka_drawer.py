"""``WarpGym/FrankaOpenDrawer-v0``: open the drawer of a cabinet standing in front of the arm.

The cabinet (``sim_core/assets/cabinet_drawer.xml``, a second articulated entity) stands with its
drawer's front toward the arm; the drawer slides out toward the arm on a limited joint, and a bar
handle runs across its front (along y) on two standoffs. The hand is held pointing down with its
fingers closing along x (``arm.yaw_offset``), so a grasp comes down on the bar from above. Success:
the drawer open at least ``open_distance`` (0.2 m). Episodes end by the time limit only (a
truncation); the success an episode reports is that of its last step.

Observation ``(num_envs, 37 + action_dim)`` float32 in the env's frame (the arm's base is the origin):

======  ====  ==================================================================
slice   size  content
======  ====  ==================================================================
0:7     7     arm joint angles minus the default pose, rad (+ noise)
7:14    7     arm joint velocities, rad/s (+ noise)
14:16   2     finger openings, m
16:19   3     end-effector position, m
19:25   6     hand x and z axes
25:28   3     handle centre, m (+ noise)
28:31   3     handle minus end-effector position, m
31:34   3     handle velocity relative to the end effector, m/s
34      1     drawer opening, m
35      1     drawer speed (opening rate), m/s
36      1     ``open_distance`` minus the opening, m
37:     A     the last action
======  ====  ==================================================================

Reward per control step, weights in ``configs/franka_open_drawer.toml`` (``t(x, s) = 1 - tanh(x / s)``)::

    reach * t(d_ee_handle, reach_std) + grasp * grasped + open * progress
    + success_bonus * success + action_rate * |a - a_prev|^2 + joint_vel * |qd|^2

``grasped``: both finger pads squeeze the handle toward each other (``arm.pads_squeeze``).
``progress``: the opening over ``open_distance + open_margin``, clipped to [0, 1]; it pays however
the drawer is pulled.

Domain randomization (``[env.randomization]``), drawn per env at every reset: the cabinet's place
(an xy box), the drawer joint's damping, the handle's friction and radius, and the arm's joint
damping and PD gains (scales of the model's). The drawer's mass and dry joint friction are not
randomized: ``sim_core`` keeps the mass of a body inside a kinematic tree fixed and does not
simulate MuJoCo's ``frictionloss``. Observation noise per step: ``[env.obs_noise]``.

``drawer_kernels.py`` computes all of it per env on the device (the reward's form:
``drawer_reward``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import warp as wp
from gymnasium.vector import AutoresetMode

import sim_core as sc
from sim_core.transforms import quat_rotate

from .arm import N_ARM
from .config import config_path, from_dict, merge, read_toml
from .drawer_kernels import OBS_DIM, DrawerTask, drawer_kernel
from .franka import ArmConfig, FrankaTaskEnv, SimConfig
from .render import RenderConfig

__all__ = ["FrankaOpenDrawerEnv", "DrawerTaskConfig", "OBS_DIM"]


@dataclass(frozen=True)
class CabinetConfig:
    place_low: tuple[float, float]  # xy box of the cabinet's centre on the floor, m
    place_high: tuple[float, float]


@dataclass(frozen=True)
class DrawerRandomizationConfig:
    """Uniform ranges ``[low, high]`` drawn per env at every reset (equal bounds: no randomization)."""

    drawer_damping: tuple[float, float]  # N s/m
    handle_friction: tuple[float, float]
    handle_radius: tuple[float, float]  # m
    joint_damping_scale: tuple[float, float]  # times the arm's joint damping
    pd_gain_scale: tuple[float, float]  # times the arm's kp and kv


@dataclass(frozen=True)
class DrawerObsNoiseConfig:
    joint_pos: float  # uniform +-, rad
    joint_vel: float  # uniform +-, rad/s
    handle_pos: float  # uniform +-, m


@dataclass(frozen=True)
class DrawerRewardConfig:
    reach: float  # weight of t(d_ee_handle, reach_std)
    reach_std: float  # m
    grasp: float  # weight of grasped
    open: float  # weight of progress
    open_margin: float  # progress is full this far past open_distance, m
    success_bonus: float  # added on every step that is a success
    action_rate: float  # weight of |a - a_prev|^2
    joint_vel: float  # weight of |qd|^2, per (rad/s)^2


@dataclass(frozen=True)
class DrawerTaskConfig:
    max_episode_steps: int  # control steps
    control_mode: Literal["joint_delta", "ee_delta", "ee_yaw_delta"]
    open_distance: float  # success: the drawer open at least this far, m
    sim: SimConfig
    arm: ArmConfig
    cabinet: CabinetConfig
    randomization: DrawerRandomizationConfig
    obs_noise: DrawerObsNoiseConfig
    reward: DrawerRewardConfig
    render: RenderConfig


def load_drawer_config(config: str, overrides: dict[str, Any] | None = None) -> DrawerTaskConfig:
    """The ``[env]`` table of a task config file, with ``overrides`` merged in, validated."""
    cfg = merge(read_toml(config_path(config)).get("env", {}), overrides)
    cfg = from_dict(DrawerTaskConfig, cfg, "env")
    _check(cfg)
    return cfg


class FrankaOpenDrawerEnv(FrankaTaskEnv):
    """Batched FrankaOpenDrawer (see the module docstring); arguments as ``FrankaReachEnv``'s."""

    default_config = "franka_open_drawer"
    step_noise_dim = 2 * N_ARM + 3
    reset_noise_dim = N_ARM + 2 + 3 + 2  # arm, cabinet xy, drawer and handle, arm scales
    info_keys = (("opening", float), ("grasped", bool))

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
        cfg = load_drawer_config(config or self.default_config, overrides)
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
        c = cfg.cabinet
        self._built_at = np.add(c.place_low, c.place_high) / 2  # the cabinet's place as built, m
        self.cabinet = self.scene.add_entity(sc.morphs.MJCF(file="cabinet_drawer", pos=(*self._built_at, 0.0)))
        self.build_scene()
        self._set_spaces(OBS_DIM + self.arm.action_dim, self.arm.action_dim)
        self._task = self._make_task(cfg)

    def _make_task(self, cfg: DrawerTaskConfig) -> DrawerTask:
        """The kernel's constants from the config and the built scene."""
        solver, e, cab, r = self.scene.sim.rigid_solver, self.arm.entity, self.cabinet, cfg.randomization
        m = solver.model.mjmodel
        k = DrawerTask()
        base, drawer = cab.get_joint("cabinet_x"), cab.get_joint("drawer")
        if cab.get_joint("cabinet_y").qs_idx[0] != base.qs_idx[0] + 1:
            raise ValueError("cabinet: expected its y slide right after its x slide")
        k.base_q, k.base_d = base.qs_idx[0], base.dofs_idx[0]
        k.drawer_q, k.drawer_d = drawer.qs_idx[0], drawer.dofs_idx[0]
        k.drawer_body = cab.get_link("drawer").idx
        handle = _geom_id(m, cab, "handle")
        k.handle = handle
        k.handle_local = wp.vec3(*m.geom_pos[handle])
        k.handle_size = wp.vec3(*m.geom_size[handle])
        fingers = [e.get_link("left_finger").idx, e.get_link("right_finger").idx]
        k.left_finger, k.right_finger = fingers
        pad = np.array([fingers.index(b) if b in fingers else -1 for b in m.geom_bodyid], dtype=np.int32)
        k.pad_finger = wp.array(pad, dtype=wp.int32, device=solver.wp_device)
        low = np.subtract(cfg.cabinet.place_low, self._built_at)
        k.place_low, k.place_span = (
            wp.vec2(*low),
            wp.vec2(*np.subtract(cfg.cabinet.place_high, cfg.cabinet.place_low)),
        )
        k.damping_range, k.friction_range = wp.vec2(*r.drawer_damping), wp.vec2(*r.handle_friction)
        k.radius_range = wp.vec2(*r.handle_radius)
        k.arm_damping_range, k.gain_range = wp.vec2(*r.joint_damping_scale), wp.vec2(*r.pd_gain_scale)
        nz = cfg.obs_noise
        k.noise_joint_pos, k.noise_joint_vel, k.noise_handle_pos = nz.joint_pos, nz.joint_vel, nz.handle_pos
        k.open_distance = cfg.open_distance
        w = cfg.reward
        for name in ("reach", "reach_std", "grasp", "open", "open_margin", "success_bonus", "action_rate"):
            setattr(k, name, getattr(w, name))
        k.joint_vel = w.joint_vel
        return k

    def _task_pass(self, phase, share, obs_out, out, episodes, noise):
        solver, arm = self.scene.sim.rigid_solver, self.arm
        views = [solver.state_view(), solver.contacts_view(), solver.reset_view(), solver.params_view()]
        inputs = [phase, share, self._task, arm.model, *views, arm.state, episodes, noise, obs_out, out]
        return drawer_kernel, inputs

    def cabinet_xy(self) -> torch.Tensor:
        """(num_envs, 2) the cabinet's centre on the floor in the env's frame, m."""
        base = self.cabinet.get_dofs_position()[:, :2]
        return base + torch.as_tensor(self._built_at, dtype=base.dtype, device=base.device)

    def handle_pos(self) -> torch.Tensor:
        """(num_envs, 3) the handle's centre in the env's frame, m."""
        drawer = self.cabinet.get_link("drawer")
        local = torch.as_tensor(np.asarray(self._task.handle_local), device=self.device)
        return drawer.get_pos() + quat_rotate(drawer.get_quat(), local.expand(self.num_envs, 3))


def _geom_id(m, entity, name: str) -> int:
    """The id of the entity's geom ``name`` in the compiled model."""
    for g in entity.geoms_idx:
        if m.geom(int(g)).name.split("/")[-1] == name:
            return int(g)
    raise ValueError(f"cabinet: no geom {name!r}")


def _check(cfg: DrawerTaskConfig) -> None:
    r = cfg.randomization
    for name in ("drawer_damping", "handle_friction", "handle_radius", "joint_damping_scale", "pd_gain_scale"):
        lo, hi = getattr(r, name)
        if not 0.0 <= lo <= hi or (name == "handle_radius" and lo <= 0.0):
            raise ValueError(
                f"env.randomization.{name}: expected 0 <= low <= high (> 0 for the radius), got {[lo, hi]}"
            )
    if not 0.0 < cfg.open_distance <= 0.3:
        raise ValueError(
            f"env.open_distance: expected a distance in (0, 0.3] m (the travel), got {cfg.open_distance}"
        )
    lo, hi = cfg.cabinet.place_low, cfg.cabinet.place_high
    if len(lo) != 2 or len(hi) != 2 or any(a > b for a, b in zip(lo, hi, strict=True)):
        raise ValueError(f"env.cabinet: expected place_low <= place_high (x, y), got {list(lo)}, {list(hi)}")
