"""The Franka arm as the tasks use it: scene set-up, action modes, end-effector point, resets.

Dofs 0-6 are the arm joints (rad), 7-8 the finger slides (m). Actions move the arm:

- ``"joint_delta"``: 7 numbers; the arm's position targets move by ``joint_delta_scale * a`` rad and
  are clamped to the joint ranges.
- ``"ee_delta"``: 3 numbers; the end effector's target moves by ``ee_delta_scale * a`` m, turned into
  joint target displacements by damped least squares on the position Jacobian at the current state.
- ``"ee_yaw_delta"``: 4 numbers; as ``ee_delta`` for the first three, while the hand is held pointing
  down at a yaw that the fourth moves by ``yaw_delta_scale * a`` rad (within +-pi/2 of
  ``yaw_offset``, where each episode starts): damped least
  squares on the full 6-D Jacobian, the orientation error fed back with gain ``rot_gain`` per step.

In both end-effector modes a displacement never takes the end effector below ``ee_z_min`` (if set).

With ``gripper`` one more number commands both fingers: ``a = -1`` closed, ``+1`` open at
``finger_pos`` m (position targets, linear in between); without it the fingers hold ``finger_pos``.

The end effector is the point ``ee_offset`` in the hand frame (0.1034 m along the hand's z axis:
between the fingertips, Franka's flange-to-TCP distance).

The commands are computed on the device by ``arm.arm_action_kernel`` (one launch per control step);
a control step is one ``scene.step()`` of ``decimation * substeps`` substeps of ``dt / substeps``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import warp as wp

import sim_core as sc
from sim_core import host_threads
from sim_core.transforms import quat_rotate
from sim_core.types import JointType

from .arm import EE_DELTA, EE_YAW_DELTA, JOINT_DELTA, N_ARM, ArmModel, ArmState, arm_action_kernel
from .vector_env import WarpVectorEnv

__all__ = ["ArmConfig", "SimConfig", "FrankaArm", "FrankaTaskEnv", "CONTROL_MODES"]

CONTROL_MODES = ("joint_delta", "ee_delta", "ee_yaw_delta")
ARM_ACTION_DIM = {"joint_delta": 7, "ee_delta": 3, "ee_yaw_delta": 4}
_MODE_IDS = {"joint_delta": JOINT_DELTA, "ee_delta": EE_DELTA, "ee_yaw_delta": EE_YAW_DELTA}


@dataclass(frozen=True)
class SimConfig:
    dt: float  # physics step, s
    substeps: int  # integrator substeps per physics step
    decimation: int  # physics steps per control step (one scene.step of decimation * substeps substeps)
    env_spacing: tuple[float, float]  # display grid of the envs, m (never simulated)
    cpu_threads: int | None = None  # host threads of a CPU step (SimOptions.cpu_threads); None: torch's


@dataclass(frozen=True)
class ArmConfig:
    default_joint_pos: tuple[float, ...]  # (7,) arm joint angles the episodes start around, rad
    finger_pos: float  # target opening of each finger, m
    init_joint_noise: float  # uniform +- noise on the arm joints at reset, rad
    joint_delta_scale: float  # joint target change per control step at |a| = 1, rad
    ee_delta_scale: float  # end-effector target change per control step at |a| = 1, m
    ik_damping: float  # damped-least-squares lambda, m
    ee_offset: tuple[float, float, float]  # end-effector point in the hand frame, m
    yaw_delta_scale: float = 0.1  # ee_yaw_delta: hand yaw change per control step at |a| = 1, rad
    rot_gain: float = 0.2  # ee_yaw_delta: share of the orientation error corrected per control step
    yaw_offset: float = 0.0  # ee_yaw_delta: the hand's yaw at a yaw target of 0 (its reset), rad
    gripper: bool = False  # one more action dimension commands the fingers
    ee_z_min: float | None = None  # ee modes: no displacement takes the end effector below this, m
    gravcomp: float = 0.0  # share of the arm's gravity its controller compensates (MuJoCo's gravcomp)


class FrankaArm:
    """A plane and the bundled Franka in ``scene``; call ``build`` on the scene after construction."""

    def __init__(self, scene: sc.Scene, cfg: ArmConfig, control_mode: Literal["joint_delta", "ee_delta"]):
        if control_mode not in CONTROL_MODES:
            raise ValueError(f"control_mode: expected one of {CONTROL_MODES}, got {control_mode!r}")
        if len(cfg.default_joint_pos) != N_ARM:
            raise ValueError(
                f"arm.default_joint_pos: expected {N_ARM} angles, got {len(cfg.default_joint_pos)}"
            )
        self.scene, self.cfg, self.control_mode = scene, cfg, control_mode
        self.plane = scene.add_entity(sc.morphs.Plane())
        self.entity = scene.add_entity(sc.morphs.MJCF(file="franka_panda", gravcomp=cfg.gravcomp))
        self.action_dim = ARM_ACTION_DIM[control_mode] + int(cfg.gripper)

    def on_build(self, num_envs: int) -> None:
        """Device constants (``self.model``) and per-env controller state (``self.state``) once the
        scene is built."""
        e, solver, cfg = self.entity, self.scene.sim.rigid_solver, self.cfg
        dev = solver.device
        self.hand = e.get_link("hand")
        m = solver.model
        joints = [j.idx for j in e.joints[:N_ARM]]
        if any(JointType(int(m.jnt_type[j])) != JointType.HINGE for j in joints):
            raise ValueError("arm: the first 7 joints must be hinges")
        if not np.array_equal(solver.dof_qposadr()[e.dof_start : e.dof_start + 9], e.q_start + np.arange(9)):
            raise ValueError("arm: expected 9 dofs (7 hinges, 2 finger slides) with one position each")
        ranges = torch.as_tensor(m.jnt_range[joints], dtype=torch.float32)
        self.q_low, self.q_high = ranges[:, 0].to(dev), ranges[:, 1].to(dev)
        self.default_q = torch.tensor(cfg.default_joint_pos, dtype=torch.float32, device=dev)
        self.ee_offset = torch.tensor(cfg.ee_offset, dtype=torch.float32, device=dev)
        as_wp = lambda a, dtype: wp.array(np.asarray(a), dtype=dtype, device=solver.wp_device)  # noqa: E731
        k = ArmModel()
        k.q0, k.d0, k.hand, k.ee_offset = e.q_start, e.dof_start, self.hand.idx, wp.vec3(*cfg.ee_offset)
        k.joint_body = as_wp(m.jnt_bodyid[joints], wp.int32)
        k.joint_axis = as_wp(m.jnt_axis[joints], wp.vec3)
        k.joint_anchor = as_wp(m.jnt_pos[joints], wp.vec3)
        k.q_low, k.q_high, k.default_q = (wp.from_torch(t) for t in (self.q_low, self.q_high, self.default_q))
        k.finger_pos, k.init_joint_noise = cfg.finger_pos, cfg.init_joint_noise
        k.mode, k.gripper = _MODE_IDS[self.control_mode], int(cfg.gripper)
        k.joint_delta_scale, k.ee_delta_scale = cfg.joint_delta_scale, cfg.ee_delta_scale
        k.yaw_delta_scale, k.rot_gain, k.ik_damping = cfg.yaw_delta_scale, cfg.rot_gain, cfg.ik_damping
        k.yaw_offset = cfg.yaw_offset
        k.ee_z_min = -np.inf if cfg.ee_z_min is None else cfg.ee_z_min
        # (9,) the arm's gains and damping as built, which domain randomization scales
        self.kp0, self.kv0 = e.get_dofs_kp()[0].clone(), e.get_dofs_kv()[0].clone()
        self.damping0 = e.get_dofs_damping()[0].clone()
        k.kp0, k.kv0, k.damping0 = (wp.from_torch(t) for t in (self.kp0, self.kv0, self.damping0))
        self.model = k
        # per-env controller state, updated in place by the kernels
        self.joint_targets = self.default_q.repeat(num_envs, 1)  # (num_envs, 7) arm position targets, rad
        self.yaw_target = torch.zeros(num_envs, device=dev)  # (num_envs,) ee_yaw_delta's hand yaw, rad
        self.last_action = torch.zeros(num_envs, self.action_dim, device=dev)  # (num_envs, action_dim)
        self.prev_action = torch.zeros_like(self.last_action)
        self.floor_push = torch.zeros(num_envs, device=dev)  # (num_envs,) z action below ee_z_min, >= 0
        st = ArmState()
        st.joint_targets, st.yaw_target = wp.from_torch(self.joint_targets), wp.from_torch(self.yaw_target)
        st.last_action, st.prev_action = wp.from_torch(self.last_action), wp.from_torch(self.prev_action)
        st.floor_push = wp.from_torch(self.floor_push)
        self.state = st

    def record_action(self, action: torch.Tensor) -> host_threads.SharedLaunch:
        """The recorded launch of the action kernel reading ``action`` ``(num_envs, action_dim)``."""
        solver = self.scene.sim.rigid_solver
        inputs = [self.model, wp.from_torch(action), solver.state_view(), self.state]
        n, dev, threads = action.shape[0], solver.wp_device, solver.cpu_threads
        light = host_threads.LIGHT_ENVS_PER_SHARE  # tens of ns per env
        return host_threads.record_envs(arm_action_kernel, n, lambda s: [s, *inputs], dev, threads, light)

    # ---- state, for host-side inspection and controllers ------------------------------------------
    def ee_pos(self) -> torch.Tensor:
        """(num_envs, 3) end-effector point in the env's frame (the arm's base is the origin), m."""
        return self.hand.get_pos() + quat_rotate(self.hand.get_quat(), self.ee_offset)

    def ee_jacobian(self) -> torch.Tensor:
        """(num_envs, 6, nv) Jacobian of the end effector (linear rows, then angular), world frame."""
        return self.entity.get_jacobian(self.hand, self.ee_offset)


class FrankaTaskEnv(WarpVectorEnv):
    """Base of the Franka tasks: the vector env over a scene holding the floor and the arm.

    ``cfg`` is the task's validated config (``max_episode_steps``, ``control_mode``, ``sim``, ``arm``,
    ``render``); the task adds its entities to ``self.scene``, then builds it with ``build_scene``.
    """

    def __init__(self, cfg: Any, num_envs: int, *, render_mode, render_envs_idx, **env_kw: Any):
        super().__init__(num_envs, max_episode_steps=cfg.max_episode_steps, **env_kw)
        self.cfg = cfg
        sim = cfg.sim
        if int(sim.decimation) != sim.decimation or sim.decimation < 1:
            raise ValueError(f"env.sim.decimation: expected an integer >= 1, got {sim.decimation!r}")
        control_dt = sim.dt * sim.decimation
        self._set_render(render_mode, render_envs_idx, cfg.render, control_dt)
        # a control step is one scene step: its decimation physics steps as substeps (one launch)
        self.scene = sc.Scene(
            sim_options=sc.SimOptions(
                dt=control_dt, substeps=sim.substeps * sim.decimation, cpu_threads=sim.cpu_threads
            ),
            profiling_options=sc.ProfilingOptions(show_FPS=False),
        )
        self.arm = FrankaArm(self.scene, cfg.arm, cfg.control_mode)

    @staticmethod
    def fold(overrides: dict[str, Any], max_episode_steps: int | None, control_mode: str | None) -> dict:
        """The config overrides with the constructor's ``max_episode_steps``/``control_mode`` folded in."""
        extra = {"max_episode_steps": max_episode_steps, "control_mode": control_mode}
        return {**overrides, **{k: v for k, v in extra.items() if v is not None}}

    def build_scene(self) -> None:
        self.scene.build(n_envs=self.num_envs, env_spacing=self.cfg.sim.env_spacing)
        self.arm.on_build(self.num_envs)
        self.last_action = self.arm.last_action  # (num_envs, action_dim): the observation's last action

    def _set_spaces(self, obs_dim: int, act_dim: int) -> None:
        super()._set_spaces(obs_dim, act_dim)
        # the action kernel's launch, recorded now: a step loads no Warp module, so envs of one
        # process may step on several threads at once (Warp's module loading is not thread-safe)
        self._act = self.arm.record_action(self._action)

    def _apply_action(self) -> None:
        self.scene.sim.rigid_solver.poses()  # the IK reads the poses (no launch unless a state was set)
        self._act.launch()
        self.scene.step()
