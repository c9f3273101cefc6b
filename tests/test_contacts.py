"""Contacts, friction and free objects: resting, sliding, stacking, grasping, stress, against MuJoCo C.

Each check is a scenario function returning its numbers; the tests assert on them, and
``python tests/test_contacts.py`` runs them all and prints the numbers.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sim_core as sc  # noqa: E402
from sim_core import prefetch  # noqa: E402
from sim_core.contact import buffers  # noqa: E402
from sim_core.contact.frame import contact_frame  # noqa: E402
from sim_core.transforms import quat_mul, quat_rotate  # noqa: E402
from warpgym.ik import dls_step  # noqa: E402

CUBE = 0.05  # edge, m
RHO = 1000.0  # kg/m^3: a 125 g cube


def _scene(*, gravity=(0.0, 0.0, -9.81), rigid_options=None, cpu_threads=None):
    return sc.Scene(
        sim_options=sc.SimOptions(dt=0.01, gravity=gravity, cpu_threads=cpu_threads),
        rigid_options=rigid_options,
        profiling_options=sc.ProfilingOptions(show_FPS=False),
    )


def _cube_on_floor(n_envs, *, z=CUBE / 2, friction=1.0, gravity=(0.0, 0.0, -9.81)):
    scene = _scene(gravity=gravity)
    scene.add_entity(sc.morphs.Plane(), material=sc.materials.Rigid(friction=friction))
    cube = scene.add_entity(
        sc.morphs.Box(size=(CUBE, CUBE, CUBE), pos=(0.0, 0.0, z)),
        material=sc.materials.Rigid(rho=RHO, friction=friction),
    )
    scene.build(n_envs=n_envs)
    return scene, cube


# ---- scenarios -------------------------------------------------------------------------------


def drop_and_rest() -> dict:
    """A 5 cm cube dropped from 10 cm (center height), then 10 s at rest."""
    scene, cube = _cube_on_floor(4, z=0.10)
    z = []
    for _ in range(100):  # 1 s: falls and settles
        scene.step()
        z.append(float(cube.get_pos()[0, 2]))
    settled = cube.get_pos().clone()
    rounds, speed, spin = 0, 0.0, 0.0
    solver = scene.sim.rigid_solver
    for k in range(1000):
        scene.step()
        if k >= 100:  # at rest: the warm start settles every substep, and nothing rocks or twists
            rounds = max(rounds, int(solver.get_solver_rounds().max()))
            speed = max(speed, float(cube.get_vel().norm(dim=1).max()))
            spin = max(spin, float(cube.get_ang().norm(dim=1).max()))
    end = cube.get_pos()
    c = scene.sim.rigid_solver.get_contacts()
    return {
        "rest_height_error_m": float((end[:, 2] - CUBE / 2).abs().max()),
        "drift_10s_m": float((end - settled).norm(dim=1).max()),
        "min_height_during_drop_m": min(z),
        "normal_force_over_weight": float(c["force"][..., 2].sum(1).mean() / (RHO * CUBE**3 * 9.81)),
        "contacts": int(c["valid_mask"][0].sum()),
        "rest_max_solver_rounds": rounds,
        "rest_max_speed_m_s": speed,
        "rest_max_spin_rad_s": spin,
    }


def tilted_gravity(friction: float) -> dict:
    """Gravity tilted 20 degrees about y: the floor acts as a 20-degree slope. Measured over 2 s
    after 0.2 s of settling; the acceleration from the change in velocity."""
    th = math.radians(20.0)
    g = (9.81 * math.sin(th), 0.0, -9.81 * math.cos(th))
    scene, cube = _cube_on_floor(2, friction=friction, gravity=g)
    for _ in range(20):
        scene.step()
    p0, v0 = cube.get_pos().clone(), cube.get_vel().clone()
    for _ in range(200):
        scene.step()
    moved = float((cube.get_pos() - p0).norm(dim=1).max())
    acc = float(((cube.get_vel() - v0)[:, 0] / 2.0).mean())
    return {
        "moved_2s_m": moved,
        "acceleration": acc,
        "expected": 9.81 * (math.sin(th) - friction * math.cos(th)),
    }


def stack_of_three() -> dict:
    """Three 5 cm cubes stacked with 1 mm gaps, 10 s."""
    scene = _scene()
    scene.add_entity(sc.morphs.Plane())
    cubes = [
        scene.add_entity(
            sc.morphs.Box(size=(CUBE, CUBE, CUBE), pos=(0.0, 0.0, CUBE / 2 + k * (CUBE + 0.001))),
            material=sc.materials.Rigid(rho=RHO, friction=0.5),
        )
        for k in range(3)
    ]
    scene.build(n_envs=2)
    for _ in range(1000):
        scene.step()
    pos = torch.stack([c.get_pos() for c in cubes], 1)  # (n_envs, 3, 3)
    return {
        "max_horizontal_offset_m": float(pos[..., :2].norm(dim=-1).max()),
        "height_errors_m": [float((pos[:, k, 2] - (CUBE / 2 + k * CUBE)).abs().max()) for k in range(3)],
        # each soft contact layer settles a few tenths of a millimetre deep, so the cubes sit lower
    }


HOME = (0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.785)
TCP = (0.0, 0.0, 0.1034)  # between the fingertips, in the hand frame


def franka_grasp(n_envs: int = 8, seed: int = 0) -> dict:
    """Position control only: differential IK (damped least squares on the hand's 6-D Jacobian)
    moves the open hand over a cube placed at a random spot and yaw in each env, down around it;
    the fingers close on it (position targets at 0), the hand lifts 15 cm and holds 5 s."""
    scene = _scene()
    scene.add_entity(sc.morphs.Plane())
    franka = scene.add_entity(sc.morphs.MJCF(file="franka_panda"))
    cube = scene.add_entity(
        sc.morphs.Box(size=(CUBE, CUBE, CUBE), pos=(0.5, 0.0, CUBE / 2)), material=sc.materials.Rigid(rho=RHO)
    )
    scene.build(n_envs=n_envs)
    dev = sc.device
    home = torch.tensor(HOME + (0.04, 0.04), device=dev).repeat(n_envs, 1)
    franka.set_dofs_position(home)
    franka.control_dofs_position(home)
    g = torch.Generator().manual_seed(seed)
    xy = torch.tensor([0.5, 0.0]) + (torch.rand(n_envs, 2, generator=g) - 0.5) * 0.1
    yaw = (torch.rand(n_envs, generator=g) - 0.5) * 0.6
    cpos = torch.cat([xy, torch.full((n_envs, 1), CUBE / 2)], 1).to(dev)
    cquat = torch.stack([torch.cos(yaw / 2), 0 * yaw, 0 * yaw, torch.sin(yaw / 2)], 1).to(dev)
    cube.set_pos(cpos)
    cube.set_quat(cquat)
    hand = franka.get_link("hand")
    tcp = torch.tensor(TCP, device=dev)
    hand_target = quat_mul(cquat, hand.get_quat())  # the home orientation, turned by the cube's yaw
    arm = home[:, :7].clone()
    conj = torch.tensor([1.0, -1.0, -1.0, -1.0], device=dev)

    def track(target, fingers, steps):
        for _ in range(steps):
            q_err = quat_mul(hand_target, hand.get_quat() * conj)
            q_err = q_err * torch.sign(q_err[:, :1])
            pos_err = (target - (hand.get_pos() + quat_rotate(hand.get_quat(), tcp))).clamp(-0.05, 0.05)
            jac = franka.get_jacobian(hand, tcp)[:, :, :7]
            arm.add_(0.1 * dls_step(jac, torch.cat([pos_err, 2.0 * q_err[:, 1:]], 1), 0.05))
            franka.control_dofs_position(torch.cat([arm, fingers.expand(n_envs, 2)], 1))
            scene.step()

    above = cpos + torch.tensor([0.0, 0.0, 0.1], device=dev)
    opened = torch.tensor([0.04, 0.04], device=dev)
    track(above, opened, 200)  # align above the cube, then straight down
    for k in range(1, 101):
        track(above + (cpos - above) * (k / 100), opened, 1)
    track(cpos, opened, 20)
    track(cpos, torch.zeros(2, device=dev), 50)  # close
    lifted = cpos + torch.tensor([0.0, 0.0, 0.15], device=dev)
    track(lifted, torch.zeros(2, device=dev), 150)

    def in_hand():
        return quat_rotate(hand.get_quat() * conj, cube.get_pos() - hand.get_pos())  # in the hand frame

    rel0 = in_hand()
    track(lifted, torch.zeros(2, device=dev), 500)  # hold 5 s
    solver = scene.sim.rigid_solver
    return {
        "lift_m": (cube.get_pos()[:, 2] - CUBE / 2).tolist(),
        "slip_5s_m": float((in_hand() - rel0).norm(dim=1).max()),
        "errors": int(solver.get_error_envs_mask().sum()),
    }


GRASP_READY = (0.0, 0.35, 0.0, -2.3, 0.0, 2.65, 0.785)  # hand ~5 cm above a cube at (0.45, 0, 0.025)


def _arm_and_cube_scene(n_envs: int, rigid_options=None, cpu_threads=None):
    """Floor, Franka and a 5 cm cube in front of it, built with ``n_envs`` envs; returns scene, arm."""
    scene = _scene(rigid_options=rigid_options, cpu_threads=cpu_threads)
    scene.add_entity(sc.morphs.Plane())
    franka = scene.add_entity(sc.morphs.MJCF(file="franka_panda"))
    scene.add_entity(
        sc.morphs.Box(size=(CUBE, CUBE, CUBE), pos=(0.45, 0.0, CUBE / 2)), material=sc.materials.Rigid(rho=RHO)
    )
    scene.build(n_envs=n_envs)
    return scene, franka


def random_arm_stress(
    n_envs: int = 250, steps: int = 400, seed: int = 0, full_range: bool = False, max_contacts=None
) -> dict:
    """Random arm commands with a cube at hand (``n_envs * steps`` env-steps): each step every
    arm joint's position target moves by a uniform random +-0.05 rad (clamped to its range; up to
    5 rad/s, an RL policy exploring with the Reach task's action scale) and the fingers get uniform
    random targets, from a start with the open hand just above the cube. ``full_range``: fresh
    uniform targets over the whole joint ranges every step instead (the speed benchmark's load,
    joints swinging at up to ~10 rad/s). Returns the deepest penetration of any contact at any
    step, error and overflow counts."""
    scene, franka = _arm_and_cube_scene(n_envs, sc.RigidOptions(max_contacts=max_contacts))
    dev = sc.device
    solver = scene.sim.rigid_solver
    lo = torch.as_tensor(scene.mjmodel.jnt_range[:9, 0], dtype=torch.float32, device=dev)
    hi = torch.as_tensor(scene.mjmodel.jnt_range[:9, 1], dtype=torch.float32, device=dev)
    start = torch.tensor(GRASP_READY + (0.04, 0.04), device=dev).repeat(n_envs, 1)
    franka.set_dofs_position(start)
    target = start.clone()
    g = torch.Generator(device=dev).manual_seed(seed)
    deepest = torch.zeros((), device=dev)
    deep_steps = torch.zeros((), dtype=torch.int64, device=dev)  # env-steps with a contact > 5 mm deep
    errors = torch.zeros((), dtype=torch.int64, device=dev)
    overflow = torch.zeros((), dtype=torch.int64, device=dev)
    contacts = torch.zeros((), dtype=torch.int64, device=dev)
    outside_cone = torch.zeros((), dtype=torch.int64, device=dev)  # friction beyond mu * normal force
    redone = torch.zeros((), dtype=torch.int64, device=dev)  # env-steps the adaptive substeps redid
    friction = solver.params.geom_friction  # (n_envs, ngeom): mu of a pair is the larger of its geoms'
    for _ in range(steps):
        u = torch.rand(n_envs, 9, generator=g, device=dev)
        if full_range:
            target = lo + (hi - lo) * u
        else:
            target[:, :7] = torch.clamp(target[:, :7] + 0.1 * (u[:, :7] - 0.5), lo[:7], hi[:7])
            target[:, 7:] = 0.04 * u[:, 7:]
        franka.control_dofs_position(target)
        scene.step()
        c = solver.get_contacts()
        deepest = torch.minimum(deepest, c["dist"].min())
        deep_steps += (c["dist"].min(dim=1).values < -0.005).sum()
        errors += solver.get_error_envs_mask().sum()
        overflow += solver.get_contact_overflow().sum()
        contacts += c["valid_mask"].sum()
        fn = (c["force"] * c["normal"]).sum(-1)
        ft = (c["force"] - fn[..., None] * c["normal"]).norm(dim=-1)
        mu = torch.maximum(*(friction.gather(1, c[k].clamp(min=0)) for k in ("geom_a", "geom_b")))
        outside_cone += (c["valid_mask"] & (ft > 1.01 * mu * fn + 1e-3)).sum()
        redone += (solver.get_step_splits() > 1).sum()
    state = torch.cat([solver.get_qpos(), solver.get_qvel()], 1)
    return {
        "env_steps": n_envs * steps,
        "finite": bool(torch.isfinite(state).all()),
        "deepest_penetration_m": float(-deepest),
        "env_steps_deeper_than_5mm": int(deep_steps),
        "error_env_steps": int(errors),
        "dropped_contacts": int(overflow),
        "mean_contacts": float(contacts) / (n_envs * steps),
        "contacts_outside_friction_cone": int(outside_cone),
        "redone_env_steps": int(redone),
        "state": state.cpu(),
    }


def against_mujoco() -> dict:
    """The drop of ``drop_and_rest`` in MuJoCo C on the scene's own compiled model (its defaults:
    pyramidal cone, Newton solver): height over time, rest height, summed normal force."""
    scene, cube = _cube_on_floor(1, z=0.10)
    m = scene.mjmodel
    d = mujoco.MjData(m)
    ours, ref, mj_force = [], [], []
    for _ in range(300):
        scene.step()
        ours.append(float(cube.get_pos()[0, 2]))
        mujoco.mj_step(m, d)
        ref.append(float(d.qpos[2]))
    for i in range(d.ncon):
        f = np.zeros(6)
        mujoco.mj_contactForce(m, d, i, f)
        mj_force.append(f[0])
    weight = float(m.body_mass[1]) * 9.81
    ours_force = float(scene.sim.rigid_solver.get_contacts()["force"][0, :, 2].sum())
    ours, ref = np.array(ours), np.array(ref)
    fall = slice(0, 10)  # before either touches the floor (contact at ~0.1 s)
    return {
        "free_fall_max_diff_m": float(np.abs(ours[fall] - ref[fall]).max()),
        "trajectory_max_diff_m": float(np.abs(ours - ref).max()),
        "trajectory_max_diff_after_0.5s_m": float(np.abs(ours[50:] - ref[50:]).max()),
        "rest_height": (float(ours[-1]), float(ref[-1])),
        "min_height": (float(ours.min()), float(ref.min())),
        "normal_force_over_weight": (ours_force / weight, float(np.sum(mj_force)) / weight),
    }


def contact_jacobians_against_mujoco(steps: int = 200, seed: int = 8) -> dict:
    """The contact rows the generated step wrote (``sim_core/contact/rows.py``): each contact's J, the
    velocity of geom b's body minus geom a's at the contact point along (normal, t1, t2), against
    MuJoCo C's ``mj_jac`` at the same configuration, while a random walk of arm targets works the
    hand against the cube and the floor (one env; the rows of the last substep are in the solver's
    scratch afterwards; J is written within the trees a row touches, the rest is zero). Rows of
    contacts that sat out the substep touch no tree and are skipped."""
    scene, franka = _arm_and_cube_scene(1, sc.RigidOptions(split_depth=None))  # one substep a step
    solver, m = scene.sim.rigid_solver, scene.mjmodel
    d = mujoco.MjData(m)
    franka.set_dofs_position(torch.tensor(GRASP_READY + (0.04, 0.04)))
    g = torch.Generator().manual_seed(seed)
    target = torch.tensor(GRASP_READY + (0.04, 0.04))
    lo, hi = (torch.as_tensor(m.jnt_range[:9, k], dtype=torch.float32) for k in (0, 1))
    compared, arm_rows, err = 0, 0, 0.0
    jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    for _ in range(steps):
        target[:7] = torch.clamp(target[:7] + 0.1 * (torch.rand(7, generator=g) - 0.5), lo[:7], hi[:7])
        target[7:] = 0.04 * torch.rand(2, generator=g)
        franka.control_dofs_position(target.to(sc.device))
        d.qpos[:] = solver.get_qpos()[0].cpu().numpy()  # the configuration the step's rows are built at
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        scene.step()
        c = solver.get_contacts()
        jac = solver.contacts.jac[0].cpu().numpy()  # (rows, nv, 3): J's (normal, t1, t2) rows per dof
        trees = solver.contacts.jac_trees[0].cpu().numpy()  # (rows, 4): the dof ranges of its rows
        t1, t2 = contact_frame(c["normal"][0])
        for k in np.flatnonzero(c["valid_mask"][0].cpu().numpy()):
            written = np.zeros(m.nv, bool)
            for s, e in trees[k].reshape(2, 2):
                written[s:e] = True
            if not written.any():
                continue  # sat out this substep
            p = c["position"][0, k].double().cpu().numpy()
            rel = np.zeros((3, m.nv))
            for body, sign in ((int(c["link_a"][0, k]), -1.0), (int(c["link_b"][0, k]), 1.0)):
                mujoco.mj_jac(m, d, jacp, jacr, p, body)
                rel += sign * jacp
            frame = torch.stack([c["normal"][0, k], t1[k], t2[k]]).double().cpu().numpy()
            ours = np.where(written[None, :], jac[k].T, 0.0)  # J is zero outside the row's trees
            err = max(err, float(np.abs(frame @ rel - ours).max()))
            compared += 1
            arm_rows += not {int(c["link_a"][0, k]), int(c["link_b"][0, k])} <= {0, m.nbody - 1}  # cube: last
    return {"rows_compared": compared, "rows_touching_the_arm": arm_rows, "max_abs_error": err}


# ---- tests -------------------------------------------------------------------------------------


def test_dropped_cube_rests_at_its_half_size_and_does_not_drift():
    r = drop_and_rest()
    assert r["rest_height_error_m"] < 1e-3
    assert r["drift_10s_m"] < 1e-3
    assert r["min_height_during_drop_m"] > CUBE / 2 - 5e-3  # the impact does not sink it
    assert abs(r["normal_force_over_weight"] - 1.0) < 0.02
    assert r["contacts"] == 4
    # no jitter: a resting cube neither rocks nor twists, and takes no round of the solve (the settled
    # warm start is polished each substep, ``_polish_row``)
    assert r["rest_max_solver_rounds"] == 0
    assert r["rest_max_speed_m_s"] < 1e-6 and r["rest_max_spin_rad_s"] < 1e-5


def test_friction_holds_on_a_slope_and_slides_with_coulomb_deceleration():
    hold = tilted_gravity(0.5)
    assert hold["moved_2s_m"] < 1e-3
    slide = tilted_gravity(0.2)
    assert abs(slide["acceleration"] - slide["expected"]) < 0.1 * slide["expected"]


def test_three_stacked_cubes_stay_standing():
    r = stack_of_three()
    assert r["max_horizontal_offset_m"] < 2e-3
    assert all(err < 1e-3 * (k + 1) for k, err in enumerate(r["height_errors_m"]))


def test_franka_grasps_lifts_and_holds_a_cube_in_every_env():
    r = franka_grasp()
    assert min(r["lift_m"]) > 0.14
    assert r["slip_5s_m"] < 5e-3
    assert r["errors"] == 0


def test_the_solver_scratch_laid_out_env_minor_steps_the_same_bits(monkeypatch):
    """The contact solver's scratch laid out env-minor (``buffers.env_minor``, a GPU's layout: the
    threads of a warp, one env each, read and write coalesced) steps the same bits as the device's
    other layout (the CPU's one env's worth shared by every env; a GPU's env-major): the generated
    step indexes through strides, and writes every scratch entry of an env before reading it."""
    ref = random_arm_stress(n_envs=64, steps=60, seed=1)
    made = []
    if sc.device.type == "cpu":
        monkeypatch.setattr(buffers, "scratch", lambda *a: made.append(a) or buffers.env_minor(*a))
    else:
        monkeypatch.setattr(buffers, "GPU_SCRATCH_ENV_MINOR", False)
    other = random_arm_stress(n_envs=64, steps=60, seed=1)
    if sc.device.type == "cpu":  # the solver's scratch and the split's start state, both exercised
        assert len(made) > 10 and ref["redone_env_steps"] > 0
    assert ref["mean_contacts"] > 4
    assert torch.equal(ref["state"], other["state"])
    assert ref["contacts_outside_friction_cone"] == other["contacts_outside_friction_cone"]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])  # seeds 1 and 3 need the adaptive split's second redo
def test_random_arm_commands_stay_finite_and_shallow(seed):
    r = random_arm_stress(seed=seed)
    stats = {k: v for k, v in r.items() if k != "state"}
    assert r["env_steps"] >= 100_000
    assert r["finite"] and r["error_env_steps"] == 0 and r["dropped_contacts"] == 0, stats
    assert r["mean_contacts"] > 4, stats  # the hand works at the cube: these are real contact scenes
    # no contact deeper than 5 mm (the adaptive split redoes the steps that would be)
    assert r["env_steps_deeper_than_5mm"] == 0 and r["deepest_penetration_m"] < 0.005, stats
    # friction within the cone (up to round-off) at every contact, also where the solve ran out of
    # rounds with a normal impulse still shrinking
    assert r["contacts_outside_friction_cone"] == 0, stats
    if seed == 0:
        again = random_arm_stress(seed=seed)
        assert torch.equal(r["state"], again["state"])  # same seed, same device: bit for bit


def _walk_targets(seed: int, steps: int, n: int) -> torch.Tensor:
    """Joint targets (steps, n, 9): a random walk from the grasp-ready pose (as random_arm_stress),
    the fingers at random openings."""
    g = torch.Generator().manual_seed(seed)
    walk = torch.cumsum(0.1 * (torch.rand(steps, n, 9, generator=g) - 0.5), 0)
    targets = torch.tensor(GRASP_READY + (0.0, 0.0)) + walk
    targets[..., 7:] = 0.04 * torch.rand(steps, n, 2, generator=g)
    return targets


def _arm_and_cube_run(
    targets: torch.Tensor, cpu_threads=None, reset_odd: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """qpos and qvel after stepping the arm-and-cube scene through ``targets`` (steps, n_envs, 9),
    and each env's count of penetrating contacts that involve the arm over the run. ``reset_odd``:
    halfway through, the odd envs are set back to the start (their contacts detected again)."""
    n = targets.shape[1]
    scene, franka = _arm_and_cube_scene(n, cpu_threads=cpu_threads)
    cube_geom = scene.mjmodel.ngeom - 1  # added last
    solver = scene.sim.rigid_solver
    start = torch.tensor(GRASP_READY + (0.04, 0.04)).repeat(n, 1)
    franka.set_dofs_position(start)
    arm = torch.zeros(n, dtype=torch.int64, device=sc.device)
    for i, target in enumerate(targets):
        if reset_odd and i == len(targets) // 2:
            odd = torch.arange(1, n, 2)
            franka.set_dofs_position(start[odd], envs_idx=odd)
        franka.control_dofs_position(target)
        scene.step()
        c = solver.get_contacts()
        cube_floor = (c["geom_a"] == 0) & (c["geom_b"] == cube_geom)  # the floor is geom 0
        arm += (c["valid_mask"] & ~cube_floor & (c["dist"] < 0)).sum(1)
    return torch.cat([solver.get_qpos(), solver.get_qvel()], 1), arm


def test_an_env_steps_the_same_alone_as_in_a_batch():
    """Envs share nothing: each env of a batch of three, whose arms work at the cube, ends bit for
    bit where it ends when stepped alone (on the CPU the solver's scratch memory is shared by the
    envs, which run one after another, so this also checks that a solve reads nothing the env
    before it left there)."""
    targets = _walk_targets(2, 120, 3)
    batch, arm = _arm_and_cube_run(targets)
    assert (arm[1:] > 20).all()  # the hands of envs 1 and 2 pressed on the cube or the floor
    for k in range(3):
        alone, _ = _arm_and_cube_run(targets[:, k : k + 1])
        assert torch.equal(batch[k : k + 1], alone)


def test_the_number_of_host_threads_changes_no_bit():
    """On the CPU the step's envs are shared among host threads (``SimOptions.cpu_threads``), each
    with solver scratch of its own: 1, 2 and 3 threads (uneven shares of 330 envs, 6 launch threads
    of 64 and a partial one) end bit for bit the same, hands on the cube and envs reset mid-run."""
    targets = _walk_targets(3, 60, 330)
    one, arm = _arm_and_cube_run(targets, cpu_threads=1, reset_odd=True)
    assert (arm > 0).float().mean() > 0.5  # most hands pressed on the cube or the floor
    for threads in (2, 3):
        assert torch.equal(_arm_and_cube_run(targets, cpu_threads=threads, reset_odd=True)[0], one), threads


def test_prefetching_the_next_envs_rows_changes_no_bit(monkeypatch):
    """The CPU step prefetches the next env's rows in batches too large for the caches
    (``sim_core/prefetch.py``); forced on for a small batch, on 1 and 2 host threads, it ends bit
    for bit where the step without it does, hands on the cube and envs reset mid-run."""
    targets = _walk_targets(4, 50, 140)
    plain, arm = _arm_and_cube_run(targets, cpu_threads=1, reset_odd=True)
    assert (arm > 0).float().mean() > 0.5  # most hands pressed on the cube or the floor
    monkeypatch.setattr(prefetch, "MIN_BYTES", 0)
    for threads in (1, 2):
        assert torch.equal(_arm_and_cube_run(targets, cpu_threads=threads, reset_odd=True)[0], plain), threads


def fast_cube_on_the_floor(split_depth) -> float:
    """A cube thrown at the floor at 4 m/s (4 cm a step, four contact margins) from just beyond the
    margin's reach of a step; returns the deepest its bottom sinks below the floor, m."""
    scene = _scene(rigid_options=sc.RigidOptions(split_depth=split_depth))
    scene.add_entity(sc.morphs.Plane())
    cube = scene.add_entity(sc.morphs.Box(size=(CUBE, CUBE, CUBE), pos=(0.0, 0.0, CUBE / 2 + 0.052)))
    scene.build(n_envs=2)
    solver = scene.sim.rigid_solver
    qvel = solver.get_qvel().clone()
    qvel[:, 2] = -4.0
    solver.set_qvel(qvel)
    lowest = 1.0
    for _ in range(20):
        scene.step()
        lowest = min(lowest, float(cube.get_pos()[:, 2].min()))
    return CUBE / 2 - lowest


def test_a_step_that_ends_too_deep_is_redone_in_substeps():
    assert fast_cube_on_the_floor(None) > 0.01  # one step: from beyond the margin to 3 cm deep
    assert fast_cube_on_the_floor(0.004) < 0.003  # redone in four: speculative contacts catch it
    for bad in (0.0, -1.0):
        try:
            sc.RigidOptions(split_depth=bad)
        except sc.SimCoreError as err:
            assert "split_depth" in str(err)
        else:
            raise AssertionError(f"split_depth={bad} did not raise")


def test_the_next_step_starts_from_the_contacts_the_last_one_ended_with():
    """Each step ends with the contacts of its final state; the next step starts from them, exactly
    as if detected anew, unless a setter changed the state (or a cube's size) in between."""
    runs = []
    for redetect in (False, True):
        scene, cube = _cube_on_floor(3, z=0.2)
        solver = scene.sim.rigid_solver
        cube.set_quat(torch.tensor([0.9, 0.3, 0.2, 0.1]))  # lands on a corner, tumbles
        for _ in range(60):
            if redetect:
                solver.state_changed()
            scene.step()
        runs.append(solver.get_qpos().clone())
        pos, quat = cube.get_links_pos().clone(), cube.get_links_quat().clone()  # the poses the step left
        solver.state_changed()  # ... equal those the fk kernel recomputes
        assert torch.equal(cube.get_links_pos(), pos) and torch.equal(cube.get_links_quat(), quat)
    assert torch.equal(runs[0], runs[1])
    scene, cube = _cube_on_floor(2)
    scene.step()
    cube.set_pos(torch.tensor([0.0, 0.0, 1.0]), envs_idx=[0])  # teleported up: no floor contact left
    cube.set_size(torch.tensor([1.4 * CUBE] * 3), envs_idx=[1])  # grown into the floor
    scene.step()
    c = scene.sim.rigid_solver.get_contacts()
    assert c["valid_mask"].sum(1).tolist()[0] == 0
    assert abs(float(cube.get_vel()[0, 2]) + 9.81 * 0.01) < 1e-4  # free fall
    assert float(cube.get_vel()[1, 2]) > 0.05  # pushed out of the floor


def test_warm_start_follows_the_contact_point_when_slots_reorder():
    """Two cubes rest on the floor; the first is lifted away, so the second's four contacts move to
    the slots the first's held. Its rows still start from their own last impulses: the solve
    settles in at most one round (none when the warm start already holds; a cold start takes
    more), with the same forces."""
    scene = _scene()
    scene.add_entity(sc.morphs.Plane())
    kw = {"material": sc.materials.Rigid(rho=RHO)}
    first = scene.add_entity(sc.morphs.Box(size=(CUBE,) * 3, pos=(0.0, 0.0, CUBE / 2)), **kw)
    second = scene.add_entity(sc.morphs.Box(size=(CUBE,) * 3, pos=(0.2, 0.0, CUBE / 2)), **kw)
    scene.build(n_envs=1)
    solver = scene.sim.rigid_solver
    for _ in range(100):
        scene.step()
    c = solver.get_contacts()
    assert c["valid_mask"].sum().item() == 8 and int(solver.get_solver_rounds()) <= 1
    before = c["force"][0, 4:8].clone()  # the second cube's rows
    first.set_pos(torch.tensor([[0.0, 0.0, 0.5]]))
    scene.step()
    c = solver.get_contacts()
    assert c["valid_mask"].sum().item() == 4 and (c["geom_b"][0, :4] == c["geom_b"][0, 0]).all()
    assert int(solver.get_solver_rounds()) <= 1
    assert torch.allclose(c["force"][0, :4], before, atol=1e-4)
    assert float(second.get_pos()[0, 2]) > CUBE / 2 - 1e-3


def test_a_small_contact_budget_overflows_visibly_and_per_env():
    scene, cube = _cube_on_floor(3, z=0.3)
    solver = scene.sim.rigid_solver
    assert solver.max_contacts == 4
    cube.set_pos(torch.tensor([[0.0, 0.0, 0.3], [0.0, 0.0, CUBE / 2], [0.0, 0.0, 0.3]]))
    scene.step()
    assert solver.get_contact_overflow().tolist() == [0, 0, 0]
    tight = _scene(rigid_options=sc.RigidOptions(max_contacts=2))
    tight.add_entity(sc.morphs.Plane())
    box = tight.add_entity(sc.morphs.Box(size=(CUBE, CUBE, CUBE), pos=(0.0, 0.0, 0.3)))
    tight.build(n_envs=3)
    box.set_pos(torch.tensor([[0.0, 0.0, CUBE / 2]]), envs_idx=[1])
    tight.step()
    s = tight.sim.rigid_solver
    assert s.get_contact_overflow().tolist() == [0, 2, 0]
    assert s.get_error_envs_mask().tolist() == [False, True, False]
    assert s.get_contacts()["valid_mask"].sum(1).tolist() == [0, 2, 0]
    s.reset(envs_idx=[1])
    assert s.get_contact_overflow().tolist() == [0, 0, 0]


def test_contact_jacobians_match_mujoco_c():
    r = contact_jacobians_against_mujoco()
    # seed 8's walk presses the pads and the hand on the cube and the floor: ~640 of its ~1400 rows
    assert r["rows_compared"] > 1000 and r["rows_touching_the_arm"] > 300, r
    assert r["max_abs_error"] < 1e-5, r  # m/s per unit dof velocity: float32 poses against float64


def test_mujoco_c_agrees_on_the_drop():
    r = against_mujoco()
    assert r["free_fall_max_diff_m"] < 1e-4
    assert abs(r["rest_height"][0] - r["rest_height"][1]) < 1e-3
    assert r["trajectory_max_diff_after_0.5s_m"] < 1e-3
    for ratio in r["normal_force_over_weight"]:
        assert abs(ratio - 1.0) < 0.02


def test_friction_is_set_per_env_and_checked():
    scene, cube = _cube_on_floor(3)
    cube.set_friction(torch.tensor([0.1, 0.5, 0.9]))
    assert torch.allclose(cube.get_friction()[:, 0].cpu(), torch.tensor([0.1, 0.5, 0.9]))
    cube.set_friction(0.3, envs_idx=[2])
    assert torch.allclose(cube.get_friction(envs_idx=[2]).cpu(), torch.tensor([[0.3]]))
    before = cube.get_friction()
    for bad in (-0.1, torch.ones(2)):
        try:
            cube.set_friction(bad)
        except sc.SimCoreError as err:
            assert "friction" in str(err)
        else:
            raise AssertionError(f"set_friction({bad!r}) did not raise")
    assert torch.equal(cube.get_friction(), before)


def test_get_contacts_layout():
    scene, cube = _cube_on_floor(2)
    scene.step()
    c = scene.sim.rigid_solver.get_contacts()
    n = scene.sim.rigid_solver.max_contacts
    assert (
        c["position"].shape == (2, n, 3) and c["force"].shape == (2, n, 3) and c["valid_mask"].shape == (2, n)
    )
    valid = c["valid_mask"]
    assert (c["geom_a"][valid] == 0).all() and (c["link_b"][valid] == cube.links[0].idx).all()
    assert (c["geom_a"][~valid] == -1).all()
    single, _ = _cube_on_floor(0)
    single.step()
    assert single.sim.rigid_solver.get_contacts()["position"].shape == (n, 3)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_non_finite_env_stays_flagged_and_leaves_the_others_bit_for_bit(value):
    """A state poisoned with NaN or inf (written past the API's checks, as a blow-up would leave
    it) in an arm dof of env 1 and in the cube of env 3 stays non-finite and flagged through
    steps with contacts, whatever the step kernel's float optimizations do with it, and the other
    envs step exactly as the same envs of a twin scene without it (they share no buffers: the
    solver's scratch on the CPU is rewritten by each env before it reads it)."""
    g = torch.Generator().manual_seed(3)
    twins = [_arm_and_cube_scene(6) for _ in range(2)]
    m = twins[0][0].mjmodel
    lo, hi = (torch.as_tensor(m.jnt_range[:9, k], dtype=torch.float32) for k in (0, 1))
    targets = [(lo + (hi - lo) * torch.rand(6, 9, generator=g)).to(sc.device) for _ in range(25)]
    flags = []
    for k, t in enumerate(targets):  # the hands swing into the cubes and the floor
        if k == 20:
            twins[1][0].sim.rigid_solver.state.qvel[1, 3] = value
            twins[1][0].sim.rigid_solver.state.qvel[3, 12] = value  # the cube's angular velocity
        for scene, franka in twins:
            franka.control_dofs_position(t)
            scene.step()
        flags.append([scene.sim.rigid_solver.get_error_envs_mask().tolist() for scene, _ in twins])
    assert all(f == [[False] * 6] * 2 for f in flags[:20])
    assert all(f == [[False] * 6, [False, True, False, True, False, False]] for f in flags[20:]), flags
    (a, _), (b, _) = twins
    others = [0, 2, 4, 5]
    for get in ("get_qpos", "get_qvel"):
        assert torch.equal(
            getattr(a.sim.rigid_solver, get)()[others], getattr(b.sim.rigid_solver, get)()[others]
        )


if __name__ == "__main__":
    sc.init(backend=sc.gpu if torch.cuda.is_available() else sc.cpu)
    for name, fn in [
        ("drop and rest", drop_and_rest),
        ("slope, friction 0.5", lambda: tilted_gravity(0.5)),
        ("slope, friction 0.2", lambda: tilted_gravity(0.2)),
        ("stack of three", stack_of_three),
        ("Franka grasp, lift, hold", franka_grasp),
        ("random arm stress", random_arm_stress),
        ("random arm stress, full-range targets", lambda: random_arm_stress(full_range=True)),
        ("fast cube, one pass per step: sank (m)", lambda: {"depth": fast_cube_on_the_floor(None)}),
        ("fast cube, adaptive split: sank (m)", lambda: {"depth": fast_cube_on_the_floor(0.004)}),
        ("against MuJoCo C", against_mujoco),
        ("contact Jacobians against MuJoCo C", contact_jacobians_against_mujoco),
    ]:
        r = fn()
        r.pop("state", None)
        print(f"{name}: " + ", ".join(f"{k}={v}" for k, v in r.items()), flush=True)
