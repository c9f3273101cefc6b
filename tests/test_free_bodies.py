"""Primitives, materials and the free-body base API (their contacts are checked in test_contacts.py)."""

import math

import mujoco
import numpy as np
import pytest
import torch
from conftest import make_scene, t32

import sim_core as sc


def test_primitive_mass_follows_density_and_size():
    rho = 800.0
    mat = sc.materials.Rigid(rho=rho, friction=0.7)
    scene = sc.Scene(profiling_options=sc.ProfilingOptions(show_FPS=False))
    scene.add_entity(sc.morphs.Plane(), material=sc.materials.Rigid(friction=0.9))
    box = scene.add_entity(sc.morphs.Box(size=(0.05, 0.04, 0.03), pos=(0, 0, 0.5)), material=mat)
    ball = scene.add_entity(sc.morphs.Sphere(radius=0.02), material=mat)
    cap = scene.add_entity(sc.morphs.Capsule(radius=0.01, length=0.04), material=mat)
    scene.build()
    m = scene.mjmodel
    volumes = [
        0.05 * 0.04 * 0.03,
        4 / 3 * math.pi * 0.02**3,
        math.pi * 0.01**2 * 0.04 + 4 / 3 * math.pi * 0.01**3,
    ]
    for entity, volume in zip((box, ball, cap), volumes, strict=True):
        assert m.body_mass[entity.links[0].idx] == pytest.approx(rho * volume, rel=1e-6)
        geom = np.flatnonzero(m.geom_bodyid == entity.links[0].idx)[0]
        assert m.geom_friction[geom, 0] == pytest.approx(0.7)
    assert m.geom_friction[0, 0] == pytest.approx(0.9)  # the plane
    assert box.n_dofs == 6 and box.get_pos().tolist() == pytest.approx([0, 0, 0.5])


def test_bad_primitives_and_materials_are_errors():
    with pytest.raises(sc.InvalidValueError, match="size"):
        sc.morphs.Box(size=(0.1, 0.0, 0.1))
    with pytest.raises(sc.InvalidValueError, match="radius"):
        sc.morphs.Sphere(radius=-1)
    with pytest.raises(sc.InvalidValueError, match="rho"):
        sc.materials.Rigid(rho=0)
    with pytest.raises(sc.InvalidValueError, match="friction"):
        sc.materials.Rigid(friction=float("nan"))


def test_free_fall_matches_the_discrete_integrator_exactly():
    dt, g, n = 0.01, 9.81, 50
    scene, (box,) = make_scene(sc.morphs.Box(size=(0.05, 0.05, 0.05), pos=(0.1, 0.2, 2.0)), n_envs=3, dt=dt)
    for _ in range(n):
        scene.step()
    z = 2.0 - g * dt * dt * n * (n + 1) / 2  # semi-implicit Euler: v += g dt, then x += v dt
    assert torch.allclose(box.get_pos()[:, 2], torch.full((3,), z, device=sc.device), atol=1e-5)
    assert torch.allclose(box.get_vel()[:, 2], torch.full((3,), -g * dt * n, device=sc.device), atol=1e-5)
    assert torch.allclose(box.get_pos()[:, :2], t32([[0.1, 0.2]] * 3))


def test_set_pos_quat_with_envs_idx_and_world_angular_velocity():
    scene, (body,) = make_scene(sc.morphs.Capsule(radius=0.02, length=0.1), n_envs=4, gravity=(0, 0, 0))
    assert body.get_pos().shape == (4, 3) and body.get_quat().shape == (4, 4)
    body.set_pos(t32([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), envs_idx=[1, 3])
    assert body.get_pos()[[1, 3]].tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert body.get_pos()[0].tolist() == [0.0, 0.0, 0.0]
    half = math.sqrt(0.5)
    body.set_quat(t32([2.0, 0.0, 0.0, 2.0]))  # normalized: 90 degrees about z
    assert torch.allclose(body.get_quat(), t32([[half, 0, 0, half]] * 4))
    assert torch.allclose(body.links[0].get_pos()[3], t32([4.0, 5.0, 6.0]))  # link poses follow
    solver = scene.sim.rigid_solver
    qvel = torch.zeros(4, 6, device=sc.device)
    qvel[:, 3] = 1.0  # about the body's x axis, which points along world y after the turn
    solver.set_qvel(qvel)
    assert torch.allclose(body.get_ang(), t32([[0.0, 1.0, 0.0]] * 4), atol=1e-6)
    with pytest.raises(sc.InvalidValueError, match="non-zero norm"):
        body.set_quat(t32([0, 0, 0, 0]), envs_idx=[0])
    with pytest.raises(sc.ShapeError, match="pos"):
        body.set_pos(t32([1.0, 2.0]))


def test_fixed_bases_report_their_pose_and_refuse_to_move():
    scene, (_, franka, block) = make_scene(
        sc.morphs.Plane(),
        sc.morphs.MJCF(file="franka_panda", pos=(0.3, 0.0, 0.0)),
        sc.morphs.Box(size=(0.1, 0.1, 0.1), pos=(0.5, 0.0, 0.05), fixed=True),
        n_envs=2,
    )
    assert torch.allclose(franka.get_pos(), t32([[0.3, 0.0, 0.0]] * 2))
    assert block.n_dofs == 0 and block.get_vel().tolist() == [[0.0] * 3] * 2
    with pytest.raises(sc.InvalidValueError, match="fixed base"):
        block.set_pos(t32([0.0, 0.0, 1.0]))


def test_matches_mujoco_for_a_tumbling_free_capsule():
    scene, (cap,) = make_scene(sc.morphs.Capsule(radius=0.02, length=0.1, pos=(0, 0, 1)), n_envs=1)
    m = scene.mjmodel
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER  # sim_core's free-body gyroscopic term is explicit
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    d = mujoco.MjData(m)
    v = np.array([0.3, -0.2, 1.0, 2.0, -1.0, 3.0])
    d.qvel[:] = v
    scene.sim.rigid_solver.set_qvel(t32(v[None]))
    for _ in range(100):
        scene.step()
        mujoco.mj_step(m, d)
    np.testing.assert_allclose(cap.get_pos()[0].cpu().numpy(), d.qpos[:3], atol=2e-5)
    q = cap.get_quat()[0].cpu().numpy()
    assert abs(abs(q @ d.qpos[3:7]) - 1) < 1e-5
