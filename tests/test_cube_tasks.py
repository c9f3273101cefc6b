"""FrankaLift, FrankaPush, FrankaPickPlace and FrankaStack: conformance, rewards on hand-built states,
randomization, and a scripted controller that solves Lift, PickPlace and Stack through the env's own
actions (``python tests/test_cube_tasks.py`` prints its success rates)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import torch

import sim_core as sc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from warpgym.franka_cube import OBS_DIM  # noqa: E402

LIFT, PUSH, PICK_PLACE = "WarpGym/FrankaLift-v0", "WarpGym/FrankaPush-v0", "WarpGym/FrankaPickPlace-v0"
STACK = "WarpGym/FrankaStack-v0"


def scripted_grasp(num_envs: int = 64, seed: int = 0, press_on_top: bool = False, task: str = LIFT) -> dict:
    """Open hand over the cube (turned to the cube's yaw), down, close, then lift above the goal
    height (Lift), carry the cube to the goal and hold it there (PickPlace), or carry it over the
    other cube, lower it onto it, open and draw the hand back up (Stack): a state machine on
    the observation, acting through ``ee_yaw_delta`` actions and the gripper. ``press_on_top``: the
    hand closed throughout instead, so it comes down on the cube's top face and pushes on it.
    Returns the success rate, the sim-error count, and the share of envs the env reports
    ``grasped`` at the last step."""
    env = gym.make_vec(task, num_envs=num_envs, device=sc.device, seed=seed, autoreset_mode="Disabled")
    cfg = env.unwrapped.cfg
    obs, _ = env.reset(seed=seed)
    n = num_envs
    dt = cfg.sim.dt * cfg.sim.decimation  # control step, s
    # per-step gains of the same time constants at any control rate (0.2 and 0.5 per 20 ms step)
    gain, yaw_gain = 1.0 - 0.8 ** (dt / 0.02), 1.0 - 0.5 ** (dt / 0.02)
    success = torch.zeros(n, dtype=torch.bool, device=sc.device)
    grip_offset = torch.zeros(n, 3, device=sc.device)  # the end effector from the cube once grasped
    for step in range(cfg.max_episode_steps):
        t = step * dt  # s: approach 0.6, descend 0.4, close 0.2, then lift or carry
        ee, cube, goal = obs[:, 16:19], obs[:, 25:28], obs[:, 43:46]
        hand_x, cube_x = obs[:, 19:22], obs[:, 28:31]
        yaw_err = torch.atan2(cube_x[:, 1], cube_x[:, 0]) - torch.atan2(hand_x[:, 1], hand_x[:, 0])
        yaw_err = torch.remainder(yaw_err + math.pi / 4, math.pi / 2) - math.pi / 4  # a cube: mod 90 deg
        if t < 0.6 - 1e-6:
            target, grip = cube + torch.tensor([0.0, 0.0, 0.08], device=sc.device), 1.0
        elif t < 1.0 - 1e-6:
            target, grip = cube + torch.tensor([0.0, 0.0, 0.005], device=sc.device), 1.0
        elif t < 1.2 - 1e-6:
            target, grip = cube + torch.tensor([0.0, 0.0, 0.005], device=sc.device), -1.0
            grip_offset = ee - cube
        elif task == PICK_PLACE:
            target, grip = goal + grip_offset, -1.0
        elif task == STACK:  # over the other cube 1.2-1.9 s, onto it -2.3, open -2.5, hand up
            above = torch.tensor([0.0, 0.0, 0.03], device=sc.device) * (t < 1.9 - 1e-6)
            target, grip = goal + grip_offset + above, 1.0 if t >= 2.3 - 1e-6 else -1.0
            if t >= 2.5 - 1e-6:
                target = torch.cat([ee[:, :2], goal[:, 2:] + 0.12], 1)
        else:
            target, grip = torch.cat([cube[:, :2], goal[:, 2:] + 0.04], 1), -1.0
        if press_on_top:
            target, grip = cube, -1.0
        move = (gain * (target - ee) / cfg.arm.ee_delta_scale).clamp(-1.0, 1.0)  # integrating: low gain
        yaw = (yaw_gain * yaw_err / cfg.arm.yaw_delta_scale).clamp(-1.0, 1.0)
        action = torch.cat([move, yaw[:, None], torch.full((n, 1), grip, device=sc.device)], 1)
        obs, _, _, _, info = env.step(action)
        success = info["success"]
    return {
        "success_rate": float(success.float().mean()),
        "errors": int(info["sim_error"].sum()),
        "grasped_rate": float(info["grasped"].float().mean()),
    }


def _state(n, **kw):
    """Hand-built reward terms: the cube (5 cm) resting at (0.5, 0, 0.025), the end effector on it,
    goal 15 cm above the floor, nothing grasped, no action change, at rest."""
    s = {
        "ee": torch.tensor([[0.5, 0.0, 0.025]], device=sc.device).repeat(n, 1),
        "cube_pos": torch.tensor([[0.5, 0.0, 0.025]], device=sc.device).repeat(n, 1),
        "cube_size": torch.full((n,), 0.05, device=sc.device),
        "goal": torch.tensor([[0.5, 0.0, 0.15]], device=sc.device).repeat(n, 1),
        "grasped": torch.zeros(n, dtype=torch.bool, device=sc.device),
        "action_rate": torch.zeros(n, device=sc.device),
        "joint_vel_sq": torch.zeros(n, device=sc.device),
    }
    s.update(kw)
    return s


def test_lift_reward_terms_and_success_on_hand_built_states():
    env = gym.make_vec(LIFT, num_envs=3, device=sc.device, seed=0).unwrapped
    w, hold_steps = env.cfg.reward, env.cfg.hold_steps
    # goal height 0.15, progress full at 0.15 + lift_margin. env 0: at the cube, not grasped;
    # env 1: grasped, half way up to full progress; env 2: grasped, at the goal height; env 3:
    # grasped, at full progress
    top = 0.15 + w.lift_margin
    z = [0.025, 0.025 + 0.5 * (top - 0.025), 0.15, top]
    cube = torch.tensor([[0.5, 0.0, zi] for zi in z], device=sc.device)
    s = _state(
        4, cube_pos=cube, ee=cube.clone(), grasped=torch.tensor([False, True, True, True], device=sc.device)
    )
    hold = torch.tensor([0] + [hold_steps - 1] * 3, dtype=torch.int32, device=sc.device)
    reward, success, out, info, hold = env.rewards(s, hold)
    at_goal = (0.15 - 0.025) / (top - 0.025)
    expected = torch.tensor(
        [
            w.reach,
            w.reach + w.grasp + 0.5 * w.lift,
            w.reach + w.grasp + at_goal * w.lift + w.success_bonus,
            w.reach + w.grasp + w.lift + w.success_bonus,
        ],
        device=sc.device,
    )
    torch.testing.assert_close(reward, expected)
    assert success.tolist() == [False, False, True, True] and hold.tolist() == [0, 0, hold_steps, hold_steps]
    assert not out.any()
    torch.testing.assert_close(info["cube_height"], torch.tensor(z, device=sc.device) - 0.025)
    # the penalties, and a reach term that decays with distance; the cube off the table ends it
    far = _state(
        1,
        ee=torch.tensor([[0.5, 0.0, 0.125]], device=sc.device),
        action_rate=torch.tensor([2.0], device=sc.device),
    )
    far["cube_pos"] = torch.tensor([[1.2, 0.0, 0.025]], device=sc.device)
    far["floor_push"] = torch.tensor([0.5], device=sc.device)
    reward, _, out, _, _ = env.rewards(far, torch.zeros(1, dtype=torch.int32, device=sc.device))
    d = math.hypot(0.7, 0.1)
    assert w.floor_push < 0
    penalties = 2 * w.action_rate + 0.5 * w.floor_push
    torch.testing.assert_close(
        reward, torch.tensor([w.reach * (1 - math.tanh(d / w.reach_std)) + penalties], device=sc.device)
    )
    assert out.tolist() == [True]


def test_push_reward_terms_and_success_on_hand_built_states():
    env = gym.make_vec(PUSH, num_envs=2, device=sc.device, seed=0).unwrapped
    w, r = env.cfg.reward, env.cfg.goal_radius
    goal = torch.tensor([[0.6, 0.0, 0.025]], device=sc.device).repeat(2, 1)
    # in the goal; lifted over it
    cube = torch.tensor([[0.6 - 0.5 * r, 0.0, 0.025], [0.6, 0.0, 0.06]], device=sc.device)
    behind = torch.tensor([[0.6 - 0.5 * r - 0.045, 0.0, 0.025], [0.6, 0.0, 0.06]], device=sc.device)
    s = _state(2, cube_pos=cube, goal=goal, ee=behind)
    reward, success, out, info, _ = env.rewards(s, torch.zeros(2, dtype=torch.int32, device=sc.device))
    assert success.tolist() == [True, False] and not out.any()
    t0 = 1 - math.tanh(0.5 * r / w.push_std)
    # env 1: the goal right under the cube leaves no "behind": the point is the cube's centre
    torch.testing.assert_close(
        reward,
        torch.tensor([w.reach + w.push * t0 + w.success_bonus, w.reach + w.push + w.lifted], device=sc.device),
    )
    torch.testing.assert_close(info["goal_distance"], torch.tensor([0.5 * r, 0.0], device=sc.device))


def test_pick_place_reward_terms_and_success_on_hand_built_states():
    env = gym.make_vec(PICK_PLACE, num_envs=4, device=sc.device, seed=0).unwrapped
    w, r, v = env.cfg.reward, env.cfg.goal_radius, env.cfg.rest_speed
    goal = torch.tensor([[0.5, 0.1, 0.2]], device=sc.device).repeat(4, 1)
    # env 0: on the floor, not grasped; env 1: grasped, 10 cm below the goal (risen 7.5 of the 17.5
    # cm from resting to the goal's height); env 2: grasped, within the radius, the arm at rest;
    # env 3: the same, the arm still moving
    near = [0.5, 0.1 - 0.5 * r, 0.2]
    cube = torch.tensor([[0.5, 0.1, 0.025], [0.5, 0.1, 0.1], near, near], device=sc.device)
    qd2 = torch.tensor([0.0, 1.0, (0.5 * v) ** 2, (2.0 * v) ** 2], device=sc.device)
    grasped = torch.tensor([False, True, True, True], device=sc.device)
    s = _state(4, cube_pos=cube, ee=cube.clone(), goal=goal, grasped=grasped, joint_vel_sq=qd2)
    reward, success, out, info, _ = env.rewards(s, torch.zeros(4, dtype=torch.int32, device=sc.device))
    assert success.tolist() == [False, False, True, False] and not out.any()
    t = lambda x, std: 1 - math.tanh(x / std)  # noqa: E731
    place = w.place * t(0.5 * r, w.place_std)
    held = w.reach + w.grasp + place + w.lift  # at the goal's height: risen all the way
    expected = [
        w.reach,
        w.reach + w.grasp + w.place * t(0.1, w.place_std) + w.lift * 0.075 / 0.175 + w.joint_vel,
        held + w.rest * t(0.5 * v, w.rest_std) + w.success_bonus + w.joint_vel * (0.5 * v) ** 2,
        held + w.rest * t(2.0 * v, w.rest_std) + w.joint_vel * (2.0 * v) ** 2,
    ]
    torch.testing.assert_close(reward, torch.tensor(expected, device=sc.device))
    distance = torch.tensor([0.175, 0.1, 0.5 * r, 0.5 * r], device=sc.device)
    torch.testing.assert_close(info["goal_distance"], distance)


def test_pick_place_goals_fill_their_box_and_low_ones_lie_on_the_floor():
    env = gym.make_vec(PICK_PLACE, num_envs=512, device=sc.device, seed=0)
    env.reset(seed=0)
    u = env.unwrapped
    lo, hi = u.cfg.goal_low, u.cfg.goal_high
    offset = u.goal_pos[:, :2] - u.cube.get_pos()[:, :2]
    for k in range(2):
        assert lo[k] - 1e-6 <= float(offset[:, k].min()) and float(offset[:, k].max()) <= hi[k] + 1e-6
    rest = u.cube.get_pos()[:, 2]  # the cube's resting height: half its edge (+ the reset's gap)
    z = u.goal_pos[:, 2]
    assert float(z.max()) <= hi[2] and float(z.max()) > 0.9 * hi[2]
    on_floor = z <= rest + 1e-6
    torch.testing.assert_close(z[on_floor], rest[on_floor])
    floor_share = float(on_floor.float().mean())  # heights drawn below the resting height
    assert 0.03 < floor_share < 0.25, floor_share
    with pytest.raises(ValueError, match="env.rest_speed: expected a value >= 0"):
        gym.make_vec(PICK_PLACE, num_envs=1, rest_speed=-0.1)


def test_stack_reward_terms_and_success_on_hand_built_states():
    env = gym.make_vec(STACK, num_envs=5, device=sc.device, seed=0).unwrapped
    w, cfg = env.cfg.reward, env.cfg
    goal = torch.tensor([[0.5, 0.1, 0.075]], device=sc.device).repeat(5, 1)  # on a 5 cm cube at (0.5, 0.1)
    # env 0: grasped, 5 cm above its place; env 1: placed, fingers still on it and closed; env 2:
    # placed, released, still: a success; env 3: the same, still moving; env 4: released 2 cm
    # off-centre (more than half its edge)
    above, off = [0.5, 0.1, 0.125], [0.5, 0.1 + 0.5 * 0.05 + 0.002, 0.075]
    cube = torch.tensor([above, goal[0].tolist(), goal[0].tolist(), goal[0].tolist(), off], device=sc.device)
    grasped = torch.tensor([True, True, False, False, False], device=sc.device)
    speed = torch.tensor([0.0, 0.0, 0.5 * cfg.static_speed, 2.0 * cfg.static_speed, 0.0], device=sc.device)
    on_base = torch.tensor([False, True, True, True, True], device=sc.device)
    touched = torch.tensor([True, True, False, False, False], device=sc.device)
    wide = 0.05 + cfg.open_width + 0.002
    opening = torch.tensor([0.04, 0.04, wide, wide, wide], device=sc.device)
    s = _state(5, cube_pos=cube, ee=cube.clone(), goal=goal, grasped=grasped, cube_speed=speed)
    command = torch.tensor([0.0, 0.25, 1.0, 1.0, 1.0], device=sc.device)  # the gripper action, 0 closed
    s.update(on_base=on_base, touched=touched, opening=opening, gripper_command=command)
    reward, success, out, info, _ = env.rewards(s, torch.zeros(5, dtype=torch.int32, device=sc.device))
    assert success.tolist() == [False, False, True, False, False] and not out.any()
    t = lambda x, std: 1 - math.tanh(x / std)  # noqa: E731
    full = w.reach + w.grasp + w.place  # the carry's stages, paid in full once placed
    released = full + w.release
    expected = [
        w.reach + w.grasp + w.place * t(0.05, w.place_std),
        full + w.release * 0.5 * 0.25 + w.still,
        released + w.still * t(0.5 * cfg.static_speed, w.still_std) + w.success_bonus,
        released + w.still * t(2.0 * cfg.static_speed, w.still_std),
        w.reach + w.place * 0.0,  # not placed, not grasped: the reach stage alone
    ]
    torch.testing.assert_close(reward, torch.tensor(expected, device=sc.device))
    torch.testing.assert_close(info["goal_distance"], torch.tensor([0.05, 0, 0, 0, 0.027], device=sc.device))


def test_stack_resets_put_both_cubes_apart_on_the_floor_and_its_goal_on_the_other():
    env = gym.make_vec(STACK, num_envs=512, device=sc.device, seed=0)
    env.reset(seed=0)
    u = env.unwrapped
    cfg, r = u.cfg, u.cfg.randomization
    a, b = u.cube.get_pos(), u.base_cube.get_pos()
    gap = (a[:, :2] - b[:, :2]).norm(dim=1)
    lo, hi = cfg.pair_distance
    assert (
        float(gap.min()) >= lo - 1e-5
        and float(gap.max()) <= hi + 1e-5
        and float(gap.max() - gap.min()) > 0.8 * (hi - lo)
    )
    middle = 0.5 * (a[:, :2] + b[:, :2])
    for k in range(2):
        assert cfg.cube.spawn_low[k] - 1e-6 <= float(middle[:, k].min())
        assert float(middle[:, k].max()) <= cfg.cube.spawn_high[k] + 1e-6
    size_a, size_b = u.cube.get_size()[:, 0], u.base_cube.get_size()[:, 0]
    torch.testing.assert_close(u.cube_size, size_a)
    torch.testing.assert_close(u.base_size, size_b)
    for size in (size_a, size_b):
        assert float(size.min()) >= r.cube_size[0] - 1e-6 and float(size.max()) <= r.cube_size[1] + 1e-6
    assert float((size_a - size_b).abs().mean()) > 0.002  # drawn apart, not shared
    torch.testing.assert_close(a[:, 2], 0.5 * size_a + 1e-4)
    torch.testing.assert_close(b[:, 2], 0.5 * size_b + 1e-4)
    goal = b + torch.stack([0 * size_a, 0 * size_a, 0.5 * (size_a + size_b)], 1)
    torch.testing.assert_close(u.goal_pos, goal)
    with pytest.raises(ValueError, match="env.pair_distance"):
        gym.make_vec(STACK, num_envs=1, pair_distance=[0.2, 0.1])


def test_scripted_controller_stacks_the_cube_in_most_envs():
    out = scripted_grasp(task=STACK)
    assert out["errors"] == 0
    assert out["success_rate"] >= 0.8 and out["grasped_rate"] <= 0.05, out  # released at the end


def _randomized(env):
    u = env.unwrapped
    arm = u.arm.entity
    return torch.stack(
        [
            u.cube.get_mass(),
            u.cube.get_size()[:, 0],
            u.cube.get_friction()[:, 0],
            arm.get_dofs_damping()[:, 0] / u.arm.damping0[0],
            arm.get_dofs_kp()[:, 0] / u.arm.kp0[0],
            arm.get_dofs_kv()[:, 3] / u.arm.kv0[3],
        ],
        1,
    )


def test_randomization_stays_in_range_and_every_reset_redraws_it():
    env = gym.make_vec(LIFT, num_envs=64, device=sc.device, seed=0)
    r = env.unwrapped.cfg.randomization
    env.reset(seed=0)
    first = _randomized(env)
    ranges = [
        r.cube_mass,
        r.cube_size,
        r.cube_friction,
        r.joint_damping_scale,
        r.pd_gain_scale,
        r.pd_gain_scale,
    ]
    for k, (lo, hi) in enumerate(ranges):
        col = first[:, k]
        assert float(col.min()) >= lo - 1e-6 and float(col.max()) <= hi + 1e-6, (k, col)
        assert float(col.max() - col.min()) > 0.5 * (hi - lo), k  # spread over the range
    torch.testing.assert_close(first[:, 4], first[:, 5])  # kp and kv scale together
    # the cube rests on its own size, not the built one
    size = env.unwrapped.cube.get_size()[:, 2]
    torch.testing.assert_close(env.unwrapped.cube.get_pos()[:, 2], 0.5 * size + 1e-4)
    mask = torch.zeros(64, dtype=torch.bool, device=sc.device)
    mask[::2] = True
    env.reset(options={"reset_mask": mask})
    second = _randomized(env)
    assert (second[mask] != first[mask]).all()
    torch.testing.assert_close(second[~mask], first[~mask])


@pytest.mark.parametrize("task", [LIFT, PUSH, PICK_PLACE])
def test_single_env_views_pass_gymnasium_check_env(task):
    from gymnasium.utils.env_checker import check_env

    env = gym.make(task)
    check_env(env.unwrapped, skip_render_check=True)
    assert env.observation_space.shape == (OBS_DIM + env.action_space.shape[0],)


def test_a_blown_up_env_is_truncated_with_a_flag_and_reset_alone():
    env = gym.make_vec(PUSH, num_envs=3, device=sc.device, seed=0)
    u = env.unwrapped
    env.reset(seed=0)
    q = u.cube.get_pos().clone()
    u.scene.sim.rigid_solver.state.qvel[1, 0] = float("inf")
    obs, reward, terminated, truncated, info = env.step(torch.zeros(3, 4, device=sc.device))
    assert truncated.tolist() == [False, True, False] and info["final_info"]["sim_error"].tolist() == [
        False,
        True,
        False,
    ]
    assert torch.isfinite(obs).all() and torch.isfinite(reward).all()
    assert info["_episode"].tolist() == [False, True, False] and info["episode"]["sim_error"][1]
    assert not u.scene.sim.rigid_solver.get_error_envs_mask().any()
    assert torch.allclose(u.cube.get_pos()[[0, 2]], q[[0, 2]], atol=1e-3)  # the others went on


def test_end_effector_modes_keep_the_hand_above_ee_z_min_and_hold_it_down():
    env = gym.make_vec(PUSH, num_envs=4, device=sc.device, seed=0, max_episode_steps=100)  # one episode
    obs, _ = env.reset(seed=0)
    env.unwrapped.cube.set_pos(torch.tensor([[0.75, 0.35, 0.025]]).repeat(4, 1))  # out of the way
    z_min = env.unwrapped.cfg.arm.ee_z_min
    down = torch.tensor([[0.0, 0.0, -1.0, 0.0]], device=sc.device).repeat(4, 1)
    z, tilt, pushed = [], 0.0, []
    for t in range(50):
        obs, *_ = env.step(down)
        z.append(obs[:, 18])
        pushed.append(env.unwrapped.arm.floor_push.clone())
        if t >= 10:  # the reset's joint noise tilts the hand up to ~10 deg; the IK rights it first
            tilt = max(tilt, float(torch.rad2deg(torch.acos(-obs[:, 24])).max()))
    z = torch.stack(z)
    # arriving at 0.75 m/s the hand dips below for a step or two, then holds there (gravcomp: no sag)
    assert float(z.min()) > z_min - 0.012, float(z.min())
    settled = z[-10:]
    assert float((settled - z_min).abs().max()) < 0.002, settled
    assert tilt < 5.0, tilt
    # the z action the floor discards, in action units: none on the way down, all of it once there
    pushed = torch.stack(pushed)
    assert float(pushed[0].max()) == 0.0 and float(pushed[-10:].min()) > 0.9, pushed


def test_a_step_pays_floor_push_for_the_z_action_the_floor_discards():
    # the same seed and actions with and without the cost: the same physics, rewards apart by it
    costs = ({}, {"floor_push": 0.0})
    envs = [gym.make_vec(LIFT, num_envs=4, device=sc.device, seed=0, reward=r) for r in costs]
    w = envs[0].unwrapped.cfg.reward.floor_push
    assert w < 0
    down = torch.tensor([[0.0, 0.0, -1.0, 0.0, 1.0]], device=sc.device).repeat(4, 1)  # gripper open
    for env in envs:
        env.reset(seed=0)
    pushed = 0.0
    for _ in range(15):
        (_, paid, *_), (_, free, *_) = (env.step(down) for env in envs)
        p = envs[0].unwrapped.arm.floor_push
        torch.testing.assert_close(paid, free + w * p)
        pushed = max(pushed, float(p.min()))
    assert pushed > 0.5  # the hands reached the floor and pressed on


def test_scripted_controller_lifts_the_cube_in_most_envs():
    out = scripted_grasp()
    assert out["errors"] == 0
    assert out["success_rate"] >= 0.8 and out["grasped_rate"] >= 0.8, out


def test_scripted_controller_places_the_cube_at_the_goal_in_most_envs():
    out = scripted_grasp(task=PICK_PLACE)
    assert out["errors"] == 0
    assert out["success_rate"] >= 0.8 and out["grasped_rate"] >= 0.8, out


def test_closed_pads_pushing_on_the_cube_top_are_no_grasp():
    # the pads push down on the top face in every env; a cube that tips over can end up truly
    # pinched between the closed fingers (1 env of 16 here)
    out = scripted_grasp(16, press_on_top=True)
    assert out["grasped_rate"] <= 0.1 and out["success_rate"] == 0.0, out


if __name__ == "__main__":
    print(scripted_grasp(256))
    print("pick-place:", scripted_grasp(256, task=PICK_PLACE))
    print("stack:", scripted_grasp(256, task=STACK))
    print("pressing on top:", scripted_grasp(64, press_on_top=True))
