"""Model (static, shared by every env) and Data (per env state, controls and parameters).

The Model is kept on the host as NumPy arrays: the step kernels are generated from it when the scene
is built (see ``codegen.py``), so its values end up as constants in the compiled code. Data lives on
the simulator's device as Warp arrays with the env ("world") dimension first.

Conventions (MuJoCo's): quaternions are ``(w, x, y, z)``; a free joint's ``qpos`` is position then
quaternion and its ``qvel`` is the linear velocity of the body origin in the world frame followed by
the angular velocity in the body frame; units are SI (m, rad, kg, s, N, N m).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import mujoco
import numpy as np
import warp as wp

__all__ = ["JointType", "CtrlMode", "Model", "Data", "dof_qposadr"]


class JointType(enum.IntEnum):
    """Joint types, numbered as in MuJoCo's ``mjtJoint``."""

    FREE = 0
    HINGE = 3
    SLIDE = 2


class CtrlMode(enum.IntEnum):
    """How a dof's actuator force is computed each substep."""

    FORCE = 0  # f = ctrl_force
    POSITION = 1  # f = kp (ctrl_position - q) - kv qd
    VELOCITY = 2  # f = kv (ctrl_velocity - qd)


@dataclass(frozen=True)
class Model:
    """Static description of a scene's kinematic trees (host NumPy arrays, float64 as compiled).

    Bodies are ordered parent before child; body 0 is the world. Shapes are given per field.
    """

    nq: int  # number of position coordinates
    nv: int  # number of dofs (velocity coordinates)
    nbody: int  # number of bodies, world included
    njnt: int  # number of joints
    body_parentid: np.ndarray  # (nbody,) int
    body_pos: np.ndarray  # (nbody, 3) position in the parent frame
    body_quat: np.ndarray  # (nbody, 4) orientation in the parent frame
    body_ipos: np.ndarray  # (nbody, 3) center of mass in the body frame
    body_iquat: np.ndarray  # (nbody, 4) principal inertia frame in the body frame
    body_mass: np.ndarray  # (nbody,) kg
    body_gravcomp: np.ndarray  # (nbody,) share of gravity compensated (MuJoCo's gravcomp), one per tree
    body_inertia: np.ndarray  # (nbody, 3) principal moments of inertia, kg m^2
    body_jntadr: np.ndarray  # (nbody,) first joint of the body, -1 if none
    body_jntnum: np.ndarray  # (nbody,)
    body_names: tuple[str, ...]  # (nbody,)
    jnt_type: np.ndarray  # (njnt,) JointType
    jnt_qposadr: np.ndarray  # (njnt,)
    jnt_dofadr: np.ndarray  # (njnt,)
    jnt_bodyid: np.ndarray  # (njnt,)
    jnt_pos: np.ndarray  # (njnt, 3) anchor in the body frame
    jnt_axis: np.ndarray  # (njnt, 3) axis in the body frame (unit)
    jnt_limited: np.ndarray  # (njnt,) bool
    jnt_range: np.ndarray  # (njnt, 2) rad or m
    jnt_names: tuple[str, ...]  # (njnt,)
    dof_parentid: np.ndarray  # (nv,) parent dof in the tree, -1 for a root dof
    dof_bodyid: np.ndarray  # (nv,)
    dof_jntid: np.ndarray  # (nv,)
    dof_armature: np.ndarray  # (nv,) kg m^2 or kg
    dof_damping: np.ndarray  # (nv,) N m s/rad or N s/m
    dof_kp: np.ndarray  # (nv,) default position gain from the model's actuators (0 if none)
    dof_kv: np.ndarray  # (nv,) default velocity gain from the model's actuators (0 if none)
    dof_force_range: np.ndarray  # (nv, 2) actuator force range (+-inf if unlimited)
    dof_ctrl_mode: np.ndarray  # (nv,) CtrlMode the model's actuator implies
    qpos0: np.ndarray  # (nq,) reference configuration (joint angles are measured from it)
    mjmodel: mujoco.MjModel  # the compiled model the arrays came from (reference, rendering)


@dataclass
class Data:
    """Per-env arrays on the simulator device; the leading dimension is ``nworld``.

    ``qpos``/``qvel`` are the state and are advanced in place by the step kernel (each env's thread
    reads and writes only its own row, so there is no hazard and no double buffer to swap).
    """

    qpos: wp.array2d  # (nworld, nq)
    qvel: wp.array2d  # (nworld, nv)
    xpos: wp.array2d  # (nworld, nbody) vec3, body frame positions for the current qpos
    xquat: wp.array2d  # (nworld, nbody) vec4 (w, x, y, z), body orientations for the current qpos
    qfrc_actuator: wp.array2d  # (nworld, nv) actuator force of the last substep (clamped)
    qfrc_applied: wp.array2d  # (nworld, nv) external generalized force, added every substep
    ctrl_mode: wp.array2d  # (nworld, nv) int32 CtrlMode
    ctrl_position: wp.array2d  # (nworld, nv) position targets
    ctrl_velocity: wp.array2d  # (nworld, nv) velocity targets
    ctrl_force: wp.array2d  # (nworld, nv) force commands
    dof_kp: wp.array2d  # (nworld, nv) per-env position gains
    dof_kv: wp.array2d  # (nworld, nv) per-env velocity gains
    dof_force_lo: wp.array2d  # (nworld, nv) per-env lower force limit
    dof_force_hi: wp.array2d  # (nworld, nv) per-env upper force limit
    dof_damping: wp.array2d  # (nworld, nv) per-env joint damping, N m s/rad or N s/m
    body_inertial: wp.array2d  # (nworld, max(1, nslot)) vec4: per-env scales of each inertial slot's
    # mass and principal moments of inertia (segments.inertial_slots), 1 as built


def dof_qposadr(model: Model) -> np.ndarray:
    """(nv,) qpos coordinate of each hinge/slide dof; -1 for a free joint's dofs (no single one)."""
    adr = np.full(model.nv, -1)
    for j in range(model.njnt):
        if model.jnt_type[j] != JointType.FREE:
            adr[model.jnt_dofadr[j]] = model.jnt_qposadr[j]
    return adr
