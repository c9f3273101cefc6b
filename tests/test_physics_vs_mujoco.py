"""Stage-by-stage and trajectory agreement with MuJoCo C on the same compiled model (float32 here,
float64 there). Tolerances: ~5e-5 relative per stage; trajectories as stated per test."""

import copy
import os

import mujoco
import numpy as np
import pytest
from conftest import ASSETS, franka_scene, make_scene, mj_reference, random_qpos, t32

import sim_core as sc

N = 8


def build(name, n_envs=N, **kw):
    if name == "franka":
        return franka_scene(n_envs, **kw)
    scene, (ent,) = make_scene(
        sc.morphs.MJCF(file=os.path.join(ASSETS, "free_and_pendulum.xml")), n_envs=n_envs, **kw
    )
    return scene, ent


def quat_err(a, b):
    """Angle-free distance between unit quaternions (sign-insensitive): 1 - |<a, b>|."""
    return np.abs(1.0 - np.abs((a * b).sum(-1)))


@pytest.mark.parametrize("name", ["franka", "free_pendulum"])
def test_stages_match_mujoco(name):
    scene, ent = build(name)
    m, d = mj_reference(scene)
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_ACTUATION
    rng = np.random.default_rng(1)
    q = random_qpos(m, rng, N)
    v = rng.normal(0, 1.0, (N, m.nv))
    tau = rng.uniform(-5, 5, (N, m.nv))  # inside every force range of both models
    solver = scene.sim.rigid_solver
    solver.set_qpos(t32(q))
    solver.set_qvel(t32(v))
    ent.control_dofs_force(t32(tau))
    out = {k: x.cpu().numpy() for k, x in solver.forward().items()}
    xpos = solver.state.xpos.cpu().numpy()
    xquat = solver.state.xquat.cpu().numpy()
    for w in range(N):
        d.qpos[:], d.qvel[:], d.qfrc_applied[:] = q[w], v[w], tau[w]
        mujoco.mj_forward(m, d)
        full_m = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, full_m)
        np.testing.assert_allclose(xpos[w], d.xpos, atol=5e-6, err_msg="xpos")
        assert quat_err(xquat[w], d.xquat).max() < 1e-6, "xquat"
        np.testing.assert_allclose(
            out["qM"][w], full_m, atol=5e-5 * np.abs(full_m).max(), err_msg="mass matrix"
        )
        np.testing.assert_allclose(
            out["qfrc_bias"][w], d.qfrc_bias, atol=5e-5 * np.abs(d.qfrc_bias).max(), err_msg="bias"
        )
        np.testing.assert_allclose(
            out["qacc"][w], d.qacc_smooth, atol=5e-5 * np.abs(d.qacc_smooth).max(), err_msg="qacc"
        )


@pytest.mark.parametrize("name", ["franka", "free_pendulum"])
def test_jacobian_matches_mj_jac(name):
    """Hinge, slide and free-joint columns of every link's Jacobian at an offset point."""
    scene, ent = build(name)
    m, d = mj_reference(scene)
    q = random_qpos(m, np.random.default_rng(2), N)
    scene.sim.rigid_solver.set_qpos(t32(q))
    point = np.array([0.01, -0.02, 0.1034])
    for link in ent.links:
        jac = ent.get_jacobian(link, t32(point)).cpu().numpy()
        assert jac.shape == (N, 6, ent.n_dofs)
        for w in range(N):
            d.qpos[:] = q[w]
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            b = link.idx
            jp, jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
            mujoco.mj_jac(m, d, jp, jr, d.xpos[b] + d.xmat[b].reshape(3, 3) @ point, b)
            np.testing.assert_allclose(jac[w], np.vstack([jp, jr]), atol=2e-6, err_msg=link.name)


@pytest.mark.parametrize("name", ["franka", "free_pendulum"])
def test_mass_matrix_symmetric_positive_definite(name):
    scene, _ = build(name)
    m, _ = mj_reference(scene)
    solver = scene.sim.rigid_solver
    solver.set_qpos(t32(random_qpos(m, np.random.default_rng(2), N)))
    mass = solver.forward()["qM"].cpu().numpy().astype(np.float64)
    np.testing.assert_array_equal(mass, np.swapaxes(mass, 1, 2))
    assert np.linalg.eigvalsh(mass).min() > 0


def _franka_targets(m, rng, q0):
    """Random position targets near q0, well inside the joint ranges (limits not reached)."""
    tgt = q0 + rng.uniform(-0.3, 0.3, q0.shape)
    tgt[..., 7:] = rng.uniform(0.005, 0.035, q0[..., 7:].shape)
    return tgt


Q_HOME = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8, 0.02, 0.02])


def test_one_step_and_trajectory_position_control():
    """200 steps of PD position control with fresh random targets each step, dt = 0.01, in every
    env of a batch; agreement reached: ~1e-6 rad in q (asserted 2e-5), 2e-4 rad/s in qvel."""
    scene, franka = build("franka")
    m, d = mj_reference(scene)
    rng = np.random.default_rng(3)
    q0 = np.tile(Q_HOME, (N, 1)) + rng.uniform(-0.2, 0.2, (N, 9)) * np.r_[np.ones(7), 0, 0]
    franka.set_dofs_position(t32(q0))
    datas = [mujoco.MjData(m) for _ in range(N)]
    for w, dw in enumerate(datas):
        dw.qpos[:] = q0[w]
    worst_q = worst_v = 0.0
    for k in range(200):
        tgt = _franka_targets(m, rng, q0)
        franka.control_dofs_position(t32(tgt))
        scene.step()
        for w, dw in enumerate(datas):
            dw.ctrl[:] = tgt[w]
            mujoco.mj_step(m, dw)
        q = franka.get_dofs_position().cpu().numpy()
        v = franka.get_dofs_velocity().cpu().numpy()
        ref_q = np.stack([dw.qpos for dw in datas])
        ref_v = np.stack([dw.qvel for dw in datas])
        if k == 0:
            np.testing.assert_allclose(q, ref_q, atol=1e-6, err_msg="one step: qpos")
            np.testing.assert_allclose(v, ref_v, atol=5e-5 * np.abs(ref_v).max(), err_msg="one step: qvel")
        worst_q = max(worst_q, np.abs(q - ref_q).max())
        worst_v = max(worst_v, np.abs(v - ref_v).max())
    assert worst_q < 2e-5, worst_q
    assert worst_v < 2e-3, worst_v
    # link poses after the step belong to the new state
    xpos = franka.get_links_pos().cpu().numpy()
    mujoco.mj_kinematics(m, datas[0])
    np.testing.assert_allclose(xpos[0], datas[0].xpos[1:], atol=1e-5)


def test_trajectory_free_body_and_pendulum():
    """Free body tumbling in gravity plus a damped hinge-slide-hinge chain driven by a motor and a
    velocity servo, 100 steps of dt = 0.01 with substeps=2, in every env of a batch.

    The chain is compared with MuJoCo's implicitfast. The free body is compared with MuJoCo's
    semi-implicit Euler: MuJoCo's implicitfast also treats a free body's gyroscopic torque
    implicitly (checked: it differs from Euler there, by ~2e-6 rad/s per step at 1.5 rad/s), while
    sim_core integrates it explicitly. Both agree to ~2e-6 over the 100 steps; asserted 2e-5.
    """
    scene, ent = build("free_pendulum", dt=0.01, substeps=2)
    m_fast, _ = mj_reference(scene)
    m_euler = copy.copy(m_fast)
    m_euler.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    rng = np.random.default_rng(4)
    q = random_qpos(m_fast, rng, N)
    v = rng.normal(0, 1.0, (N, m_fast.nv))
    solver = scene.sim.rigid_solver
    solver.set_qpos(t32(q))
    solver.set_qvel(t32(v))
    refs = {}
    for key, mm in (("fast", m_fast), ("euler", m_euler)):
        refs[key] = [mujoco.MjData(mm) for _ in range(N)]
        for w, dw in enumerate(refs[key]):
            dw.qpos[:], dw.qvel[:] = q[w], v[w]
    hinge_dof = ent.get_joint("hinge_a").dofs_idx_local
    slide_dof = ent.get_joint("slide_b").dofs_idx_local
    worst_free = worst_chain = 0.0
    for _ in range(100):
        ctrl = np.stack([rng.uniform(-4, 4, N), rng.uniform(-0.5, 0.5, N)], axis=1)
        ent.control_dofs_force(t32(ctrl[:, :1]), hinge_dof)
        ent.control_dofs_velocity(t32(ctrl[:, 1:]), slide_dof)
        scene.step()
        for key, mm in (("fast", m_fast), ("euler", m_euler)):
            for w, dw in enumerate(refs[key]):
                dw.ctrl[:] = ctrl[w]
                mujoco.mj_step(mm, dw, nstep=2)
        ours = solver.get_qpos().cpu().numpy()
        free = np.stack([dw.qpos[:7] for dw in refs["euler"]])
        chain = np.stack([dw.qpos[7:] for dw in refs["fast"]])
        worst_free = max(worst_free, np.abs(ours[:, :7] - free).max())
        worst_chain = max(worst_chain, np.abs(ours[:, 7:] - chain).max())
    assert worst_free < 2e-5, worst_free
    assert worst_chain < 2e-5, worst_chain
