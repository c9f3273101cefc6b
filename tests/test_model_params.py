"""Per-env model parameters for domain randomization (mass, box size, joint damping), checked
against MuJoCo C on models compiled with the same values."""

import copy
import os

import mujoco
import numpy as np
import pytest
import torch
from conftest import ASSETS, make_scene, mj_reference, random_qpos, t32

import sim_core as sc
from sim_core.errors import InvalidValueError, ShapeError

N = 4


def test_mass_and_damping_per_env_match_mujoco_models_with_those_values():
    scene, (ent,) = make_scene(sc.morphs.MJCF(file=os.path.join(ASSETS, "free_and_pendulum.xml")), n_envs=N)
    m0, _ = mj_reference(scene)
    m0.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_ACTUATION
    rng = np.random.default_rng(3)
    mass = rng.uniform(0.2, 2.0, N)
    damping = rng.uniform(0.0, 3.0, (N, m0.nv))
    ent.set_mass(t32(mass))
    ent.set_dofs_damping(t32(damping))
    np.testing.assert_allclose(ent.get_mass().cpu().numpy(), mass, rtol=1e-6)
    np.testing.assert_allclose(ent.get_dofs_damping().cpu().numpy(), damping, rtol=1e-6)
    q, v = random_qpos(m0, rng, N), rng.normal(0, 1.0, (N, m0.nv))
    tau = rng.uniform(-5, 5, (N, m0.nv))
    solver = scene.sim.rigid_solver
    solver.set_qpos(t32(q))
    solver.set_qvel(t32(v))
    ent.control_dofs_force(t32(tau))
    out = {k: x.cpu().numpy() for k, x in solver.forward().items()}
    box = m0.body("e0/box").id
    for w in range(N):
        mw = copy.copy(m0)
        mw.body_mass[box] = mass[w]
        mw.body_inertia[box] = m0.body_inertia[box] * mass[w] / m0.body_mass[box]
        mw.dof_damping[:] = damping[w]
        d = mujoco.MjData(mw)
        d.qpos[:], d.qvel[:], d.qfrc_applied[:] = q[w], v[w], tau[w]
        mujoco.mj_forward(mw, d)
        full = np.zeros((mw.nv, mw.nv))
        mujoco.mj_fullM(mw, d, full)
        np.testing.assert_allclose(out["qM"][w], full, atol=5e-5 * np.abs(full).max())
        np.testing.assert_allclose(out["qfrc_bias"][w], d.qfrc_bias, atol=5e-5 * np.abs(d.qfrc_bias).max())
        np.testing.assert_allclose(out["qacc"][w], d.qacc_smooth, atol=5e-5 * np.abs(d.qacc_smooth).max())


def _cube_scene(n_envs=N):
    scene, (_, cube) = make_scene(
        sc.morphs.Plane(),
        sc.morphs.Box(size=(0.05, 0.05, 0.05), pos=(0.0, 0.0, 0.1)),
        n_envs=n_envs,
    )
    return scene, cube


def test_box_size_per_env_sets_shape_and_inertia_and_keeps_mass():
    scene, cube = _cube_scene()
    rng = np.random.default_rng(0)
    size = rng.uniform(0.03, 0.07, (N, 3))
    mass0 = cube.get_mass()
    cube.set_size(t32(size))
    np.testing.assert_allclose(cube.get_size().cpu().numpy(), size, rtol=1e-6)
    torch.testing.assert_close(cube.get_mass(), mass0)
    inertia = scene.sim.rigid_solver.forward()["qM"][:, 3:, 3:].cpu().numpy()  # body frame at identity
    for w in range(N):
        spec = mujoco.MjSpec()
        body = spec.worldbody.add_body()
        body.add_freejoint()
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=size[w] / 2, mass=float(mass0[w]))
        ref = spec.compile()
        np.testing.assert_allclose(np.diag(inertia[w]), ref.body_inertia[1], rtol=2e-5)
    for _ in range(150):  # dropped from 10 cm, each env's box rests on its own half height
        scene.step()
    np.testing.assert_allclose(cube.get_pos()[:, 2].cpu().numpy(), size[:, 2] / 2, atol=1e-3)


def test_mass_then_size_compose_and_envs_idx_selects():
    scene, cube = _cube_scene()
    m0 = float(cube.get_mass()[0])
    cube.set_mass(2.0 * m0, envs_idx=[1, 3])
    cube.set_size((0.1, 0.1, 0.1), envs_idx=torch.tensor([False, False, False, True]))
    np.testing.assert_allclose(cube.get_mass().cpu().numpy(), [m0, 2 * m0, m0, 2 * m0], rtol=1e-6)
    rot = scene.sim.rigid_solver.forward()["qM"][:, 3, 3].cpu().numpy()
    i0 = m0 * 2 * 0.05**2 / 12
    np.testing.assert_allclose(rot, [i0, 2 * i0, i0, 2 * 4 * i0], rtol=1e-5)


def test_bad_parameters_raise_and_change_nothing():
    scene, cube = _cube_scene()
    plane = scene.entities[0]
    before = scene.sim.rigid_solver.params.body_inertial.clone()
    with pytest.raises(InvalidValueError, match="mass"):
        cube.set_mass(torch.tensor([1.0, -1.0, 1.0, 1.0]))
    with pytest.raises(ShapeError, match="mass"):
        cube.set_mass(torch.ones(3))
    with pytest.raises(InvalidValueError, match="size"):
        cube.set_size((0.05, 0.0, 0.05))
    with pytest.raises(ShapeError, match="size"):
        cube.set_size(torch.ones(N, 2))
    with pytest.raises(InvalidValueError, match="free body"):
        plane.set_mass(1.0)
    with pytest.raises(InvalidValueError, match="damping"):
        cube.set_dofs_damping(-1.0 * torch.ones(6))
    torch.testing.assert_close(scene.sim.rigid_solver.params.body_inertial, before)
    assert float(cube.get_dofs_damping().abs().max()) == 0.0


def test_gravity_compensation_matches_mujoco_and_holds_the_arm_still():
    from conftest import make_scene

    scene, (_, franka) = make_scene(
        sc.morphs.Plane(), sc.morphs.MJCF(file="franka_panda", gravcomp=1.0), n_envs=N
    )
    m, d = mj_reference(scene)
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_ACTUATION
    assert np.all(m.body_gravcomp[1:] == 1.0)
    rng = np.random.default_rng(2)
    q, v = random_qpos(m, rng, N), rng.normal(0, 0.5, (N, m.nv))
    solver = scene.sim.rigid_solver
    solver.set_qpos(t32(q))
    solver.set_qvel(t32(v))
    franka.control_dofs_force(torch.zeros(m.nv))
    out = {k: x.cpu().numpy() for k, x in solver.forward().items()}
    for w in range(N):
        d.qpos[:], d.qvel[:] = q[w], v[w]
        mujoco.mj_forward(m, d)
        bias = d.qfrc_bias - d.qfrc_gravcomp  # MuJoCo books gravcomp as a passive force
        np.testing.assert_allclose(out["qfrc_bias"][w], bias, atol=5e-5 * np.abs(d.qfrc_bias).max())
        np.testing.assert_allclose(out["qacc"][w], d.qacc_smooth, atol=5e-5 * np.abs(d.qacc_smooth).max())
    # position control holding the current pose: without gravcomp the PD gains sag under the weight
    held = t32(q)
    solver.set_qvel(torch.zeros(N, m.nv))
    franka.control_dofs_position(held[:, :9])
    for _ in range(100):
        scene.step()
    assert float((franka.get_dofs_position() - held[:, :9]).abs().max()) < 1e-4


def test_gravcomp_must_be_shared_by_a_tree():
    path = os.path.join(ASSETS, "free_and_pendulum.xml")
    spec = mujoco.MjSpec.from_file(path)
    spec.body("link_b").gravcomp = 1.0
    bad = os.path.join(os.path.dirname(path), "_gravcomp_mixed.xml")
    with open(bad, "w") as f:
        f.write(spec.to_xml())
    try:
        with pytest.raises(sc.errors.UnsupportedModelError, match="gravcomp"):
            make_scene(sc.morphs.MJCF(file=bad))
    finally:
        os.remove(bad)
    with pytest.raises(InvalidValueError, match="gravcomp"):
        sc.morphs.MJCF(file="franka_panda", gravcomp=2.0)
