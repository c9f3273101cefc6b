"""Warp views of a built scene's per-env arrays, for user kernels that work on the device.

A task layer that computes observations, rewards and resets in its own Warp kernels reads and
writes the simulator's arrays directly, with no host round trip. ``RigidSolver`` hands them out as
Warp structs of its own arrays (no copies, valid for the scene's lifetime; every array has the env
dimension ``nworld`` first):

- ``state_view()`` -> ``StateView``: positions, velocities, body poses, position controls;
- ``params_view()`` -> ``ParamsView``: the per-env model parameters (gains, damping, masses,
  friction, geom sizes), for domain randomization;
- ``contacts_view()`` -> ``ContactsView``: the contacts and forces of the last substep;
- ``reset_view()`` -> ``ResetView``: what ``reset_env`` restores.

The simulator keeps derived data (body poses, the contacts a step starts from) per env and
recomputes it only where the state changed. A kernel that writes an env's ``qpos``, ``qvel`` or a
geom size must therefore flag that env with ``mark_changed`` (``reset_env`` does it), and the host
must call ``RigidSolver.state_changed_by_kernel()`` after the launch; the next ``poses()`` and
``step()`` then bring exactly the flagged envs up to date. Neither reads device memory.

Quaternions are (w, x, y, z) as in MuJoCo (``wp.quat`` is (x, y, z, w): convert with ``quat_of``).
"""

from __future__ import annotations

import warp as wp

__all__ = [
    "StateView",
    "ParamsView",
    "ContactsView",
    "ResetView",
    "mark_changed",
    "reset_env",
    "env_error",
    "quat_of",
]


@wp.struct
class StateView:
    """Per-env state and position controls (``RigidSolver.state_view()``)."""

    qpos: wp.array2d(dtype=wp.float32)  # (nworld, nq) joint positions, rad or m; a free joint: pos, quat
    qvel: wp.array2d(dtype=wp.float32)  # (nworld, nv) dof velocities; a free joint: world linear, body angular
    xpos: wp.array2d(dtype=wp.vec3)  # (nworld, nbody) body frame positions, m, as of the last poses()/step()
    xquat: wp.array2d(dtype=wp.vec4)  # (nworld, nbody) body orientations (w, x, y, z), likewise
    ctrl_mode: wp.array2d(dtype=wp.int32)  # (nworld, nv) sim_core.types.CtrlMode of each dof
    ctrl_position: wp.array2d(dtype=wp.float32)  # (nworld, nv) position targets, rad or m
    poses_stale: wp.array(dtype=wp.bool)  # (nworld,) the env's poses need recomputing (mark_changed)
    contacts_fresh: wp.array(dtype=wp.int32)  # (nworld,) 1: a step may start from its last contacts; (0,)
    # without contacts


@wp.struct
class ParamsView:
    """Per-env model parameters (``RigidSolver.params_view()``); the solver reads them every substep."""

    dof_kp: wp.array2d(dtype=wp.float32)  # (nworld, nv) position gains, N m/rad or N/m
    dof_kv: wp.array2d(dtype=wp.float32)  # (nworld, nv) velocity gains, N m s/rad or N s/m
    dof_damping: wp.array2d(dtype=wp.float32)  # (nworld, nv) joint damping, N m s/rad or N s/m
    body_inertial: wp.array2d(dtype=wp.vec4)  # (nworld, nslot) scales of an inertial slot's mass and
    # principal moments (1 as built; RigidEntity.inertial_slot names an entity's slot)
    geom_friction: wp.array2d(dtype=wp.float32)  # (nworld, ngeom) sliding friction coefficient
    geom_size: wp.array2d(dtype=wp.vec3)  # (nworld, ngeom) MuJoCo's geom size (box: half edges), m; a
    # kernel that writes it flags the env with mark_changed. Both (nworld, 0) without contacts.


@wp.struct
class ContactsView:
    """The contacts of the last substep of the last step (``RigidSolver.contacts_view()``)."""

    count: wp.array(dtype=wp.int32)  # (nworld,) contacts in the slots; 0 without contacts
    geom: wp.array2d(dtype=wp.vec2i)  # (nworld, max_contacts) geom ids (a, b); the normal points from a to b
    normal: wp.array2d(dtype=wp.vec3)  # (nworld, max_contacts) unit normal, world frame
    force: wp.array2d(dtype=wp.vec3)  # (nworld, max_contacts) force on b along (normal, t1, t2), N
    overflow: wp.array(dtype=wp.int32)  # (nworld,) contacts the last step dropped for want of budget


@wp.struct
class ResetView:
    """The arrays ``reset_env`` restores and the values it restores them to (``RigidSolver.reset_view()``);
    the same as ``RigidSolver.reset`` does, in a kernel."""

    state: StateView
    qpos_init: wp.array(dtype=wp.float32)  # (nq,) the values after build() of qpos, ...
    qvel_init: wp.array(dtype=wp.float32)  # (nv,)
    ctrl_mode_init: wp.array(dtype=wp.int32)  # (nv,)
    ctrl_position_init: wp.array(dtype=wp.float32)  # (nv,)
    ctrl_velocity_init: wp.array(dtype=wp.float32)  # (nv,)
    ctrl_force_init: wp.array(dtype=wp.float32)  # (nv,)
    qfrc_applied_init: wp.array(dtype=wp.float32)  # (nv,)
    qfrc_actuator_init: wp.array(dtype=wp.float32)  # (nv,)
    ctrl_velocity: wp.array2d(dtype=wp.float32)  # (nworld, nv) velocity targets
    ctrl_force: wp.array2d(dtype=wp.float32)  # (nworld, nv) force commands
    qfrc_applied: wp.array2d(dtype=wp.float32)  # (nworld, nv) external generalized forces
    qfrc_actuator: wp.array2d(dtype=wp.float32)  # (nworld, nv) the last substep's actuator forces
    contact_count: wp.array(dtype=wp.int32)  # (nworld,) or (0,) without contacts
    contact_force: wp.array2d(dtype=wp.vec3)  # (nworld, max_contacts)
    contact_rounds: wp.array(dtype=wp.int32)  # (nworld,)
    warm_start_geom: wp.array2d(dtype=wp.vec2i)  # (nworld, rows) the warm start's pairs; (-1, -1) ends it
    overflow: wp.array(dtype=wp.int32)  # (nworld,)


@wp.func
def quat_of(q: wp.vec4) -> wp.quat:
    """A (w, x, y, z) 4-vector as Warp's (x, y, z, w) ``wp.quat``."""
    return wp.quat(q[1], q[2], q[3], q[0])


@wp.func
def mark_changed(s: StateView, env: int):
    """Flag env ``env``'s state as written by this kernel: its poses and the contacts its next step
    starts from are recomputed (``RigidSolver.state_changed_by_kernel()`` after the launch)."""
    s.poses_stale[env] = True
    if s.contacts_fresh.shape[0] > 0:
        s.contacts_fresh[env] = 0


@wp.func
def reset_env(r: ResetView, env: int):
    """Restore env ``env``'s state, controls, applied forces and contact buffers to their values
    after ``build()`` (gains and other parameters are kept) and flag it changed: what
    ``RigidSolver.reset`` does for one env, inside a kernel."""
    s = r.state
    for i in range(s.qpos.shape[1]):
        s.qpos[env, i] = r.qpos_init[i]
    for i in range(s.qvel.shape[1]):
        s.qvel[env, i] = r.qvel_init[i]
        s.ctrl_mode[env, i] = r.ctrl_mode_init[i]
        s.ctrl_position[env, i] = r.ctrl_position_init[i]
        r.ctrl_velocity[env, i] = r.ctrl_velocity_init[i]
        r.ctrl_force[env, i] = r.ctrl_force_init[i]
        r.qfrc_applied[env, i] = r.qfrc_applied_init[i]
        r.qfrc_actuator[env, i] = r.qfrc_actuator_init[i]
    r.overflow[env] = 0
    if r.contact_count.shape[0] > 0:
        r.contact_count[env] = 0
        r.contact_rounds[env] = 0
        for k in range(r.contact_force.shape[1]):
            r.contact_force[env, k] = wp.vec3(0.0)
        for k in range(r.warm_start_geom.shape[1]):
            r.warm_start_geom[env, k] = wp.vec2i(-1, -1)
    mark_changed(s, env)


@wp.func
def env_error(
    qpos: wp.array2d(dtype=wp.float32),
    qvel: wp.array2d(dtype=wp.float32),
    overflow: wp.array(dtype=wp.int32),
    env: int,
) -> bool:
    """Env ``env``'s state is not finite (NaN or inf in ``qpos`` or ``qvel``: their sum is non-finite
    iff a term is, or it overflows, which a sane state never does), or its last step dropped
    contacts: ``RigidSolver.get_error_envs_mask`` per env. Call it from a module compiled without
    ``-ffast-math`` (Warp's default flags), which would drop the check."""
    total = float(0.0)
    for i in range(qpos.shape[1]):
        total += qpos[env, i]
    for i in range(qvel.shape[1]):
        total += qvel[env, i]
    return not wp.isfinite(total) or overflow[env] > 0
