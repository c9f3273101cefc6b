"""The Franka arm as the tasks use it: scene set-up, action modes, end-effector point, resets.

Dofs 0-6 are the arm joints (rad), 7-8 the finger slides (m). Actions move the arm:

- ``"joint_delta"``: 7 numbers; the arm's position targets move by ``joint_delta_scale * a`` rad and
  are clamped to the joint ranges.
- ``"ee_delta"``: 3 numbers; the end effector's target moves by ``ee_delta_scale * a`` m, turned into
  joint target displacements by damped least squares on the position Jacobian at the current state.
- ``"ee_yaw_delta"``: 4 numbers; as ``ee_delta`` for the first three, while the hand is held pointing
  down at a yaw that the fourth moves by ``yaw_delta_scale * a`` rad (within +-pi/2): damped least
  squares on the full 6-D Jacobian, the orientation error fed back with gain ``rot_gain`` per step.

In both end-effector modes a displacement never takes the end effector below ``ee_z_min`` (if set).

With ``gripper`` one more number commands both fingers: ``a = -1`` closed, ``+1`` open at
``finger_pos`` m (position targets, linear in between); without it the fingers hold ``finger_pos``.

The end effector is the point ``ee_offset`` in the hand frame (0.1034 m along the hand's z axis:
between the fingertips, Franka's flange-to-TCP distance).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch

import sim_core as sc
from sim_core.transforms import quat_conj, quat_mul, quat_rotate

from .ik import dls_step
from .vector_env import WarpVectorEnv, masked_assign

__all__ = ["ArmConfig", "SimConfig", "FrankaArm", "FrankaTaskEnv", "CONTROL_MODES"]

CONTROL_MODES = ("joint_delta", "ee_delta", "ee_yaw_delta")
ARM_ACTION_DIM = {"joint_delta": 7, "ee_delta": 3, "ee_yaw_delta": 4}
HAND_DOWN = (0.0, 1.0, 0.0, 0.0)  # the hand pointing down (its z axis along -z), yaw 0
N_ARM = 7


@dataclass(frozen=True)
class SimConfig:
    dt: float  # physics step, s
    substeps: int  # integrator substeps per physics step
    decimation: int  # physics steps per control step
    env_spacing: tuple[float, float]  # display grid of the envs, m (never simulated)


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
        """Cache device constants once the scene is built."""
        e, dev = self.entity, self.scene.sim.rigid_solver.device
        self.hand = e.get_link("hand")
        self.arm_dofs = range(N_ARM)  # dofs_idx_local as a range: the API's cheapest selection
        m = self.scene.sim.rigid_solver.model
        ranges = torch.as_tensor(m.jnt_range[[j.idx for j in e.joints[:N_ARM]]], dtype=torch.float32)
        self.q_low, self.q_high = ranges[:, 0].to(dev), ranges[:, 1].to(dev)
        self.default_q = torch.tensor(self.cfg.default_joint_pos, dtype=torch.float32, device=dev)
        self.ee_offset = torch.tensor(self.cfg.ee_offset, dtype=torch.float32, device=dev)
        self.fingers = torch.full((num_envs, 2), self.cfg.finger_pos, device=dev)
        self.joint_targets = self.default_q.repeat(num_envs, 1)  # (num_envs, 7) arm position targets
        self.yaw_target = torch.zeros(num_envs, device=dev)  # (num_envs,) ee_yaw_delta's hand yaw, rad
        self._down = torch.tensor(HAND_DOWN, device=dev)
        self._targets = torch.zeros(num_envs, N_ARM + 2, device=dev)  # arm and finger targets together

    # ---- state ----------------------------------------------------------------------------------
    def ee_pos(self) -> torch.Tensor:
        """(num_envs, 3) end-effector point in the env's frame (the arm's base is the origin), m."""
        return self.hand.get_pos() + quat_rotate(self.hand.get_quat(), self.ee_offset)

    def ee_jacobian(self) -> torch.Tensor:
        """(num_envs, 6, nv) Jacobian of the end effector (linear rows, then angular), world frame."""
        return self.entity.get_jacobian(self.hand, self.ee_offset)

    # ---- control ----------------------------------------------------------------------------------
    def apply(self, action: torch.Tensor, jac: torch.Tensor | None = None) -> None:
        """Move the arm's position targets by ``action (num_envs, action_dim)`` in [-1, 1]; ``jac``:
        the end effector's Jacobian ``(num_envs, 6, nv)`` at the current state if already known."""
        cfg = self.cfg
        if self.control_mode == "joint_delta":
            delta = cfg.joint_delta_scale * action[:, :N_ARM]
        elif self.control_mode == "ee_delta":
            jac = self.ee_jacobian() if jac is None else jac
            delta = dls_step(jac[:, :3, :N_ARM], self._ee_move(action, jac), cfg.ik_damping)
        else:
            self.yaw_target.add_(cfg.yaw_delta_scale * action[:, 3]).clamp_(-torch.pi / 2, torch.pi / 2)
            half = 0.5 * self.yaw_target
            yaw = torch.stack([half.cos(), 0.0 * half, 0.0 * half, half.sin()], 1)
            err = quat_mul(quat_mul(yaw, self._down), quat_conj(self.hand.get_quat()))
            rot = 2.0 * cfg.rot_gain * err[:, 1:] * torch.sign(err[:, :1])  # small-angle rotation vector
            jac = self.ee_jacobian() if jac is None else jac
            dx = torch.cat([self._ee_move(action, jac), rot], 1)
            delta = dls_step(jac[:, :, :N_ARM], dx, cfg.ik_damping)
        torch.clamp(self.joint_targets + delta, self.q_low, self.q_high, out=self.joint_targets)
        if not cfg.gripper:
            self.entity.control_dofs_position(self.joint_targets, self.arm_dofs, unsafe=True)
            return
        self.fingers.copy_((0.5 * cfg.finger_pos * (action[:, -1:] + 1.0)).expand(-1, 2))
        torch.cat([self.joint_targets, self.fingers], 1, out=self._targets)
        self.entity.control_dofs_position(self._targets, unsafe=True)

    def _ee_move(self, action: torch.Tensor, jac: torch.Tensor) -> torch.Tensor:
        """(num_envs, 3) end-effector displacement of ``action``, kept from taking the end effector's
        target below ``ee_z_min``. The target is the end effector's position plus the joint targets'
        lead over the joints (through ``jac``): where the PD targets put it (without ``gravcomp`` the
        hand sags below it under its weight, about a centimetre low over the floor). The tasks set it
        so the hand reaches the cube's centre but does not press into the floor, which is never
        useful and makes contacts, the costliest part of a step."""
        move = self.cfg.ee_delta_scale * action[:, :3]
        if self.cfg.ee_z_min is None:
            return move
        lead = self.joint_targets - self.entity.get_dofs_position(self.arm_dofs)
        target_z = self.ee_pos()[:, 2] + (jac[:, 2, :N_ARM] * lead).sum(1)
        dz = torch.maximum(move[:, 2], self.cfg.ee_z_min - target_z)
        return torch.cat([move[:, :2], dz[:, None]], 1)

    def reset(self, mask: torch.Tensor, noise: torch.Tensor) -> None:
        """Restart the masked envs at the default pose plus ``init_joint_noise * (2 noise - 1)``,
        at rest, targets on the new pose, fingers open. ``noise``: ``(num_envs, 7)`` uniform [0, 1).

        Writes the joint positions, velocities and position targets: everything of the arm's state
        a task changes (the tasks drive every dof in position mode and apply no external forces)."""
        q = self.default_q + self.cfg.init_joint_noise * (2.0 * noise - 1.0)
        q = torch.clamp(q, self.q_low, self.q_high)
        q_all = torch.cat([q, torch.full_like(self.fingers, self.cfg.finger_pos)], dim=1)
        self.entity.set_dofs_position(q_all, envs_idx=mask, unsafe=True)
        self.entity.control_dofs_position(q_all, envs_idx=mask, unsafe=True)
        masked_assign(self.joint_targets, mask, q)
        masked_assign(self.yaw_target, mask, 0.0)


class FrankaTaskEnv(WarpVectorEnv):
    """Base of the Franka tasks: the vector env over a scene holding the floor and the arm.

    ``cfg`` is the task's validated config (``max_episode_steps``, ``control_mode``, ``sim``, ``arm``,
    ``render``); the task adds its entities to ``self.scene``, then builds it with ``build_scene``.
    """

    def __init__(self, cfg: Any, num_envs: int, *, render_mode, render_envs_idx, **env_kw: Any):
        super().__init__(num_envs, max_episode_steps=cfg.max_episode_steps, **env_kw)
        self.cfg = cfg
        self._set_render(render_mode, render_envs_idx, cfg.render, cfg.sim.dt * cfg.sim.decimation)
        self.scene = sc.Scene(
            sim_options=sc.SimOptions(dt=cfg.sim.dt, substeps=cfg.sim.substeps),
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

    def _apply_action(self, action: torch.Tensor) -> None:
        self._prev_action.copy_(self.last_action)
        self.last_action.copy_(action)
        self.arm.apply(action, self._jac_hint())
        for _ in range(self.cfg.sim.decimation):
            self.scene.step()

    def _jac_hint(self) -> torch.Tensor | None:
        """The end effector's Jacobian at the current state if the task already has it."""
        return None
