"""Lift, Push, PickPlace and Stack in Warp: the observation, grasp, reward, reset and randomization of
the cube tasks, and their kernel (``franka_cube.py`` documents the tasks and the observation layout).

The tasks share everything but their reward and goal: ``lift_reward``, ``push_reward``,
``pick_place_reward`` and ``stack_reward`` hold each reward's form, ``CubeTask.task`` picks one.
Stack adds a second cube (the base ``B``): the goal is then where the cube sits centred on it.
"""

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

__all__ = [
    "CubeTask",
    "LIFT",
    "PUSH",
    "PICK_PLACE",
    "STACK",
    "Terms",
    "OBS_DIM",
    "cube_kernel",
    "cube_rewards_kernel",
    "lift_reward",
    "push_reward",
    "pick_place_reward",
    "stack_reward",
    "closeness",
    "put3",
    "draw_in",
]

LIFT = wp.constant(0)
PUSH = wp.constant(1)
PICK_PLACE = wp.constant(2)
STACK = wp.constant(3)
OBS_DIM = 49  # without the last action
_REST_GAP = wp.constant(1.0e-4)  # m: a reset puts the cube this far above the floor


@wp.struct
class CubeTask:
    """The cube tasks' constants (from the config and the built scene)."""

    task: int  # LIFT, PUSH or PICK_PLACE
    q0: int  # qpos column of the cube's free joint (position, then quaternion w x y z)
    d0: int  # its dof column (linear velocity, world frame; angular velocity, body frame)
    geom: int  # the cube's geom
    slot: int  # the cube's inertial slot (ParamsView.body_inertial)
    left_finger: int  # finger bodies: the closing direction is from left to right
    right_finger: int
    pad_finger: wp.array(dtype=wp.int32)  # (ngeom,) 0: a geom of the left finger, 1: of the right, -1: neither
    built_mass: float  # the cube as built: mass, kg
    built_size: float  # and edge length, m
    spawn_low: wp.vec2  # xy box the cube's centre is drawn in, m
    spawn_span: wp.vec2
    yaw_range: float  # the cube's yaw is drawn in +- this, rad
    goal_low: wp.vec3  # goal draw box (lift: xy offset and height; push: xy offset), m
    goal_span: wp.vec3
    ws_low: wp.vec2  # the cube's centre leaving this xy box ends the episode, m
    ws_high: wp.vec2
    mass_range: wp.vec2  # domain randomization, uniform [low, high]: cube mass, kg
    size_range: wp.vec2  # edge length, m
    friction_range: wp.vec2  # sliding friction
    damping_range: wp.vec2  # scale of the arm's joint damping
    gain_range: wp.vec2  # scale of the arm's kp and kv
    noise_joint_pos: float  # uniform +- observation noise, rad
    noise_joint_vel: float  # rad/s
    noise_cube_pos: float  # m
    reach: float  # reward weights and parameters (RewardConfig)
    reach_std: float
    grasp: float
    lift: float
    lift_margin: float
    push: float
    push_std: float
    lifted: float
    place: float
    place_std: float
    rest: float
    rest_std: float
    success_bonus: float
    action_rate: float
    joint_vel: float
    floor_push: float
    hold_steps: int  # lift: steps at or above the goal height for a success
    goal_radius: float  # push, pick-place: success radius, m
    rest_speed: float  # pick-place: success needs the arm's joint speeds |qd| at most this, rad/s
    # stack: the base cube B (q1 < 0: no second cube) and what a success needs
    q1: int  # qpos column of B's free joint
    d1: int  # its dof column
    geom_b: int  # B's geom
    slot_b: int  # B's inertial slot
    pair_low: float  # a reset draws the cubes' centres this far apart (uniform [low, high]), m
    pair_high: float
    stack_tol: float  # the cube's centre within this of its height on B, m
    static_speed: float  # the cube's speed at most this, m/s
    open_width: float  # the fingers' opening at least the cube's edge plus this, m
    release: float  # reward weights of the stack's last stage (RewardConfig)
    still: float
    still_std: float


@wp.func
def closeness(d: float, std: float) -> float:
    """``t(d, std) = 1 - tanh(d / std)``: 1 at distance 0, falling off over ``std``."""
    return 1.0 - wp.tanh(d / std)


@wp.struct
class Terms:
    """What a cube task's reward reads of one env's state after a step."""

    ee: wp.vec3  # end-effector point, m
    cube: wp.vec3  # the cube's centre, m
    size: float  # its edge, m
    goal: wp.vec3  # the goal point (stack: the cube's centre resting centred on B), m
    grasped: bool  # both pads squeeze the cube (``grasped``)
    rate: float  # |a - a_prev|^2
    floor_push: float  # the z action ee_z_min discarded (``ArmState.floor_push``)
    qd2: float  # the arm's |qd|^2, (rad/s)^2
    hold: int  # lift: consecutive steps at or above the goal height before this one
    speed: float  # the cube's speed, m/s
    on_base: bool  # stack: a contact between the cube and B bears force
    touched: bool  # stack: a finger touches the cube
    opening: float  # the fingers' opening (sum of both finger joints), m
    command: float  # the gripper action of the step, 0 closed to 1 open (0 without a gripper)


@wp.func
def _penalties(k: CubeTask, t: Terms) -> float:
    """The arm's penalties (``penalties``) plus ``floor_push`` times the z action ``ee_z_min``
    discarded (``pushed`` in ``franka_cube``'s reward)."""
    return penalties(k.action_rate, k.joint_vel, t.rate, t.qd2) + k.floor_push * t.floor_push


@wp.func
def rise(t: Terms, top: float) -> float:
    """The cube's rise from resting (half its edge above the floor) toward the height ``top`` of its
    centre, clipped to [0, 1]; 1 where ``top`` is not above resting (a goal on the floor)."""
    rest = 0.5 * t.size
    r = float(1.0)
    if top - rest > 1.0e-3:
        r = wp.clamp((t.cube[2] - rest) / (top - rest), 0.0, 1.0)
    return r


@wp.func
def lift_reward(k: CubeTask, t: Terms):
    """Lift's reward, success, consecutive steps at the goal height (``hold``, updated) and the
    cube's height above its resting height (the info ``cube_height``)."""
    z, rest = t.cube[2], 0.5 * t.size
    progress = rise(t, t.goal[2] + k.lift_margin)
    held = wp.where(z >= t.goal[2], t.hold + 1, 0)
    success = held >= k.hold_steps
    g = wp.where(t.grasped, 1.0, 0.0)
    r = k.reach * closeness(wp.length(t.cube - t.ee), k.reach_std) + k.grasp * g + k.lift * g * progress
    r += k.success_bonus * wp.where(success, 1.0, 0.0) + _penalties(k, t)
    return r, success, held, z - rest


@wp.func
def push_reward(k: CubeTask, t: Terms):
    """Push's reward, success, ``hold`` (unused) and the cube's distance to the goal (the info
    ``goal_distance``). The reach term pulls the end effector to the point just behind the cube on
    the side away from the goal, at its height."""
    cube = t.cube
    to_goal = wp.vec2(t.goal[0] - cube[0], t.goal[1] - cube[1])
    d_goal = wp.length(to_goal)
    away = -to_goal / wp.max(d_goal, 1.0e-6)
    behind = wp.vec2(cube[0], cube[1]) + (0.5 * t.size + 0.02) * away
    d_reach = wp.length(wp.vec3(behind[0], behind[1], cube[2]) - t.ee)
    lifted = cube[2] > 0.5 * t.size + 0.01
    success = d_goal < k.goal_radius and not lifted
    r = k.reach * closeness(d_reach, k.reach_std) + k.push * closeness(d_goal, k.push_std)
    r += k.lifted * wp.where(lifted, 1.0, 0.0) + k.success_bonus * wp.where(success, 1.0, 0.0)
    r += _penalties(k, t)
    return r, success, t.hold, d_goal


@wp.func
def pick_place_reward(k: CubeTask, t: Terms):
    """PickPlace's reward, success, ``hold`` (unused) and the cube's distance to the goal (the info
    ``goal_distance``). Staged: reach the cube, grasp it, carry it to the goal while grasped, then
    bring the arm to rest with the cube there (``|qd|``: the arm's joint speeds)."""
    d_goal = wp.length(t.goal - t.cube)
    placed = d_goal <= k.goal_radius
    speed = wp.sqrt(t.qd2)
    success = placed and speed <= k.rest_speed
    g = wp.where(t.grasped, 1.0, 0.0)
    r = k.reach * closeness(wp.length(t.cube - t.ee), k.reach_std) + k.grasp * g
    r += k.place * g * closeness(d_goal, k.place_std)
    r += k.lift * g * rise(t, t.goal[2])
    r += k.rest * wp.where(placed, 1.0, 0.0) * closeness(speed, k.rest_std)
    r += k.success_bonus * wp.where(success, 1.0, 0.0) + _penalties(k, t)
    return r, success, t.hold, d_goal


@wp.func
def stack_reward(k: CubeTask, t: Terms):
    """Stack's reward, success, ``hold`` (unused) and the cube's distance to its place on B (the
    info ``goal_distance``). Staged: reach the cube, grasp it, carry it to its place on B while
    grasped; once it is placed there (centred on B within half its edge, at its height on B
    within ``stack_tol``, in contact with B) the stages before pay their full weight and the
    release pays: the gripper commanded open (the command, not the fingers' opening, which a held
    cube blocks, so opening pays from the first step of it) and the fingers off the cube, the cube
    still."""
    off = t.cube - t.goal
    d_goal = wp.length(off)
    centred = wp.length(wp.vec2(off[0], off[1])) <= 0.5 * t.size
    placed = centred and wp.abs(off[2]) <= k.stack_tol and t.on_base
    clear = not t.touched and t.opening >= t.size + k.open_width
    success = placed and clear and t.speed <= k.static_speed
    g = wp.where(t.grasped, 1.0, 0.0)
    r = k.reach * closeness(wp.length(t.cube - t.ee), k.reach_std) + k.grasp * g
    r += k.place * g * closeness(d_goal, k.place_std)
    if placed:
        r = k.reach + k.grasp + k.place + k.release * 0.5 * (t.command + wp.where(t.touched, 0.0, 1.0))
        r += k.still * closeness(t.speed, k.still_std)
    r += k.success_bonus * wp.where(success, 1.0, 0.0) + _penalties(k, t)
    return r, success, t.hold, d_goal


@wp.func
def _task_reward(k: CubeTask, t: Terms):
    r, success, held, info = push_reward(k, t)
    if k.task == LIFT:
        r, success, held, info = lift_reward(k, t)
    elif k.task == PICK_PLACE:
        r, success, held, info = pick_place_reward(k, t)
    elif k.task == STACK:
        r, success, held, info = stack_reward(k, t)
    return r, success, held, info


@wp.func
def out_of_workspace(k: CubeTask, cube: wp.vec3) -> bool:
    """The cube's centre left the workspace's xy box or fell through the floor."""
    outside = cube[0] < k.ws_low[0] or cube[1] < k.ws_low[1] or cube[0] > k.ws_high[0] or cube[1] > k.ws_high[1]
    return outside or cube[2] < -0.05


@wp.func
def grasped(k: CubeTask, s: StateView, c: ContactsView, e: int) -> bool:
    """Both finger pads squeeze the cube (``arm.pads_squeeze``)."""
    return pads_squeeze(s, c, e, k.left_finger, k.right_finger, k.pad_finger, k.geom)


@wp.func
def _stack_contacts(k: CubeTask, c: ContactsView, e: int) -> wp.vec2i:
    """(1 if a contact of the cube with B bears force, 1 if a finger touches the cube)."""
    on_base = int(0)
    touched = int(0)
    for i in range(c.count[e]):
        g = c.geom[e, i]
        other = wp.where(g[0] == k.geom, g[1], wp.where(g[1] == k.geom, g[0], -1))
        if other >= 0:
            if other == k.geom_b and c.force[e, i][0] > 0.0:
                on_base = 1
            elif k.pad_finger[other] >= 0:
                touched = 1
    return wp.vec2i(on_base, touched)


@wp.func
def _terms(
    k: CubeTask,
    arm: ArmModel,
    s: StateView,
    st: ArmState,
    c: ContactsView,
    e: int,
    ee: wp.vec3,
    goal: wp.vec3,
    size: float,
    rate: float,
    qd2: float,
    hold: int,
) -> Terms:
    """The reward's view of env ``e`` after a step (``Terms``)."""
    t = Terms()
    t.ee = ee
    t.cube = wp.vec3(s.qpos[e, k.q0], s.qpos[e, k.q0 + 1], s.qpos[e, k.q0 + 2])
    t.size = size
    t.goal = goal
    t.grasped = grasped(k, s, c, e)
    t.rate = rate
    t.floor_push = st.floor_push[e]
    t.qd2 = qd2
    t.hold = hold
    t.speed = wp.length(wp.vec3(s.qvel[e, k.d0], s.qvel[e, k.d0 + 1], s.qvel[e, k.d0 + 2]))
    t.on_base = False
    t.touched = False
    if k.task == STACK:
        contacts = _stack_contacts(k, c, e)
        t.on_base = contacts[0] == 1
        t.touched = contacts[1] == 1
    t.opening = s.qpos[e, arm.q0 + 7] + s.qpos[e, arm.q0 + 8]
    t.command = 0.0
    if arm.gripper != 0:
        t.command = 0.5 * (st.last_action[e, st.last_action.shape[1] - 1] + 1.0)
    return t


@wp.func
def stack_goal(k: CubeTask, s: StateView, e: int, size: float, size_b: float) -> wp.vec3:
    """Where the cube's centre rests centred on B (B's top face, half the cube's edge above), m."""
    return wp.vec3(s.qpos[e, k.q1], s.qpos[e, k.q1 + 1], s.qpos[e, k.q1 + 2] + 0.5 * (size + size_b))


@wp.func
def put3(obs: wp.array2d(dtype=wp.float32), e: int, col: int, v: wp.vec3):
    """``obs[e, col:col + 3] = v``."""
    for j in range(3):
        obs[e, col + j] = v[j]


@wp.func
def _observe_cube(
    k: CubeTask,
    arm: ArmModel,
    s: StateView,
    st: ArmState,
    goal: wp.vec3,
    e: int,
    h: wp.uint32,
    given: wp.array2d(dtype=wp.float32),
    obs: wp.array2d(dtype=wp.float32),
    ee: wp.vec3,
) -> float:
    """Observation columns 14 on (the arm's joints are ``observe_joints``'); returns the action rate."""
    obs[e, 14] = s.qpos[e, arm.q0 + 7]
    obs[e, 15] = s.qpos[e, arm.q0 + 8]
    hq = hand_quat(arm, s, e)
    cube = wp.vec3(s.qpos[e, k.q0], s.qpos[e, k.q0 + 1], s.qpos[e, k.q0 + 2])
    cq = quat_of(wp.vec4(s.qpos[e, k.q0 + 3], s.qpos[e, k.q0 + 4], s.qpos[e, k.q0 + 5], s.qpos[e, k.q0 + 6]))
    seen = cube + wp.vec3(
        noise(h, given, e, 14, k.noise_cube_pos),
        noise(h, given, e, 15, k.noise_cube_pos),
        noise(h, given, e, 16, k.noise_cube_pos),
    )
    vel = wp.vec3(s.qvel[e, k.d0], s.qvel[e, k.d0 + 1], s.qvel[e, k.d0 + 2])
    ang = wp.vec3(s.qvel[e, k.d0 + 3], s.qvel[e, k.d0 + 4], s.qvel[e, k.d0 + 5])  # body frame
    x_axis, z_axis = wp.vec3(1.0, 0.0, 0.0), wp.vec3(0.0, 0.0, 1.0)
    put3(obs, e, 16, ee)
    put3(obs, e, 19, wp.quat_rotate(hq, x_axis))
    put3(obs, e, 22, wp.quat_rotate(hq, z_axis))
    put3(obs, e, 25, seen)
    put3(obs, e, 28, wp.quat_rotate(cq, x_axis))
    put3(obs, e, 31, wp.quat_rotate(cq, z_axis))
    put3(obs, e, 34, seen - ee)
    put3(obs, e, 37, vel - ee_velocity(arm, s, e, ee))
    put3(obs, e, 40, wp.quat_rotate(cq, ang))
    put3(obs, e, 43, goal)
    put3(obs, e, 46, goal - seen)
    return observe_action(st, e, obs, OBS_DIM)


@wp.func
def _place_cube(
    k: CubeTask,
    s: StateView,
    p: ParamsView,
    e: int,
    q0: int,
    d0: int,
    geom: int,
    slot: int,
    xy: wp.vec2,
    yaw: float,
    mass: float,
    edge: float,
    friction: float,
):
    """A cube (free joint at ``q0``/``d0``, ``geom``, inertial ``slot``) of ``mass``, ``edge`` and
    ``friction`` put at rest on the floor at ``xy`` with ``yaw`` in env ``e``."""
    # a cube's principal moments scale with its mass and the square of its edge
    km, ks = mass / k.built_mass, edge / k.built_size
    p.body_inertial[e, slot] = wp.vec4(km, km * ks * ks, km * ks * ks, km * ks * ks)
    p.geom_size[e, geom] = wp.vec3(0.5 * edge)
    p.geom_friction[e, geom] = friction
    pos = wp.vec3(xy[0], xy[1], 0.5 * edge + _REST_GAP)
    quat = wp.normalize(wp.vec4(wp.cos(0.5 * yaw), 0.0, 0.0, wp.sin(0.5 * yaw)))
    for j in range(3):
        s.qpos[e, q0 + j] = pos[j]
    for j in range(4):
        s.qpos[e, q0 + 3 + j] = quat[j]
    for j in range(6):
        s.qvel[e, d0 + j] = 0.0


@wp.func
def draw_in(r: wp.vec2, h: wp.uint32, i: int) -> float:
    """Uniform in ``[r[0], r[1]]`` from draw ``i`` of the stream ``h``."""
    return r[0] + (r[1] - r[0]) * uniform(h, i)


@wp.func
def _reset_cube(
    k: CubeTask,
    arm: ArmModel,
    r: ResetView,
    p: ParamsView,
    st: ArmState,
    goal: wp.array(dtype=wp.vec3),
    size: wp.array(dtype=wp.float32),
    size_b: wp.array(dtype=wp.float32),
    hold: wp.array(dtype=wp.int32),
    ep: Episodes,
    e: int,
):
    """A new episode in env ``e``. Reset draws: 0-6 the arm (``reset_arm``), 7-8 the cube's xy, 9 its
    yaw, 10-12 the goal, 13-17 the randomized cube mass, edge length and friction and the scales of
    the arm's damping and gains. Stack: 7-8 the middle between the two cubes, 10 the direction from
    B to the cube, 11 their distance, 12 B's yaw, 18-20 B's mass, edge and friction."""
    reset_env(r, e)
    h = begin_episode(ep, e)
    s = r.state
    reset_arm(arm, s, st, e, h)
    mass = draw_in(k.mass_range, h, 13)
    edge = draw_in(k.size_range, h, 14)
    friction = draw_in(k.friction_range, h, 15)
    damping = draw_in(k.damping_range, h, 16)
    gains = draw_in(k.gain_range, h, 17)
    scale_arm_dynamics(arm, p, e, damping, gains)
    size[e] = edge
    xy = k.spawn_low + wp.cw_mul(k.spawn_span, wp.vec2(uniform(h, 7), uniform(h, 8)))
    yaw = k.yaw_range * (2.0 * uniform(h, 9) - 1.0)
    hold[e] = 0
    if k.task == STACK:
        angle = 2.0 * wp.pi * uniform(h, 10)
        half = 0.5 * (k.pair_low + (k.pair_high - k.pair_low) * uniform(h, 11))
        away = wp.vec2(wp.cos(angle), wp.sin(angle)) * half
        edge_b = draw_in(k.size_range, h, 19)
        size_b[e] = edge_b
        yaw_b = k.yaw_range * (2.0 * uniform(h, 12) - 1.0)
        mass_b, friction_b = draw_in(k.mass_range, h, 18), draw_in(k.friction_range, h, 20)
        _place_cube(k, s, p, e, k.q0, k.d0, k.geom, k.slot, xy + away, yaw, mass, edge, friction)
        _place_cube(k, s, p, e, k.q1, k.d1, k.geom_b, k.slot_b, xy - away, yaw_b, mass_b, edge_b, friction_b)
        goal[e] = stack_goal(k, s, e, edge, edge_b)
        return
    _place_cube(k, s, p, e, k.q0, k.d0, k.geom, k.slot, xy, yaw, mass, edge, friction)
    draw = k.goal_low + wp.cw_mul(k.goal_span, wp.vec3(uniform(h, 10), uniform(h, 11), uniform(h, 12)))
    # lift, pick-place: a height above the floor, not below the cube's resting height; push: on it
    rest = 0.5 * edge + _REST_GAP
    height = wp.where(k.task == PUSH, rest, wp.max(draw[2], rest))
    goal[e] = wp.vec3(xy[0] + draw[0], xy[1] + draw[1], height)


@wp.kernel(enable_backward=False)
def cube_kernel(
    phase: int,  # PASS_STEP, PASS_OBSERVE, PASS_RESET or PASS_EVALUATE (episode.py)
    share: Share,  # the envs of this launch's threads (sim_core.host_threads)
    # Model:
    k: CubeTask,
    arm: ArmModel,
    # Data in and out:
    s: StateView,
    c: ContactsView,
    r: ResetView,
    p: ParamsView,
    st: ArmState,
    goal: wp.array(dtype=wp.vec3),  # (num_envs,) goal points, m
    size: wp.array(dtype=wp.float32),  # (num_envs,) the cube's edge this episode, m
    size_b: wp.array(dtype=wp.float32),  # (num_envs,) stack: B's edge this episode, m
    hold: wp.array(dtype=wp.int32),  # (num_envs,) lift: consecutive steps at or above the goal height
    ep: Episodes,
    # In:
    given_noise: wp.array2d(dtype=wp.float32),  # (num_envs, 17) uniform draws to use, or (0, 0)
    # Out:
    obs_out: wp.array2d(dtype=wp.float32),  # (num_envs, 49 + action_dim)
    out: StepOut,  # task info (F_TASK, B_TASK): lift cube_height, grasped; push goal_distance;
    # pick-place and stack goal_distance, grasped
):
    """One pass of Lift, Push, PickPlace or Stack over the envs (``episode.py``): the observation,
    reward, success and task infos of the state, the episode's bookkeeping and resets. Stack's
    goal follows B: every pass but the reset's sets it from B's pose first."""
    e0 = first_env(share, wp.tid())
    for e in range(e0, wp.min(e0 + share.per_thread, obs_out.shape[0])):
        if phase == PASS_RESET:
            if ep.reset_now[e]:
                _reset_cube(k, arm, r, p, st, goal, size, size_b, hold, ep, e)
            continue
        if k.task == STACK:
            goal[e] = stack_goal(k, s, e, size[e], size_b[e])
        h = step_key(ep, e, phase == PASS_STEP)
        ee = ee_point(arm, s, e)
        qd2 = observe_joints(arm, s, e, h, given_noise, k.noise_joint_pos, k.noise_joint_vel, obs_out)
        rate = _observe_cube(k, arm, s, st, goal[e], e, h, given_noise, obs_out, ee)
        error = env_error(s.qpos, s.qvel, c.overflow, e)
        clean_row(obs_out, e, error)
        if phase == PASS_OBSERVE:
            continue
        t = _terms(k, arm, s, st, c, e, ee, goal[e], size[e], rate, qd2, hold[e])
        reward, success, held, info = _task_reward(k, t)
        terminated = out_of_workspace(k, t.cube)
        if k.task == STACK:
            b = wp.vec3(s.qpos[e, k.q1], s.qpos[e, k.q1 + 1], s.qpos[e, k.q1 + 2])
            terminated = terminated or out_of_workspace(k, b)
        out.f[F_TASK, e] = info
        if out.b.shape[0] > B_TASK:
            out.b[B_TASK, e] = t.grasped
        if phase == PASS_EVALUATE:
            write_terms(out, e, reward, terminated, success, error)
            continue
        hold[e] = held
        if end_step(ep, out, e, reward, terminated, success, error):
            _reset_cube(k, arm, r, p, st, goal, size, size_b, hold, ep, e)


@wp.kernel(enable_backward=False)
def cube_rewards_kernel(
    k: CubeTask,
    # In, per env:
    ee: wp.array(dtype=wp.vec3),
    cube: wp.array(dtype=wp.vec3),
    size: wp.array(dtype=wp.float32),
    goal: wp.array(dtype=wp.vec3),
    grip: wp.array(dtype=wp.bool),
    rate: wp.array(dtype=wp.float32),
    qd2: wp.array(dtype=wp.float32),
    hold: wp.array(dtype=wp.int32),
    speed: wp.array(dtype=wp.float32),
    on_base: wp.array(dtype=wp.bool),
    touched: wp.array(dtype=wp.bool),
    opening: wp.array(dtype=wp.float32),
    command: wp.array(dtype=wp.float32),
    floor_push: wp.array(dtype=wp.float32),
    # Out:
    reward_out: wp.array(dtype=wp.float32),
    success_out: wp.array(dtype=wp.bool),
    out_of_workspace_out: wp.array(dtype=wp.bool),
    info_out: wp.array(dtype=wp.float32),
    hold_out: wp.array(dtype=wp.int32),
):
    """The task's reward terms of given states (``_CubeTaskEnv.rewards``)."""
    e = wp.tid()
    t = Terms()
    t.ee = ee[e]
    t.cube = cube[e]
    t.size = size[e]
    t.goal = goal[e]
    t.grasped = grip[e]
    t.rate = rate[e]
    t.qd2 = qd2[e]
    t.hold = hold[e]
    t.speed = speed[e]
    t.on_base = on_base[e]
    t.touched = touched[e]
    t.opening = opening[e]
    t.command = command[e]
    t.floor_push = floor_push[e]
    reward, success, held, info = _task_reward(k, t)
    reward_out[e] = reward
    success_out[e] = success
    out_of_workspace_out[e] = out_of_workspace(k, cube[e])
    info_out[e] = info
    hold_out[e] = held
