"""Collision detection, as the step kernel runs it, against MuJoCo's mj_collision on the same model
and poses (contact margin 0, as MuJoCo's default)."""

from types import SimpleNamespace

import mujoco
import numpy as np
import pytest
import torch
from conftest import make_scene

import sim_core as sc
from sim_core.contact.pairs import CollisionPlan

N = 24
# pair types whose contact points are MuJoCo's exactly; capsule-box and box-box choose their points
# differently (compared by the deepest point instead, below)
_POINTWISE = {(0, 2), (0, 3), (0, 6), (2, 2), (2, 3), (2, 6), (3, 3)}


def _wp_device():
    return "cpu" if sc.device.type == "cpu" else f"cuda:{sc.device.index or 0}"


def _scene(max_contacts=64):
    return make_scene(
        sc.morphs.Plane(),
        sc.morphs.Sphere(radius=0.05),
        sc.morphs.Sphere(radius=0.03),
        sc.morphs.Capsule(radius=0.03, length=0.12),
        sc.morphs.Capsule(radius=0.02, length=0.08),
        sc.morphs.Box(size=(0.1, 0.06, 0.08)),
        n_envs=N,
        rigid_options=sc.RigidOptions(contact_margin=0.0, max_contacts=max_contacts),
    )


def _detect(solver, q):
    """Set every env's ``qpos`` and detect its contacts as the step kernel does (``poses()`` runs the
    detection pass of the envs whose state was set); returns the detected contacts, their count
    within the budget and the overflow beyond it."""
    solver.set_qpos(torch.as_tensor(q, dtype=torch.float32))
    solver.poses()
    c = solver.contacts
    budget = solver.max_contacts
    count = c.detected_count.clamp(max=budget)
    overflow = (c.detected_count - budget).clamp(min=0)
    return SimpleNamespace(
        pos=c.detected_pos, normal=c.detected_normal, dist=c.detected_dist, geom=c.detected_geom,
        count=count, overflow=overflow,
    )  # fmt: skip


def _random_poses(m, rng):
    """Free bodies crowded into a small region near the floor, random orientations."""
    q = np.tile(m.qpos0, (N, 1))
    for j in range(m.njnt):
        a = m.jnt_qposadr[j]
        q[:, a : a + 2] = rng.uniform(-0.08, 0.08, (N, 2))
        q[:, a + 2] = rng.uniform(0.0, 0.12, N)
        quat = rng.normal(size=(N, 4))
        q[:, a + 3 : a + 7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    return q


def _poses_in_cube(m, n, half, rng):
    """``n`` poses of the free bodies: centers uniform in the cube of half side ``half`` (m) about the
    origin, uniformly random orientations."""
    q = np.tile(m.qpos0, (n, 1))
    for j in range(m.njnt):
        a = m.jnt_qposadr[j]
        q[:, a : a + 3] = rng.uniform(-half, half, (n, 3))
        quat = rng.normal(size=(n, 4))
        q[:, a + 3 : a + 7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    return q


def test_contacts_match_mujoco_for_the_implemented_pairs():
    scene, _ = _scene()
    m = scene.mjmodel
    plan = CollisionPlan.build(m, _wp_device(), N)
    assert plan.unsupported == []
    rng = np.random.default_rng(0)
    q = _random_poses(m, rng)
    c = _detect(scene.sim.rigid_solver, q)
    assert int(c.overflow.sum()) == 0
    d = mujoco.MjData(m)
    pointwise = {tuple(map(int, p)) for p in plan.pairs if (m.geom_type[p[0]], m.geom_type[p[1]]) in _POINTWISE}
    compared, kinds = 0, set()
    for w in range(N):
        d.qpos[:] = q[w]
        mujoco.mj_fwdPosition(m, d)
        ref = [con for con in d.contact[: d.ncon] if (con.geom1, con.geom2) in pointwise and con.dist < 0]
        ours = {
            k: (c.pos[w, k].cpu().numpy(), c.normal[w, k].cpu().numpy(), float(c.dist[w, k]))
            for k in range(int(c.count[w]))
        }
        ours_pairs = [tuple(c.geom[w, k].tolist()) for k in range(int(c.count[w]))]
        ours = {k: v for k, v in ours.items() if ours_pairs[k] in pointwise}
        assert len(ref) == len(ours), f"env {w}: MuJoCo {len(ref)} contacts, sim_core {len(ours)}"
        for con in ref:
            cands = [k for k, pair in enumerate(ours_pairs) if pair == (con.geom1, con.geom2)]
            k = min(cands, key=lambda k: np.linalg.norm(ours[k][0] - con.pos))
            pos, normal, dist = ours[k]
            np.testing.assert_allclose(pos, con.pos, atol=2e-5)
            np.testing.assert_allclose(normal, con.frame[:3], atol=2e-4)
            assert dist == pytest.approx(con.dist, abs=2e-5)
            compared += 1
            kinds.add((int(m.geom_type[con.geom1]), int(m.geom_type[con.geom2])))
    assert compared > 3 * N
    assert kinds == _POINTWISE


def test_budget_overflow_is_counted_per_env():
    scene, _ = _scene(max_contacts=3)
    m = scene.mjmodel
    q = np.tile(m.qpos0, (N, 1))
    q[:, 0::7] = np.arange(m.njnt)  # bodies 1 m apart
    q[:, 2::7] = 1.0  # and above the floor: no contact
    q[1::2, 2::7] = -0.5  # odd envs: every body sunk into the floor
    c = _detect(scene.sim.rigid_solver, q)
    assert (c.count[1::2] == 3).all() and (c.overflow[1::2] > 0).all()
    assert (c.overflow[0::2] == 0).all()


@pytest.mark.parametrize("margin", [0.0, 0.01])
def test_capsule_box_and_box_box_match_mujoco_at_the_deepest_point(margin):
    """For every pair MuJoCo finds touching (shallow contacts, as in simulation), sim_core finds it
    too, with the same smallest distance and the same normal there; and no contacts MuJoCo lacks.
    With a contact margin, the same for the capsule-box pairs apart by less than it; box pairs apart
    are checked against their distance in the next test (MuJoCo's box-box reports fewer of them)."""
    n = 1000
    scene, _ = make_scene(
        sc.morphs.Capsule(radius=0.03, length=0.12),
        sc.morphs.Box(size=(0.1, 0.06, 0.08)),
        sc.morphs.Box(size=(0.05, 0.05, 0.05)),
        n_envs=n,
        rigid_options=sc.RigidOptions(contact_margin=margin, max_contacts=16),
    )
    m = scene.mjmodel
    m.geom_margin[:] = margin / 2  # MuJoCo adds the two geoms' margins
    kinds = {(3, 6), (6, 6)} if margin == 0.0 else {(3, 6)}  # (capsule, box), (box, box)
    plan = CollisionPlan.build(m, _wp_device(), n)
    q = _poses_in_cube(m, n, 0.09, np.random.default_rng(1))
    c = _detect(scene.sim.rigid_solver, q)
    count, geom, dist, normal = (x.cpu().numpy() for x in (c.count, c.geom, c.dist, c.normal))
    d = mujoco.MjData(m)
    compared = {}
    for w in range(n):
        d.qpos[:] = q[w]
        mujoco.mj_fwdPosition(m, d)
        for pair in map(tuple, plan.pairs):
            kind = (int(m.geom_type[pair[0]]), int(m.geom_type[pair[1]]))
            if kind not in kinds:
                continue
            ref = [con for con in d.contact[: d.ncon] if (con.geom1, con.geom2) == pair]
            ours = [k for k in range(count[w]) if tuple(geom[w, k]) == pair]
            assert bool(ref) == bool(ours), f"env {w}, pair {pair}: MuJoCo {len(ref)}, sim_core {len(ours)}"
            if not ref or min(con.dist for con in ref) < -0.005:
                continue  # deep overlaps: the two pick different (equally valid) exits
            deepest = min(ref, key=lambda con: con.dist)
            k = min(ours, key=lambda k: dist[w, k])
            assert dist[w, k] == pytest.approx(deepest.dist, abs=1e-5)
            np.testing.assert_allclose(normal[w, k], deepest.frame[:3], atol=2e-3)
            compared[kind] = compared.get(kind, 0) + 1
    assert compared.keys() == kinds and min(compared.values()) > 30, compared


def test_separated_boxes_within_the_margin_are_at_their_distance():
    """Two boxes apart by less than the contact margin: sim_core's nearest contact of the pair is at
    their distance (MuJoCo's ``mj_geomDistance``), with the normal along the gap, whichever features
    are closest (faces, an edge against an edge, a corner outside the faces' overlap). Where
    alternating projection has not converged (nearly parallel edges), the separation along the best
    axis stands, a distance too short (a body stops early), never too long."""
    n, margin = 4000, 0.01
    scene, _ = make_scene(
        sc.morphs.Box(size=(0.1, 0.06, 0.08)),
        sc.morphs.Box(size=(0.05, 0.05, 0.05)),
        n_envs=n,
        rigid_options=sc.RigidOptions(contact_margin=margin, max_contacts=16),
    )
    m = scene.mjmodel
    q = _poses_in_cube(m, n, 0.1, np.random.default_rng(3))
    c = _detect(scene.sim.rigid_solver, q)
    count, dist, normal = (x.cpu().numpy() for x in (c.count, c.dist, c.normal))
    d = mujoco.MjData(m)
    fromto = np.zeros(6)
    within, inexact = 0, 0
    for w in range(n):
        d.qpos[:] = q[w]
        mujoco.mj_fwdPosition(m, d)
        true = mujoco.mj_geomDistance(m, d, 0, 1, 2 * margin, fromto)
        if true <= 0.0:
            continue
        if true >= margin + 1e-5:
            assert count[w] == 0, f"env {w}: boxes {true:.5f} m apart, beyond the margin, have contacts"
            continue
        within += 1
        assert count[w] > 0, f"env {w}: boxes {true:.5f} m apart, within the margin, have no contact"
        k = int(np.argmin(dist[w, : count[w]]))
        assert dist[w, k] <= true + 1e-5, f"env {w}: nearest contact at {dist[w, k]:.6f} m, boxes at {true:.6f}"
        if dist[w, k] < true - 1e-5:
            inexact += 1
            continue
        gap = (fromto[3:] - fromto[:3]) / true
        # 2e-2: a corner just outside the faces' overlap tilts the gap to first order in its offset, its
        # length only to second order, so the face's normal can stand at the same distance to 1e-5
        np.testing.assert_allclose(normal[w, k], gap, atol=2e-2, err_msg=f"env {w}")
    assert within > 200 and inexact <= within // 100, (within, inexact)


def _clip(poly, half):
    """The convex polygon ``poly`` (k, 2) clipped to the rectangle |x| <= half[0], |y| <= half[1]
    (Sutherland-Hodgman)."""
    for axis in (0, 1):
        for sign in (1.0, -1.0):
            out = []
            for a, b in zip(poly, np.roll(poly, -1, axis=0), strict=True):
                da, db = half[axis] - sign * a[axis], half[axis] - sign * b[axis]  # >= 0: inside
                if da >= 0:
                    out.append(a)
                if da * db < 0:
                    out.append(a + (b - a) * (da / (da - db)))
            poly = np.array(out)
    return poly


@pytest.mark.parametrize("below", ["box", "cube"])
def test_box_face_contact_keeps_the_overlap_polygons_extremes(below):
    """A 5 cm cube, yawed and offset, face to face with a 10 x 6 x 8 cm box (on it, or under it): every
    contact is a vertex of the faces' overlap polygon, halfway into the overlap and as deep as it,
    normal along z from the box (geom 1) to the cube; and the contacts reach as far as the polygon
    along each diagonal of the box's face, so a large overlap keeps its extent."""
    box, cube = np.array([0.05, 0.03, 0.04]), 0.025  # half sizes
    scene, _ = make_scene(
        sc.morphs.Box(size=tuple(2 * box)),
        sc.morphs.Box(size=(2 * cube,) * 3),
        n_envs=N,
        rigid_options=sc.RigidOptions(contact_margin=0.0, max_contacts=16),
    )
    m = scene.mjmodel
    rng = np.random.default_rng(3)
    offset = rng.uniform(-0.03, 0.03, (N, 2))
    yaw = rng.uniform(-0.6, 0.6, N)
    depth = rng.uniform(0.0005, 0.003, N)
    up = 1.0 if below == "box" else -1.0  # the cube's side of the box
    q = np.tile(m.qpos0, (N, 1))
    box_adr, cube_adr = m.jnt_qposadr
    q[:, box_adr : box_adr + 7] = [0, 0, 0, 1, 0, 0, 0]
    q[:, cube_adr : cube_adr + 2] = offset
    q[:, cube_adr + 2] = up * (box[2] + cube - depth)
    q[:, cube_adr + 3 : cube_adr + 7] = np.stack([np.cos(yaw / 2), 0 * yaw, 0 * yaw, np.sin(yaw / 2)], 1)
    c = _detect(scene.sim.rigid_solver, q)
    count, pos, dist, normal = (x.cpu().numpy() for x in (c.count, c.pos, c.dist, c.normal))
    corners = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * cube
    diagonals = np.array([[1, 1], [1, -1], [-1, 1], [-1, -1]])
    for w in range(N):
        rot = np.array([[np.cos(yaw[w]), -np.sin(yaw[w])], [np.sin(yaw[w]), np.cos(yaw[w])]])
        polygon = _clip(corners @ rot.T + offset[w], box[:2])
        k = count[w]
        assert 3 <= k <= 5, f"env {w}: {k} contacts"
        np.testing.assert_allclose(dist[w, :k], -depth[w], atol=1e-6)
        np.testing.assert_allclose(normal[w, :k], np.tile([0, 0, up], (k, 1)), atol=1e-6)
        np.testing.assert_allclose(pos[w, :k, 2], up * (box[2] - 0.5 * depth[w]), atol=1e-6)
        xy = pos[w, :k, :2]
        gap = np.linalg.norm(xy[:, None] - polygon[None], axis=2).min(axis=1)
        assert gap.max() < 1e-6, f"env {w}: a contact {gap.max():.2e} m from every vertex of the overlap"
        reach = (xy @ diagonals.T).max(axis=0)
        np.testing.assert_allclose(reach, (polygon @ diagonals.T).max(axis=0), atol=1e-6)
