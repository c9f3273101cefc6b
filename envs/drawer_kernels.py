"""OpenDrawer in Warp: the observation, grasp, reward, reset and randomization of the drawer task, and
its kernel (``franka_drawer.py`` documents the task and the observation layout)."""

from __future__ import annotations

import warp as wp

from sim_core.host_threads import Share, first_env
from sim_core.views import ContactsView, ParamsView, ResetView, StateView, env_error, quat_of, reset_env

from .arm import (
    ArmModel,
    ArmState,
    ee_point,
    ee_velocity,
    hand_quat,
    observe_action,
    observe_joints,
    pads_squeeze,
    penalties,
    reset_arm,
    scale_arm_dynamics,
)
from .cube_kernels import closeness, draw_in, put3
from .episode import (
    B_TASK,
    F_TASK,
    PASS_EVALUATE,
    PASS_OBSERVE,
    PASS_RESET,
    PASS_STEP,
    Episodes,
    StepOut,
    begin_episode,
    clean_row,
    end_step,
    noise,
    step_key,
    write_terms,
)
from .rng import uniform

__all__ = ["DrawerTask", "OBS_DIM", "drawer_kernel", "drawer_reward"]

OBS_DIM = 37  # without the last action


@wp.struct
class DrawerTask:
    """The drawer task's constants (from the config and the built scene)."""

    base_q: int  # qpos column of the cabinet's x slide (its y slide follows), m from its built place
    base_d: int  # its dof column (the y slide's follows)
    drawer_q: int  # qpos column of the drawer's slide: how far it is open, m
    drawer_d: int  # its dof column
    drawer_body: int  # the drawer's body
    handle: int  # the handle's geom
    handle_local: wp.vec3  # the handle's centre in the drawer's frame, m
    handle_size: wp.vec3  # its MuJoCo size as built (radius, half length, 0), m
    left_finger: int  # finger bodies: the closing direction is from left to right
    right_finger: int
    pad_finger: wp.array(dtype=wp.int32)  # (ngeom,) 0: a geom of the left finger, 1: of the right, -1: neither
    place_low: wp.vec2  # the cabinet's xy offset from its built place is drawn in this box, m
    place_span: wp.vec2
    damping_range: wp.vec2  # domain randomization, uniform [low, high]: the drawer's damping, N s/m
    friction_range: wp.vec2  # the handle's sliding friction
    radius_range: wp.vec2  # the handle's radius, m
    arm_damping_range: wp.vec2  # scale of the arm's joint damping
    gain_range: wp.vec2  # scale of the arm's kp and kv
    noise_joint_pos: float  # uniform +- observation noise, rad
    noise_joint_vel: float  # rad/s
    noise_handle_pos: float  # m
    open_distance: float  # success: the drawer open at least this far, m
    reach: float  # reward weights and parameters (DrawerRewardConfig)
    reach_std: float
    grasp: float
    open: float
    open_margin: float
    success_bonus: float
    action_rate: float
    joint_vel: float


@wp.func
def drawer_reward(k: DrawerTask, d_reach: float, grasped: bool, opening: float, rate: float, qd2: float):
    """The reward and success of one env after a step: ``d_reach`` from the end effector to the
    handle (m), ``grasped`` (both pads squeeze the handle), ``opening`` (m), the action rate
    ``|a - a_prev|^2`` and the arm's ``|qd|^2``. Opening pays however the drawer is pulled (a
    grasp or a hook), in proportion up to ``open_margin`` past the success distance."""
    success = opening >= k.open_distance
    progress = wp.clamp(opening / (k.open_distance + k.open_margin), 0.0, 1.0)
    r = k.reach * closeness(d_reach, k.reach_std) + k.grasp * wp.where(grasped, 1.0, 0.0)
    r += k.open * progress + k.success_bonus * wp.where(success, 1.0, 0.0)
    return r + penalties(k.action_rate, k.joint_vel, rate, qd2), success


@wp.func
def _handle(k: DrawerTask, s: StateView, e: int) -> wp.vec3:
    """The handle's centre, m (poses must be current)."""
    return s.xpos[e, k.drawer_body] + wp.quat_rotate(quat_of(s.xquat[e, k.drawer_body]), k.handle_local)


@wp.func
def _observe_drawer(
    k: DrawerTask,
    arm: ArmModel,
    s: StateView,
    st: ArmState,
    e: int,
    h: wp.uint32,
    given: wp.array2d(dtype=wp.float32),
    obs: wp.array2d(dtype=wp.float32),
    ee: wp.vec3,
    handle: wp.vec3,
) -> float:
    """Observation columns 14 on (the arm's joints are ``observe_joints'``); returns the action rate."""
    obs[e, 14] = s.qpos[e, arm.q0 + 7]
    obs[e, 15] = s.qpos[e, arm.q0 + 8]
    hq = hand_quat(arm, s, e)
    seen = handle + wp.vec3(
        noise(h, given, e, 14, k.noise_handle_pos),
        noise(h, given, e, 15, k.noise_handle_pos),
        noise(h, given, e, 16, k.noise_handle_pos),
    )
    # the cabinet stands still, so the handle moves with the drawer along its slide axis
    axis = wp.normalize(wp.quat_rotate(quat_of(s.xquat[e, k.drawer_body]), wp.vec3(-1.0, 0.0, 0.0)))
    speed = s.qvel[e, k.drawer_d]
    opening = s.qpos[e, k.drawer_q]
    put3(obs, e, 16, ee)
    put3(obs, e, 19, wp.quat_rotate(hq, wp.vec3(1.0, 0.0, 0.0)))
    put3(obs, e, 22, wp.quat_rotate(hq, wp.vec3(0.0, 0.0, 1.0)))
    put3(obs, e, 25, seen)
    put3(obs, e, 28, seen - ee)
    put3(obs, e, 31, axis * speed - ee_velocity(arm, s, e, ee))
    obs[e, 34] = opening
    obs[e, 35] = speed
    obs[e, 36] = k.open_distance - opening
    return observe_action(st, e, obs, OBS_DIM)


@wp.func
def _reset_drawer(
    k: DrawerTask, arm: ArmModel, r: ResetView, p: ParamsView, st: ArmState, ep: Episodes, e: int
):
    """A new episode in env ``e``: the drawer closed and at rest, the cabinet placed and the
    parameters drawn. Reset draws: 0-6 the arm (``reset_arm``), 7-8 the cabinet's xy offset, 9-11
    the drawer's damping and the handle's friction and radius, 12-13 the scales of the arm's
    damping and gains."""
    reset_env(r, e)
    h = begin_episode(ep, e)
    s = r.state
    reset_arm(arm, s, st, e, h)
    place = k.place_low + wp.cw_mul(k.place_span, wp.vec2(uniform(h, 7), uniform(h, 8)))
    for j in range(2):  # held there by the cabinet's servos
        s.qpos[e, k.base_q + j] = place[j]
        s.ctrl_position[e, k.base_d + j] = place[j]
    p.dof_damping[e, k.drawer_d] = draw_in(k.damping_range, h, 9)
    p.geom_friction[e, k.handle] = draw_in(k.friction_range, h, 10)
    p.geom_size[e, k.handle] = wp.vec3(draw_in(k.radius_range, h, 11), k.handle_size[1], k.handle_size[2])
    damping = draw_in(k.arm_damping_range, h, 12)
    gains = draw_in(k.gain_range, h, 13)
    scale_arm_dynamics(arm, p, e, damping, gains)


@wp.kernel(enable_backward=False)
def drawer_kernel(
    phase: int,  # PASS_STEP, PASS_OBSERVE, PASS_RESET or PASS_EVALUATE (episode.py)
    share: Share,  # the envs of this launch's threads (sim_core.host_threads)
    # Model:
    k: DrawerTask,
    arm: ArmModel,
    # Data in and out:
    s: StateView,
    c: ContactsView,
    r: ResetView,
    p: ParamsView,
    st: ArmState,
    ep: Episodes,
    # In:
    given_noise: wp.array2d(dtype=wp.float32),  # (num_envs, 17) uniform draws to use, or (0, 0)
    # Out:
    obs_out: wp.array2d(dtype=wp.float32),  # (num_envs, 37 + action_dim)
    out: StepOut,  # task info: F_TASK the opening (m), B_TASK grasped
):
    """One pass of OpenDrawer over the envs (``episode.py``): the observation, reward, success and
    task infos of the state, the episode's bookkeeping and resets. No state ends an episode
    early: the time limit does."""
    e0 = first_env(share, wp.tid())
    for e in range(e0, wp.min(e0 + share.per_thread, obs_out.shape[0])):
        if phase == PASS_RESET:
            if ep.reset_now[e]:
                _reset_drawer(k, arm, r, p, st, ep, e)
            continue
        h = step_key(ep, e, phase == PASS_STEP)
        ee = ee_point(arm, s, e)
        handle = _handle(k, s, e)
        qd2 = observe_joints(arm, s, e, h, given_noise, k.noise_joint_pos, k.noise_joint_vel, obs_out)
        rate = _observe_drawer(k, arm, s, st, e, h, given_noise, obs_out, ee, handle)
        error = env_error(s.qpos, s.qvel, c.overflow, e)
        clean_row(obs_out, e, error)
        if phase == PASS_OBSERVE:
            continue
        grasped = pads_squeeze(s, c, e, k.left_finger, k.right_finger, k.pad_finger, k.handle)
        opening = s.qpos[e, k.drawer_q]
        reward, success = drawer_reward(k, wp.length(handle - ee), grasped, opening, rate, qd2)
        out.f[F_TASK, e] = opening
        out.b[B_TASK, e] = grasped
        if phase == PASS_EVALUATE:
            write_terms(out, e, reward, False, success, error)
            continue
        if end_step(ep, out, e, reward, False, success, error):
            _reset_drawer(k, arm, r, p, st, ep, e)
