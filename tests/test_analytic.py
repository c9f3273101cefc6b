"""Analytic checks (pendulum period), joint limits under any command, substeps, gravity option."""

import math
import os

import numpy as np
import torch
from conftest import ASSETS, franka_scene, make_scene, t32

import sim_core as sc


def test_pendulum_small_oscillation_period():
    """Point mass (1 kg, I_cm = 1e-6 kg m^2) on a 0.5 m massless rod: T = 2 pi sqrt(I / (m g l))."""
    dt = 0.001
    scene, (pend,) = make_scene(sc.morphs.URDF(file=os.path.join(ASSETS, "pendulum.urdf")), dt=dt)
    pend.set_dofs_position(t32([0.02]))
    angles = []
    for _ in range(4000):
        scene.step()
        angles.append(float(pend.get_dofs_position()[0]))
    a = np.array(angles)
    up = np.nonzero((a[:-1] < 0) & (a[1:] >= 0))[0]  # upward zero crossings
    t_cross = (up + a[up] / (a[up] - a[up + 1])) * dt
    period = np.diff(t_cross).mean()
    inertia = 1.0 * 0.5**2 + 1e-6
    expected = 2 * math.pi * math.sqrt(inertia / (1.0 * 9.81 * 0.5))
    assert abs(period - expected) / expected < 2e-3, (period, expected)
    assert abs(np.abs(a).max() - 0.02) < 1e-3  # no damping: the amplitude is kept


def test_joint_limits_hold_under_commands_far_outside_the_range():
    scene, franka = franka_scene(16)
    m = scene.mjmodel
    lo = torch.as_tensor(m.jnt_range[:, 0], dtype=torch.float32, device=sc.device)
    hi = torch.as_tensor(m.jnt_range[:, 1], dtype=torch.float32, device=sc.device)
    g = torch.Generator().manual_seed(0)
    worst = 0.0
    for k in range(300):
        far = torch.where(torch.rand(16, 9, generator=g) < 0.5, -10.0, 10.0).to(sc.device)
        if k % 3 == 0:
            franka.control_dofs_velocity(far * 5)  # kv * 50 rad/s: saturates the force range
        else:
            franka.control_dofs_position(far)
        scene.step()
        q = franka.get_dofs_position()
        assert bool(torch.isfinite(q).all())
        worst = max(worst, float((lo - q).clamp(min=0).max()), float((q - hi).clamp(min=0).max()))
    assert worst <= 1e-6, worst


def test_joint_outside_its_range_is_pulled_back():
    scene, franka = franka_scene(0)
    franka.set_dofs_position(t32([0.3]), dofs_idx_local=[3])  # joint4's range is [-3.07, -0.07]
    franka.control_dofs_position(t32([0.3]), dofs_idx_local=[3])
    for _ in range(60):
        scene.step()
    assert float(franka.get_dofs_position()[3]) <= -0.0698 + 1e-6


def test_substeps_follow_the_finer_step_within_1e_6():
    """dt = 0.01 with 4 substeps matches dt = 0.0025 without substeps to 1e-6 rad, not bit for bit:
    the substep loop is other compiled code, whose float operations are fused and ordered
    differently (differences of a few ulp)."""
    a, fa = franka_scene(2, dt=0.01, substeps=4)
    b, fb = franka_scene(2, dt=0.0025, substeps=1)
    tgt = t32([0.3, -0.5, 0.2, -2.0, 0.1, 1.8, 0.5, 0.03, 0.01])
    fa.control_dofs_position(tgt)
    fb.control_dofs_position(tgt)
    for _ in range(25):
        a.step()
        for _ in range(4):
            b.step()
    torch.testing.assert_close(fa.get_dofs_position(), fb.get_dofs_position(), rtol=0, atol=1e-6)


def test_gravity_option():
    scene, franka = franka_scene(0, gravity=(0.0, 0.0, 0.0))
    franka.control_dofs_force(t32(np.zeros(9)))
    for _ in range(20):
        scene.step()
    assert float(franka.get_dofs_velocity().abs().max()) == 0.0
