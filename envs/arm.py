"""The Franka arm in Warp: end-effector point and Jacobian, the action kernel (differential IK),
the arm's reset, the joint part of the observations and the finger pads' grasp test, shared by
every task's kernels.

Action modes (``franka.py`` documents them): ``JOINT_DELTA`` moves the 7 joint targets directly;
``EE_DELTA`` and ``EE_YAW_DELTA`` turn an end-effector displacement (and for the latter the hand's
yaw, the hand held pointing down) into joint target displacements by damped least squares
(``ik.dls``) on the end effector's Jacobian at the current state.
"""

from __future__ import annotations

import math

import warp as wp

from sim_core.host_threads import Share, first_env
from sim_core.types import CtrlMode
from sim_core.views import ContactsView, ParamsView, StateView, quat_of

from .episode import noise
from .ik import dls, mat67, vec6
from .rng import uniform

__all__ = [
    "ArmModel",
    "ArmState",
    "JOINT_DELTA",
    "EE_DELTA",
    "EE_YAW_DELTA",
    "N_ARM",
    "arm_action_kernel",
    "ee_point",
    "ee_velocity",
    "hand_quat",
    "observe_joints",
    "observe_action",
    "reset_arm",
    "penalties",
    "pads_squeeze",
    "scale_arm_dynamics",
]

N_ARM = 7  # arm joints (hinges); two finger slides follow
JOINT_DELTA = wp.constant(0)
EE_DELTA = wp.constant(1)
EE_YAW_DELTA = wp.constant(2)
_POSITION = wp.constant(int(CtrlMode.POSITION))
_HALF_PI = wp.constant(1.5707963267948966)
GRASP_FORCE = wp.constant(0.5)  # N: a pad squeezes an object at least this hard along the closing direction
GRASP_COS = wp.constant(math.cos(math.radians(60.0)))  # ... and its force on it is within 60 deg of it


@wp.struct
class ArmModel:
    """The arm's constants in one scene (built once by ``FrankaArm``)."""

    q0: int  # qpos column of joint 1 (the 9 arm coordinates follow)
    d0: int  # dof column of joint 1 (qvel, controls, gains; 9 dofs)
    hand: int  # body index of the hand
    ee_offset: wp.vec3  # end-effector point in the hand frame, m
    joint_body: wp.array(dtype=wp.int32)  # (7,) body each arm joint moves
    joint_axis: wp.array(dtype=wp.vec3)  # (7,) hinge axis in that body's frame
    joint_anchor: wp.array(dtype=wp.vec3)  # (7,) hinge anchor in that body's frame, m
    q_low: wp.array(dtype=wp.float32)  # (7,) joint ranges, rad
    q_high: wp.array(dtype=wp.float32)  # (7,)
    default_q: wp.array(dtype=wp.float32)  # (7,) the pose episodes start around, rad
    finger_pos: float  # finger opening at reset (and held without a gripper action), m
    init_joint_noise: float  # uniform +- on the joints at reset, rad
    mode: int  # JOINT_DELTA, EE_DELTA or EE_YAW_DELTA
    gripper: int  # 1: the last action number commands the fingers
    joint_delta_scale: float  # rad per control step at |a| = 1
    ee_delta_scale: float  # m per control step at |a| = 1
    yaw_delta_scale: float  # rad per control step at |a| = 1
    yaw_offset: float  # EE_YAW_DELTA: the hand's yaw at a yaw target of 0, rad
    rot_gain: float  # share of the hand's orientation error corrected per control step
    ik_damping: float  # damped least squares lambda
    ee_z_min: float  # no end-effector displacement ends below this, m (-inf: no floor)
    kp0: wp.array(dtype=wp.float32)  # (9,) the arm's position gains as built
    kv0: wp.array(dtype=wp.float32)  # (9,) velocity gains
    damping0: wp.array(dtype=wp.float32)  # (9,) joint damping


@wp.struct
class ArmState:
    """The arm's per-env controller state (the env's torch buffers)."""

    joint_targets: wp.array2d(dtype=wp.float32)  # (num_envs, 7) position targets of the arm joints, rad
    yaw_target: wp.array(dtype=wp.float32)  # (num_envs,) EE_YAW_DELTA: the hand's yaw target, rad
    last_action: wp.array2d(dtype=wp.float32)  # (num_envs, action_dim) clipped action of this step
    prev_action: wp.array2d(dtype=wp.float32)  # (num_envs, action_dim) and of the step before
    floor_push: wp.array(dtype=wp.float32)  # (num_envs,) the z action ee_z_min discarded this step, >= 0


@wp.func
def hand_quat(arm: ArmModel, s: StateView, env: int) -> wp.quat:
    return quat_of(s.xquat[env, arm.hand])


@wp.func
def ee_point(arm: ArmModel, s: StateView, env: int) -> wp.vec3:
    """The end effector's position in the env's frame, m (poses must be current)."""
    return s.xpos[env, arm.hand] + wp.quat_rotate(hand_quat(arm, s, env), arm.ee_offset)


@wp.func
def ee_jacobian(arm: ArmModel, s: StateView, env: int, ee: wp.vec3) -> mat67:
    """Jacobian of the end-effector point ``ee`` over the 7 arm joints: rows 0-2 its linear velocity,
    rows 3-5 the hand's angular velocity (world frame), as MuJoCo's ``mj_jac``."""
    jac = mat67()
    for i in range(7):
        b = arm.joint_body[i]
        q = quat_of(s.xquat[env, b])
        axis = wp.quat_rotate(q, arm.joint_axis[i])
        anchor = s.xpos[env, b] + wp.quat_rotate(q, arm.joint_anchor[i])
        lin = wp.cross(axis, ee - anchor)
        for k in range(3):
            jac[k, i] = lin[k]
            jac[3 + k, i] = axis[k]
    return jac


@wp.func
def ee_velocity(arm: ArmModel, s: StateView, env: int, ee: wp.vec3) -> wp.vec3:
    """The end effector's linear velocity, m/s."""
    v = wp.vec3(0.0)
    for i in range(7):
        b = arm.joint_body[i]
        q = quat_of(s.xquat[env, b])
        axis = wp.quat_rotate(q, arm.joint_axis[i])
        anchor = s.xpos[env, b] + wp.quat_rotate(q, arm.joint_anchor[i])
        v += wp.cross(axis, ee - anchor) * s.qvel[env, arm.d0 + i]
    return v


@wp.func
def _sign(x: float) -> float:
    """-1, 0 or 1 (``torch.sign``; ``wp.sign`` gives 1 at 0)."""
    return wp.where(x > 0.0, 1.0, wp.where(x < 0.0, -1.0, 0.0))


@wp.func
def _ee_displacement(
    arm: ArmModel, s: StateView, st: ArmState, env: int, a: vec6, ee: wp.vec3, jac: mat67
) -> vec6:
    """The end-effector displacement an action asks for (rows 0-2) and, with EE_YAW_DELTA, the
    hand's rotation toward pointing down at its yaw target, which the action moves first (rows
    3-5; else 0). The displacement is
    kept from taking the end effector's target below ``ee_z_min``: the target is the end effector
    plus the joint targets' lead over the joints (through ``jac``), where the PD targets put it."""
    move = arm.ee_delta_scale * wp.vec3(a[0], a[1], a[2])
    target_z = ee[2]
    for i in range(7):
        target_z += jac[2, i] * (st.joint_targets[env, i] - s.qpos[env, arm.q0 + i])
    dz = wp.max(move[2], arm.ee_z_min - target_z)
    st.floor_push[env] = (dz - move[2]) / arm.ee_delta_scale
    dx = vec6(move[0], move[1], dz, 0.0, 0.0, 0.0)
    if arm.mode == EE_YAW_DELTA:
        yaw = wp.clamp(st.yaw_target[env] + arm.yaw_delta_scale * a[3], -_HALF_PI, _HALF_PI)
        st.yaw_target[env] = yaw
        h = 0.5 * (yaw + arm.yaw_offset)
        target = wp.quat(0.0, 0.0, wp.sin(h), wp.cos(h)) * wp.quat(1.0, 0.0, 0.0, 0.0)  # yaw of hand-down
        err = target * wp.quat_inverse(hand_quat(arm, s, env))
        rot = 2.0 * arm.rot_gain * _sign(err[3]) * wp.vec3(err[0], err[1], err[2])  # small-angle vector
        dx = vec6(move[0], move[1], dz, rot[0], rot[1], rot[2])
    return dx


@wp.kernel(enable_backward=False)
def arm_action_kernel(
    share: Share,  # the envs of this launch's threads (sim_core.host_threads)
    # Model:
    arm: ArmModel,
    # In:
    action: wp.array2d(dtype=wp.float32),  # (num_envs, action_dim) as given (clipped here to [-1, 1])
    # Data in (qpos, poses) and out (ctrl_position, ctrl_mode):
    s: StateView,
    # Data in and out:
    st: ArmState,
):
    """One control step's arm command: the clipped action is recorded (``last_action``; the one
    before moves to ``prev_action``), the joint targets move by it (through the IK in the end-effector
    modes) within the joint ranges, and the fingers follow the gripper action."""
    e0 = first_env(share, wp.tid())
    for e in range(e0, wp.min(e0 + share.per_thread, action.shape[0])):
        na = action.shape[1]
        a = vec6()
        for j in range(na):
            v = wp.clamp(action[e, j], -1.0, 1.0)
            st.prev_action[e, j] = st.last_action[e, j]
            st.last_action[e, j] = v
            if j < 6:
                a[j] = v
        if arm.mode == JOINT_DELTA:
            for i in range(7):
                st.joint_targets[e, i] = st.joint_targets[e, i] + arm.joint_delta_scale * st.last_action[e, i]
        else:
            ee = ee_point(arm, s, e)
            jac = ee_jacobian(arm, s, e, ee)
            dx = _ee_displacement(arm, s, st, e, a, ee, jac)
            if arm.mode == EE_DELTA:
                for k in range(3):  # the position rows alone
                    for i in range(7):
                        jac[3 + k, i] = 0.0
            dq = dls(jac, dx, arm.ik_damping)
            for i in range(7):
                st.joint_targets[e, i] = st.joint_targets[e, i] + dq[i]
        for i in range(7):
            q = wp.clamp(st.joint_targets[e, i], arm.q_low[i], arm.q_high[i])
            st.joint_targets[e, i] = q
            s.ctrl_position[e, arm.d0 + i] = q
            s.ctrl_mode[e, arm.d0 + i] = _POSITION
        if arm.gripper != 0:
            f = 0.5 * arm.finger_pos * (st.last_action[e, na - 1] + 1.0)
            for k in range(2):
                s.ctrl_position[e, arm.d0 + 7 + k] = f
                s.ctrl_mode[e, arm.d0 + 7 + k] = _POSITION


@wp.func
def reset_arm(arm: ArmModel, s: StateView, st: ArmState, env: int, h: wp.uint32):
    """Restart env ``env``'s arm at the default pose plus ``init_joint_noise * (2 u - 1)`` (draws 0-6
    of ``h``) within the joint ranges, at rest, position targets on the new pose, fingers at
    ``finger_pos``; the hand's yaw target and the action history are zeroed."""
    for i in range(7):
        q = arm.default_q[i] + arm.init_joint_noise * (2.0 * uniform(h, i) - 1.0)
        q = wp.clamp(q, arm.q_low[i], arm.q_high[i])
        s.qpos[env, arm.q0 + i] = q
        s.ctrl_position[env, arm.d0 + i] = q
        st.joint_targets[env, i] = q
    for k in range(2):
        s.qpos[env, arm.q0 + 7 + k] = arm.finger_pos
        s.ctrl_position[env, arm.d0 + 7 + k] = arm.finger_pos
    for i in range(9):
        s.qvel[env, arm.d0 + i] = 0.0
        s.ctrl_mode[env, arm.d0 + i] = _POSITION
    st.yaw_target[env] = 0.0
    st.floor_push[env] = 0.0
    for j in range(st.last_action.shape[1]):
        st.last_action[env, j] = 0.0
        st.prev_action[env, j] = 0.0


@wp.func
def scale_arm_dynamics(arm: ArmModel, p: ParamsView, env: int, damping: float, gains: float):
    """Env ``env``'s arm with ``damping`` times its joint damping as built and ``gains`` times its
    kp and kv (domain randomization at a reset)."""
    for i in range(9):
        p.dof_damping[env, arm.d0 + i] = arm.damping0[i] * damping
        p.dof_kp[env, arm.d0 + i] = arm.kp0[i] * gains
        p.dof_kv[env, arm.d0 + i] = arm.kv0[i] * gains


@wp.func
def observe_joints(
    arm: ArmModel,
    s: StateView,
    env: int,
    h: wp.uint32,
    given: wp.array2d(dtype=wp.float32),
    noise_pos: float,
    noise_vel: float,
    obs: wp.array2d(dtype=wp.float32),
) -> float:
    """Observation columns 0-13: the arm's joint angles minus the default pose and its joint
    velocities, each with uniform noise (``episode.noise`` draws 0-13). Returns ``|qd|^2``."""
    qd2 = float(0.0)
    for i in range(7):
        obs[env, i] = s.qpos[env, arm.q0 + i] - arm.default_q[i] + noise(h, given, env, i, noise_pos)
        v = s.qvel[env, arm.d0 + i]
        obs[env, 7 + i] = v + noise(h, given, env, 7 + i, noise_vel)
        qd2 += v * v
    return qd2


@wp.func
def observe_action(st: ArmState, env: int, obs: wp.array2d(dtype=wp.float32), col: int) -> float:
    """The last action into ``obs[env, col:]``; returns the action rate ``|a - a_prev|^2``."""
    rate = float(0.0)
    for j in range(st.last_action.shape[1]):
        obs[env, col + j] = st.last_action[env, j]
        da = st.last_action[env, j] - st.prev_action[env, j]
        rate += da * da
    return rate


@wp.func
def penalties(action_rate_weight: float, joint_vel_weight: float, rate: float, qd2: float) -> float:
    """The arm's penalty terms of every task's reward: ``action_rate * |a - a_prev|^2 + joint_vel * |qd|^2``."""
    return action_rate_weight * rate + joint_vel_weight * qd2


@wp.func
def _squeezes(force: wp.vec3, closing: wp.vec3, sign: float) -> bool:
    along = sign * wp.dot(force, closing)
    return along >= GRASP_FORCE and along >= GRASP_COS * wp.length(force)


@wp.func
def pads_squeeze(
    s: StateView,
    c: ContactsView,
    e: int,
    left_finger: int,
    right_finger: int,
    pad_finger: wp.array(dtype=wp.int32),
    geom: int,
) -> bool:
    """Each finger pad squeezes ``geom`` toward the other finger (the last substep's contact
    forces): the pad's summed force on it is at least ``GRASP_FORCE`` along the closing direction
    (from the ``left_finger`` body to the ``right_finger`` body) and within 60 degrees of it, so
    pads pressing on its top do not count. ``pad_finger`` ``(ngeom,)``: 0 for a geom of the left
    finger, 1 of the right, -1 of neither."""
    closing = s.xpos[e, right_finger] - s.xpos[e, left_finger]
    closing = closing / wp.max(wp.length(closing), 1.0e-6)
    left = wp.vec3(0.0)
    right = wp.vec3(0.0)
    for i in range(c.count[e]):
        g = c.geom[e, i]
        side = float(0.0)  # +1 / -1: the object is geom b / a (the force is on b)
        other = int(-1)
        if g[1] == geom:
            side = 1.0
            other = g[0]
        elif g[0] == geom:
            side = -1.0
            other = g[1]
        if other >= 0:
            on_it = side * c.force[e, i][0] * c.normal[e, i]
            if pad_finger[other] == 0:
                left += on_it
            elif pad_finger[other] == 1:
                right += on_it
    return _squeezes(left, closing, 1.0) and _squeezes(right, closing, -1.0)
