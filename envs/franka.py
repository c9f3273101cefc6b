"""The Franka arm as the tasks use it: scene set-up, action modes, end-effector point, resets.

Dofs 0-6 are the arm joints (rad), 7-8 the finger slides (m). Actions act on the arm only:

- ``"joint_delta"``: 7 numbers; the arm's position targets move by ``joint_delta_scale * a`` rad and
  are clamped to the joint ranges.
- ``"ee_delta"``: 3 numbers; the end effector's target moves by ``ee_delta_scale * a`` m, turned into
  joint target displacements by damped least squares on the position Jacobian at the current state.

The end effector is the point ``ee_offset`` in the hand frame (0.1034 m along the hand's z axis:
between the fingertips, Franka's flange-to-TCP distance).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

import sim_core as sc
from sim_core.transforms import quat_rotate

from .ik import dls_step
from .vector_env import masked_assign

__all__ = ["ArmConfig", "SimConfig", "FrankaArm", "CONTROL_MODES"]

CONTROL_MODES = ("joint_delta", "ee_delta")
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
        self.entity = scene.add_entity(sc.morphs.MJCF(file="franka_panda"))
        self.action_dim = N_ARM if control_mode == "joint_delta" else 3

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

    # ---- state ----------------------------------------------------------------------------------
    def ee_pos(self) -> torch.Tensor:
        """(num_envs, 3) end-effector point in the env's frame (the arm's base is the origin), m."""
        return self.hand.get_pos() + quat_rotate(self.hand.get_quat(), self.ee_offset)

    # ---- control ----------------------------------------------------------------------------------
    def apply(self, action: torch.Tensor) -> None:
        """Move the arm's position targets by ``action (num_envs, action_dim)`` in [-1, 1]."""
        if self.control_mode == "joint_delta":
            delta = self.cfg.joint_delta_scale * action
        else:
            jac = self.entity.get_jacobian(self.hand, self.ee_offset)[:, :3, :N_ARM]
            delta = dls_step(jac, self.cfg.ee_delta_scale * action, self.cfg.ik_damping)
        torch.clamp(self.joint_targets + delta, self.q_low, self.q_high, out=self.joint_targets)
        self.entity.control_dofs_position(self.joint_targets, self.arm_dofs, unsafe=True)

    def reset(self, mask: torch.Tensor, noise: torch.Tensor) -> None:
        """Restart the masked envs at the default pose plus ``init_joint_noise * (2 noise - 1)``,
        at rest, targets on the new pose, fingers open. ``noise``: ``(num_envs, 7)`` uniform [0, 1).

        Writes the joint positions, velocities and position targets: everything of the arm's state
        a task changes (the tasks drive every dof in position mode and apply no external forces)."""
        q = self.default_q + self.cfg.init_joint_noise * (2.0 * noise - 1.0)
        q = torch.clamp(q, self.q_low, self.q_high)
        q_all = torch.cat([q, self.fingers], dim=1)
        self.entity.set_dofs_position(q_all, envs_idx=mask, unsafe=True)
        self.entity.control_dofs_position(q_all, envs_idx=mask, unsafe=True)
        masked_assign(self.joint_targets, mask, q)
