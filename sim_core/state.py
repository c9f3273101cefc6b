"""Torch views of a built scene's per-env arrays: ``rigid_solver.state``, ``.params`` and ``.contacts``.

Each field is a torch tensor that shares memory with the simulator's own Warp array (no copy;
valid for the scene's lifetime), with the env dimension ``nworld = max(n_envs, 1)`` first. They
are what the entity getters and setters read and write, without the selection, shape checks and
bookkeeping those add; the Warp counterparts for user kernels are in ``views.py``.

Reading is always safe. A write to ``qpos`` or to ``geom_size`` changes what the body poses and
the contacts a step starts from are computed from: call ``rigid_solver.state_changed()`` after it
(the setters do). ``vars(view)`` gives a view's tensors by name. Quaternions are (w, x, y, z);
units are SI (m, rad, kg, s, N, N m).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["RigidState", "RigidParams", "ContactBuffers"]


@dataclass(frozen=True)
class RigidState:
    """Per-env state, controls and forces."""

    qpos: torch.Tensor  # (nworld, nq) joint positions, rad or m; a free joint: position, quaternion
    qvel: torch.Tensor  # (nworld, nv) dof velocities; a free joint: world linear, body angular
    xpos: torch.Tensor  # (nworld, nbody, 3) body frame positions, m, as of the last poses() or step
    xquat: torch.Tensor  # (nworld, nbody, 4) body orientations (w, x, y, z), likewise
    ctrl_mode: torch.Tensor  # (nworld, nv) int32 sim_core.types.CtrlMode of each dof
    ctrl_position: torch.Tensor  # (nworld, nv) position targets, rad or m
    ctrl_velocity: torch.Tensor  # (nworld, nv) velocity targets, rad/s or m/s
    ctrl_force: torch.Tensor  # (nworld, nv) force commands, N m or N
    qfrc_applied: torch.Tensor  # (nworld, nv) external generalized forces, added every substep
    qfrc_actuator: torch.Tensor  # (nworld, nv) the last substep's actuator forces (clamped)


@dataclass(frozen=True)
class RigidParams:
    """Per-env model parameters; the step reads them every substep (domain randomization)."""

    dof_kp: torch.Tensor  # (nworld, nv) position gains, N m/rad or N/m
    dof_kv: torch.Tensor  # (nworld, nv) velocity gains, N m s/rad or N s/m
    dof_damping: torch.Tensor  # (nworld, nv) joint damping, N m s/rad or N s/m
    dof_force_lo: torch.Tensor  # (nworld, nv) lower actuator force limit, N m or N
    dof_force_hi: torch.Tensor  # (nworld, nv) upper actuator force limit
    body_inertial: torch.Tensor  # (nworld, nslot, 4) scales of an inertial slot's mass and principal
    # moments (1 as built; RigidEntity.inertial_slot names an entity's slot)
    geom_friction: torch.Tensor  # (nworld, ngeom) sliding friction; a pair's is the larger of its geoms'
    geom_size: torch.Tensor  # (nworld, ngeom, 3) MuJoCo's geom size (box: half edges), m. Both
    # (nworld, 0) in a scene without contacts


@dataclass(frozen=True)
class ContactBuffers:
    """The contacts of the last substep of the last step, and what the next step starts from, per
    slot (``rigid_solver.max_contacts`` slots per env; slots beyond ``count`` hold stale data).
    ``rigid_solver.get_contacts()`` gives them in Genesis' layout, masked and in the world frame."""

    count: torch.Tensor  # (nworld,) int32 contacts in the slots
    geom: torch.Tensor  # (nworld, max_contacts, 2) int32 geom ids (a, b); the normal points from a to b
    pos: torch.Tensor  # (nworld, max_contacts, 3) midway between the surfaces, m
    normal: torch.Tensor  # (nworld, max_contacts, 3) unit normal, world frame
    dist: torch.Tensor  # (nworld, max_contacts) signed gap, m (negative: penetration)
    force: torch.Tensor  # (nworld, max_contacts, 3) force on b along (normal, t1, t2), N
    rounds: torch.Tensor  # (nworld,) int32 solver rounds of the last substep
    warm_start_geom: torch.Tensor  # (nworld, rows, 2) int32 the warm start's geom pairs ((-2, dof): a
    # joint limit); (-1, -1) ends the list
    fresh: torch.Tensor  # (nworld,) int32 1: the next step may start from the contacts the last ended with
    # The contacts detected at the current state (at the end of the last step, or by ``poses()``
    # after a state was set), which the next step starts from:
    detected_count: torch.Tensor  # (nworld,) int32 contacts found, beyond the budget too
    detected_geom: torch.Tensor  # (nworld, max_contacts, 2) int32 their geom ids (the first
    # min(detected_count, max_contacts) slots hold them)
    detected_pos: torch.Tensor  # (nworld, max_contacts, 3) m
    detected_normal: torch.Tensor  # (nworld, max_contacts, 3)
    detected_dist: torch.Tensor  # (nworld, max_contacts) signed gap, m
    overflow: torch.Tensor  # (nworld,) int32 contacts the last step dropped for want of slots
    # The solver's scratch, for inspection: per env on CUDA; on the CPU one buffer the envs share
    # (stride 0 over envs) that holds the env stepped last, so read it in a scene of one env.
    jac: torch.Tensor  # (nworld, rows, nv, 3) each solver row's Jacobian (normal, t1, t2) per dof at
    # the last substep; rows: the max_contacts contacts (the velocity of geom b's body minus geom a's
    # at the contact point), then the limited joints
    jac_trees: torch.Tensor  # (nworld, rows, 4) int32 dof ranges [a0, a1), [b0, b1) that row was
    # written for (zero elsewhere); a contact that sat the substep out has empty ranges
