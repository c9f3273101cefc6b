"""The cabinet with a drawer (``sim_core/assets/cabinet_drawer.xml``) beside the arm, against MuJoCo C
on the same compiled model, and ``WarpGym/FrankaOpenDrawer-v0``: rewards on set states,
randomization, and a scripted controller that opens the drawer through the env's own actions
(``python tests/test_drawer.py`` prints its success rate)."""

from __future__ import annotations

import gymnasium as gym
import mujoco
import numpy as np
import torch
import warp as wp
from conftest import make_scene, mj_reference, t32

import sim_core as sc
import warpgym  # noqa: F401 (registers the tasks)
from sim_core.contact.frame import contact_frame

DRAWER = "WarpGym/FrankaOpenDrawer-v0"
N = 8
Q_HOME = np.array([0.0, 0.1, 0.0, -2.4, 0.0, 2.5, -0.785, 0.04, 0.04])


def _arm_and_cabinet(n_envs=N, **kw):
    scene, (_, franka, cabinet) = make_scene(
        sc.morphs.Plane(),
        sc.morphs.MJCF(file="franka_panda", gravcomp=1.0),
        sc.morphs.MJCF(file="cabinet_drawer", pos=(0.92, 0.0, 0.0)),
        n_envs=n_envs,
        **kw,
    )
    return scene, franka, cabinet


def test_the_cabinet_is_a_second_articulated_entity():
    scene, franka, cabinet = _arm_and_cabinet()
    assert [j.name for j in cabinet.joints] == ["cabinet_x", "cabinet_y", "drawer"]
    assert cabinet.n_dofs == 3 and cabinet.dof_start == franka.n_dofs
    m = scene.mjmodel
    lo, hi = m.jnt_range[cabinet.get_joint("drawer").idx]
    assert (lo, hi) == (0.0, 0.3)
    # the cabinet's geoms touch the hand and the pads, never the floor
    names = {m.geom(int(g)).name.split("/")[-1] for g in cabinet.geoms_idx if m.geom_contype[int(g)]}
    assert names == {"carcass_top", "drawer_front", "handle"}
    pairs = {
        tuple(sorted(m.geom(int(g)).name.split("/")[-1] for g in p))
        for p in sc.contact.pairs.candidate_pairs(m)[0]
    }
    assert ("handle", "left_finger_pad") in pairs and ("hand_capsule", "handle") in pairs
    assert not any("plane" in p and ("handle" in p or "drawer_front" in p or "carcass_top" in p) for p in pairs)


def test_arm_and_cabinet_trajectory_match_mujoco():
    """200 steps, contacts off: the arm under PD control to fresh random targets, the cabinet held by
    its servos at a different place in every env and moved there from elsewhere, the drawer
    (damped) pushed by random forces inside its travel. Every coordinate agrees with MuJoCo C's
    implicitfast to ~1e-6 (asserted 2e-5 m or rad)."""
    scene, franka, cabinet = _arm_and_cabinet(rigid_options=sc.RigidOptions(enable_collision=False))
    m, _ = mj_reference(scene)
    rng = np.random.default_rng(5)
    solver = scene.sim.rigid_solver
    q = np.tile(scene.mjmodel.qpos0, (N, 1))
    home = np.r_[Q_HOME[:7], 0.02, 0.02]  # fingers inside their travel: limits are held differently
    q[:, :9] = home + rng.uniform(-0.2, 0.2, (N, 9)) * np.r_[np.ones(7), 0, 0]
    place = rng.uniform(-0.05, 0.05, (N, 2))
    q[:, 9:11] = place + rng.uniform(-0.01, 0.01, (N, 2))  # the servos pull the cabinet to place
    q[:, 11] = rng.uniform(0.1, 0.2, N)
    solver.set_qpos(t32(q))
    cabinet.control_dofs_position(t32(place), [0, 1])
    datas = [mujoco.MjData(m) for _ in range(N)]
    for w, dw in enumerate(datas):
        dw.qpos[:] = q[w]
    worst = 0.0
    for _ in range(200):
        tgt = home + rng.uniform(-0.3, 0.3, (N, 9)) * np.r_[np.ones(7), 0.0, 0.0]
        tgt[:, 7:] = rng.uniform(0.01, 0.03, (N, 2))
        push = rng.uniform(-2.0, 2.0, (N, 1))
        franka.control_dofs_position(t32(tgt))
        cabinet.control_dofs_force(t32(push), [2])
        scene.step()
        for w, dw in enumerate(datas):
            dw.ctrl[:9], dw.ctrl[9:11] = tgt[w], place[w]
            dw.qfrc_applied[11] = push[w, 0]
            mujoco.mj_step(m, dw)
        ref = np.stack([dw.qpos for dw in datas])
        worst = max(worst, np.abs(solver.get_qpos().cpu().numpy() - ref).max())
    assert worst < 2e-5, worst
    final = solver.get_qpos().cpu().numpy()
    assert np.all((final[:, 11] > 0.0) & (final[:, 11] < 0.3)), "the drawer stayed inside its travel"
    np.testing.assert_allclose(final[:, 9:11], place, atol=1e-4)  # held at its place


def test_the_drawer_stops_at_the_ends_of_its_travel():
    """Pushed shut and pulled out hard (30 N), the drawer rests at each end of its slide, as in
    MuJoCo C (within 1 mm: sim_core holds joint limits rigidly, MuJoCo softly)."""
    scene, _, cabinet = _arm_and_cabinet(2, rigid_options=sc.RigidOptions(enable_collision=False))
    m, _ = mj_reference(scene)
    push = np.array([[-30.0], [30.0]])
    datas = [mujoco.MjData(m) for _ in range(2)]
    cabinet.set_dofs_position(t32([[0.0, 0.0, 0.15]] * 2))
    for dw in datas:
        dw.qpos[11] = 0.15
    for _ in range(150):
        cabinet.control_dofs_force(t32(push), [2])
        scene.step()
        for w, dw in enumerate(datas):
            dw.qfrc_applied[11] = push[w, 0]
            mujoco.mj_step(m, dw)
    ours = cabinet.get_dofs_position()[:, 2].cpu().numpy()
    ref = np.array([dw.qpos[11] for dw in datas])
    np.testing.assert_allclose(ours, [0.0, 0.3], atol=1e-3)
    np.testing.assert_allclose(ours, ref, atol=1e-3)


def test_resets_place_the_cabinet_and_draw_its_parameters_per_env():
    env = gym.make_vec(DRAWER, num_envs=256, device=sc.device, seed=3)
    obs, _ = env.reset(seed=3)
    u = env.unwrapped
    cfg, r = u.cfg, u.cfg.randomization
    solver = u.scene.sim.rigid_solver
    base = u.cabinet_xy()
    lo, hi = (torch.tensor(x, device=sc.device) for x in (cfg.cabinet.place_low, cfg.cabinet.place_high))
    assert bool(((base >= lo - 1e-6) & (base <= hi + 1e-6)).all()) and float(base.std(0).min()) > 0.01
    np.testing.assert_allclose(u.cabinet.get_dofs_position()[:, 2].cpu(), 0.0)
    k = u._task
    damping = wp.to_torch(solver.params_view().dof_damping)[:, k.drawer_d]
    friction = wp.to_torch(solver.params_view().geom_friction)[:, k.handle]
    radius = wp.to_torch(solver.params_view().geom_size)[:, k.handle, 0]
    for values, (low, high) in (
        (damping, r.drawer_damping),
        (friction, r.handle_friction),
        (radius, r.handle_radius),
    ):
        assert float(values.min()) >= low - 1e-6 and float(values.max()) <= high + 1e-6
        assert float(values.std()) > 0.2 * (high - low) / 12**0.5
    handle = obs[:, 25:28]
    np.testing.assert_allclose(handle.cpu(), u.handle_pos().cpu(), atol=3 * cfg.obs_noise.handle_pos)
    assert obs.shape == (256, 37 + 5)


def test_success_is_the_drawer_open_past_the_distance():
    env = gym.make_vec(DRAWER, num_envs=4, device=sc.device, seed=0, autoreset_mode="Disabled")
    env.reset(seed=0)
    u = env.unwrapped
    q = u.cabinet.get_dofs_position()
    q[:, 2] = torch.tensor([0.0, 0.1, 0.199, 0.21])
    u.cabinet.set_dofs_position(q)
    reward, terminated, success, info = u._evaluate()
    assert success.tolist() == [False, False, False, True] and not bool(terminated.any())
    np.testing.assert_allclose(info["opening"].cpu(), [0.0, 0.1, 0.199, 0.21], atol=1e-6)
    assert bool((reward[1:] > reward[:-1]).all())  # opening pays, in proportion


def _scripted_states(num_envs: int = 16, seed: int = 0):
    """The scripted opening's env after each step (for the contact checks)."""
    env = gym.make_vec(DRAWER, num_envs=num_envs, device=sc.device, seed=seed, autoreset_mode="Disabled")
    obs, _ = env.reset(seed=seed)
    for step in range(env.unwrapped.max_episode_steps):
        obs, *_, info = env.step(scripted_action(obs, step, env.unwrapped.cfg.sim.dt))
        yield env, info


def scripted_action(obs: torch.Tensor, step: int, dt: float) -> torch.Tensor:
    """Over the handle (0.6 s), down to it (0.4 s), close (0.2 s), then pull it 10 cm a step back
    toward the arm: ``ee_yaw_delta`` actions and the gripper, on the observation."""
    ee, handle = obs[:, 16:19], obs[:, 25:28]
    t = step * dt
    offset, grip = [0.0, 0.0, 0.0], -1.0
    if t < 0.6 - 1e-6:
        offset, grip = [0.0, 0.0, 0.08], 1.0
    elif t < 1.0 - 1e-6:
        grip = 1.0
    elif t >= 1.2 - 1e-6:
        offset = [-0.1, 0.0, 0.0]
    target = handle + torch.tensor(offset, device=obs.device)
    a = torch.zeros(obs.shape[0], 5, device=obs.device)
    a[:, :3] = ((target - ee) / 0.05).clamp(-1.0, 1.0)
    a[:, 4] = grip
    return a


def scripted_open(num_envs: int = 64, seed: int = 0) -> dict:
    """Success rate, sim errors and the share of envs whose pads squeezed the handle at some step."""
    gripped = torch.zeros(num_envs, dtype=torch.bool, device=sc.device)
    for env, info in _scripted_states(num_envs, seed):  # noqa: B007 (env: the last one's)
        gripped |= info["grasped"]
    return {
        "success": float(info["success"].float().mean()),
        "sim_errors": int(env.unwrapped.scene.sim.rigid_solver.get_error_envs_mask().sum()),
        "gripped": float(gripped.float().mean()),
        "opening": info["opening"].cpu(),
    }


def test_a_scripted_grasp_opens_the_drawer():
    r = scripted_open()
    assert r["sim_errors"] == 0
    assert r["gripped"] > 0.65, r  # the others hook the bar with a finger, or squeeze it askew
    assert r["success"] >= 0.85, r


def _replayed_opening():
    """The scripted opening's arm targets (20 Hz, one env without randomization, the cabinet at its
    built place) replayed in a scene of the same model stepped in single substeps of 10 ms, so that
    each step's contacts are detected at the state it starts from; yields that scene's solver and
    the state after each step and before it."""
    fixed = {"drawer_damping": [5.0, 5.0], "handle_friction": [1.0, 1.0], "handle_radius": [0.01, 0.01]}
    fixed |= {"joint_damping_scale": [1.0, 1.0], "pd_gain_scale": [1.0, 1.0]}
    env = gym.make_vec(
        DRAWER, num_envs=1, device=sc.device, seed=1, autoreset_mode="Disabled",
        randomization=fixed, cabinet={"place_low": [0.92, 0.0], "place_high": [0.92, 0.0]},
    )  # fmt: skip
    u = env.unwrapped
    targets = wp.to_torch(u.scene.sim.rigid_solver.state_view().ctrl_position)
    obs, _ = env.reset(seed=1)
    start = u.arm.entity.get_dofs_position().clone()
    replay = []
    for step in range(u.max_episode_steps):
        obs, *_ = env.step(scripted_action(obs, step, u.cfg.sim.dt))
        replay.append(targets[:, :9].clone())
    scene, franka, _ = _arm_and_cabinet(1, rigid_options=sc.RigidOptions(split_depth=None))
    franka.set_dofs_position(start)
    solver = scene.sim.rigid_solver
    for target in replay:
        franka.control_dofs_position(target)
        for _ in range(5):
            before = solver.get_qpos()[0].cpu().numpy().copy()  # get_qpos shares the live state
            scene.step()
            yield solver, scene.mjmodel, before


def finger_handle_contacts_against_mujoco() -> dict:
    """Through the replayed scripted opening (pads on the thin handle, the hand near the drawer's
    front), at the state each step's contacts were detected in: the pairs MuJoCo C finds touching
    that sim_core lacks; per pair kind, the gaps between the two deepest distances (capsule-box and
    box-box pick their points differently: the deepest compared) and between their normals; and
    each contact row's J, over both kinematic trees (arm and cabinet), against the difference of
    MuJoCo's ``mj_jac`` of the two bodies at the contact point along the contact frame."""
    missing, gaps, turns, rows, both, err = [], {}, [], 0, 0, 0.0
    for solver, m, q in _replayed_opening():
        d = mujoco.MjData(m)
        d.qpos[:] = q
        mujoco.mj_fwdPosition(m, d)
        c = {k: v[0].cpu().numpy().copy() for k, v in solver.get_contacts().items()}
        ours = np.flatnonzero(c["valid_mask"])
        for pair in {(con.geom1, con.geom2) for con in d.contact[: d.ncon]}:
            best = min(
                (con for con in d.contact[: d.ncon] if (con.geom1, con.geom2) == pair), key=lambda x: x.dist
            )
            if not -0.005 < best.dist < -1e-4:
                continue  # touching only, or deep overlaps whose exits the two choose differently
            names = tuple(sorted(m.geom(g).name.split("/")[-1] for g in pair))
            mine = [k for k in ours if {c["geom_a"][k], c["geom_b"][k]} == set(pair)]
            if not mine:
                missing.append(names)
                continue
            k = min(mine, key=lambda k: c["dist"][k])
            gaps.setdefault(names, []).append(abs(float(c["dist"][k]) - best.dist))
            sign = 1.0 if c["geom_a"][k] == pair[0] else -1.0
            turns.append(float(np.abs(sign * c["normal"][k] - best.frame[:3]).max()))
        jac, trees = solver.contacts.jac[0].cpu().numpy(), solver.contacts.jac_trees[0].cpu().numpy()
        t1, t2 = (x.cpu().numpy() for x in contact_frame(torch.as_tensor(c["normal"])))
        jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        for k in ours:
            written = np.zeros(m.nv, bool)
            for a, b in trees[k].reshape(2, 2):
                written[a:b] = True
            if not written.any():
                continue  # sat out this substep
            rel = np.zeros((3, m.nv))
            for body, sign in ((int(c["link_a"][k]), -1.0), (int(c["link_b"][k]), 1.0)):
                mujoco.mj_jac(m, d, jacp, jacr, c["position"][k].astype(np.float64), body)
                rel += sign * jacp
            frame = np.stack([c["normal"][k], t1[k], t2[k]]).astype(np.float64)
            err = max(err, float(np.abs(frame @ rel - np.where(written[None, :], jac[k].T, 0.0)).max()))
            rows += 1
            both += bool(written[:9].any() and written[9:].any())
    return {
        "missing": missing,
        "deepest_gap_m": {k: (len(v), max(v)) for k, v in gaps.items()},
        "normal_gap": max(turns),
        "rows": rows,
        "rows_on_both_trees": both,
        "jac_max_abs_error": err,
    }


def test_finger_handle_contacts_match_mujoco_c():
    """Every pair MuJoCo C finds touching, sim_core finds too, with the same deepest distance and
    normal; every contact row's J matches, and rows reach both trees (arm and cabinet)."""
    r = finger_handle_contacts_against_mujoco()
    assert r["missing"] == [], r
    kinds = r["deepest_gap_m"]
    assert {("handle", "left_finger_pad"), ("handle", "right_finger_pad")} <= kinds.keys(), r
    assert sum(n for n, _ in kinds.values()) > 50 and r["rows_on_both_trees"] > 100, r
    assert max(gap for _, gap in kinds.values()) < 1e-5, r  # m: float32 poses against float64
    assert r["normal_gap"] < 2e-3, r
    assert r["jac_max_abs_error"] < 1e-5, r  # m/s per unit dof velocity


if __name__ == "__main__":
    sc.init(backend=sc.cpu, seed=0)
    r = scripted_open(256)
    print({k: v for k, v in r.items() if k != "opening"})
