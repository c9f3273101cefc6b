"""Collision detection (narrow phase) between primitive geoms, batched over envs, as MuJoCo defines it.

This is the first stage of the contact pipeline; the contact solver that turns these contacts into
forces is not written yet, so ``scene.step()`` does not call it. It stands on its own and is checked
against MuJoCo's ``mj_collision`` (``tests/test_collision.py``).

Conventions (MuJoCo's): in a pair, ``geom1`` has the smaller geom type; the contact normal points from
``geom1`` to ``geom2``; ``dist`` is the signed distance between the surfaces (negative: penetration);
``pos`` is halfway between them. A contact is reported when ``dist < margin``.

Candidate pairs are chosen once, at build time, with MuJoCo's filter: ``contype``/``conaffinity``
bits, never two geoms of one body or of welded bodies, and never a parent and child body (unless the
parent is the world). Implemented pair types: plane with sphere, capsule and box; sphere with sphere,
capsule and box; capsule with capsule. Pairs of other types (capsule-box, box-box) are listed in
``CollisionPlan.unsupported`` and skipped.

Each env has a fixed budget of ``max_contacts`` slots; contacts beyond it are counted per env in
``overflow``, never written into another env's slots. One thread per env walks the pairs in a fixed
order, so the contact order is deterministic on every device.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import torch
import warp as wp

wp.set_module_options({"enable_backward": False})

__all__ = ["CollisionPlan", "Contacts", "collide"]

PLANE, SPHERE, CAPSULE, BOX = 0, 2, 3, 6
_SUPPORTED = {
    (PLANE, SPHERE),
    (PLANE, CAPSULE),
    (PLANE, BOX),
    (SPHERE, SPHERE),
    (SPHERE, CAPSULE),
    (SPHERE, BOX),
    (CAPSULE, CAPSULE),
}


@dataclass
class CollisionPlan:
    """The candidate pairs of a model and the geoms' constant data, on the device."""

    pairs: np.ndarray  # (npair, 2) geom ids, geom1 type <= geom2 type
    unsupported: list[tuple[int, int]]  # pairs of types not implemented yet (skipped)
    geom_type: wp.array  # (ngeom,) int32
    geom_body: wp.array  # (ngeom,) int32
    geom_pos: wp.array  # (ngeom,) vec3, in the body frame
    geom_quat: wp.array  # (ngeom,) quat (x, y, z, w), in the body frame
    geom_size: wp.array  # (ngeom,) vec3, MuJoCo's size (half extents, radius, half length)
    pair_geoms: wp.array  # (npair,) vec2i

    @staticmethod
    def build(m: mujoco.MjModel, device: str) -> CollisionPlan:
        pairs, unsupported = [], []
        for g1 in range(m.ngeom):
            for g2 in range(g1 + 1, m.ngeom):
                if not _may_collide(m, g1, g2):
                    continue
                a, b = (g1, g2) if m.geom_type[g1] <= m.geom_type[g2] else (g2, g1)
                key = (int(m.geom_type[a]), int(m.geom_type[b]))
                (pairs if key in _SUPPORTED else unsupported).append((a, b))
        pairs_np = np.array(pairs, dtype=np.int32).reshape(-1, 2)
        quat_xyzw = m.geom_quat[:, [1, 2, 3, 0]]
        return CollisionPlan(
            pairs=pairs_np,
            unsupported=unsupported,
            geom_type=wp.array(m.geom_type.astype(np.int32), dtype=wp.int32, device=device),
            geom_body=wp.array(m.geom_bodyid.astype(np.int32), dtype=wp.int32, device=device),
            geom_pos=wp.array(m.geom_pos.astype(np.float32), dtype=wp.vec3, device=device),
            geom_quat=wp.array(quat_xyzw.astype(np.float32), dtype=wp.quat, device=device),
            geom_size=wp.array(m.geom_size.astype(np.float32), dtype=wp.vec3, device=device),
            pair_geoms=wp.array(
                pairs_np if len(pairs) else np.zeros((0, 2), np.int32), dtype=wp.vec2i, device=device
            ),
        )


def _may_collide(m: mujoco.MjModel, g1: int, g2: int) -> bool:
    """MuJoCo's filter for a geom pair (contype/conaffinity, same or welded body, parent-child)."""
    if not ((m.geom_contype[g1] & m.geom_conaffinity[g2]) or (m.geom_contype[g2] & m.geom_conaffinity[g1])):
        return False
    b1, b2 = int(m.geom_bodyid[g1]), int(m.geom_bodyid[g2])
    w1, w2 = int(m.body_weldid[b1]), int(m.body_weldid[b2])
    if w1 == w2:
        return False
    filter_parent = not (m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_FILTERPARENT)
    p1, p2 = int(m.body_weldid[m.body_parentid[w1]]), int(m.body_weldid[m.body_parentid[w2]])
    return not (filter_parent and w1 != 0 and w2 != 0 and (p1 == w2 or p2 == w1))


@dataclass
class Contacts:
    """Per-env contacts, torch views of the output arrays: ``pos``, ``normal`` ``(nworld, max, 3)``,
    ``dist`` ``(nworld, max)``, ``geom`` ``(nworld, max, 2)``, ``count`` and ``overflow`` ``(nworld,)``;
    slots at and beyond ``count`` are stale."""

    pos: torch.Tensor
    normal: torch.Tensor
    dist: torch.Tensor
    geom: torch.Tensor
    count: torch.Tensor
    overflow: torch.Tensor


@wp.struct
class _Out:
    """The contact slots of every env (one argument instead of four)."""

    pos: wp.array2d(dtype=wp.vec3)
    normal: wp.array2d(dtype=wp.vec3)
    dist: wp.array2d(dtype=wp.float32)
    geom: wp.array2d(dtype=wp.vec2i)


@wp.func
def _emit(
    n: int,
    w: int,
    pos: wp.vec3,
    normal: wp.vec3,
    dist: float,
    g1: int,
    g2: int,
    margin: float,
    out: _Out,
) -> int:
    """Write a contact into slot ``n`` if it is close enough and the budget has room; return the new
    number of contacts wanted (which may exceed the budget: the excess is the overflow)."""
    if dist >= margin:
        return n
    if n < out.pos.shape[1]:
        out.pos[w, n] = pos
        out.normal[w, n] = normal
        out.dist[w, n] = dist
        out.geom[w, n] = wp.vec2i(g1, g2)
    return n + 1


@wp.func
def _sphere_sphere_geom(
    n: int,
    w: int,
    c1: wp.vec3,
    r1: float,
    c2: wp.vec3,
    r2: float,
    g1: int,
    g2: int,
    margin: float,
    out: _Out,
) -> int:
    d = c2 - c1
    length = wp.length(d)
    normal = wp.vec3(1.0, 0.0, 0.0)
    if length > 1.0e-12:
        normal = d / length
    dist = length - r1 - r2
    return _emit(n, w, c1 + normal * (r1 + 0.5 * dist), normal, dist, g1, g2, margin, out)


@wp.func
def _closest_on_segment(a: wp.vec3, b: wp.vec3, p: wp.vec3) -> wp.vec3:
    ab = b - a
    t = wp.clamp(wp.dot(p - a, ab) / wp.max(wp.dot(ab, ab), 1.0e-20), 0.0, 1.0)
    return a + ab * t


@wp.func
def _segments_closest_t(a0: wp.vec3, a1: wp.vec3, b0: wp.vec3, b1: wp.vec3) -> wp.vec2:
    """Parameters (s, t) in [0, 1] of the closest points of segments a and b (Ericson, RTCD 5.1.9)."""
    d1 = a1 - a0
    d2 = b1 - b0
    r = a0 - b0
    aa = wp.dot(d1, d1)
    ee = wp.dot(d2, d2)
    f = wp.dot(d2, r)
    c = wp.dot(d1, r)
    bb = wp.dot(d1, d2)
    denom = aa * ee - bb * bb
    s = float(0.0)
    if denom > 1.0e-12:
        s = wp.clamp((bb * f - c * ee) / denom, 0.0, 1.0)
    t = (bb * s + f) / wp.max(ee, 1.0e-20)
    if t < 0.0:
        t = 0.0
        s = wp.clamp(-c / wp.max(aa, 1.0e-20), 0.0, 1.0)
    elif t > 1.0:
        t = 1.0
        s = wp.clamp((bb - c) / wp.max(aa, 1.0e-20), 0.0, 1.0)
    return wp.vec2(s, t)


@wp.kernel
def _collide_kernel(
    xpos: wp.array2d(dtype=wp.vec3),
    xquat: wp.array2d(dtype=wp.vec4),
    pair_geoms: wp.array(dtype=wp.vec2i),
    geom_type: wp.array(dtype=wp.int32),
    geom_body: wp.array(dtype=wp.int32),
    geom_pos: wp.array(dtype=wp.vec3),
    geom_quat: wp.array(dtype=wp.quat),
    geom_size: wp.array(dtype=wp.vec3),
    margin: float,
    out: _Out,
    count: wp.array(dtype=wp.int32),
    overflow: wp.array(dtype=wp.int32),
):
    w = wp.tid()
    n = int(0)
    for p in range(pair_geoms.shape[0]):
        g1 = pair_geoms[p][0]
        g2 = pair_geoms[p][1]
        b1 = geom_body[g1]
        b2 = geom_body[g2]
        bq1 = xquat[w, b1]
        bq2 = xquat[w, b2]
        r1 = wp.quat(bq1[1], bq1[2], bq1[3], bq1[0])
        r2 = wp.quat(bq2[1], bq2[2], bq2[3], bq2[0])
        c1 = xpos[w, b1] + wp.quat_rotate(r1, geom_pos[g1])  # geom centers and orientations, world
        c2 = xpos[w, b2] + wp.quat_rotate(r2, geom_pos[g2])
        q1 = r1 * geom_quat[g1]
        q2 = r2 * geom_quat[g2]
        t1 = geom_type[g1]
        t2 = geom_type[g2]
        s1 = geom_size[g1]
        s2 = geom_size[g2]
        z1 = wp.quat_rotate(q1, wp.vec3(0.0, 0.0, 1.0))
        z2 = wp.quat_rotate(q2, wp.vec3(0.0, 0.0, 1.0))
        if t1 == 0:  # a plane: its normal is its frame's z axis
            if t2 == 2:
                dist = wp.dot(c2 - c1, z1) - s2[0]
                n = _emit(n, w, c2 - z1 * (s2[0] + 0.5 * dist), z1, dist, g1, g2, margin, out)
            elif t2 == 3:
                for k in range(2):
                    end = c2 + z2 * (s2[1] * (2.0 * float(k) - 1.0))
                    dist = wp.dot(end - c1, z1) - s2[0]
                    n = _emit(n, w, end - z1 * (s2[0] + 0.5 * dist), z1, dist, g1, g2, margin, out)
            elif t2 == 6:
                found = int(0)
                for k in range(8):
                    corner_local = wp.vec3(
                        s2[0] * (2.0 * float(k & 1) - 1.0),
                        s2[1] * (2.0 * float((k >> 1) & 1) - 1.0),
                        s2[2] * (2.0 * float((k >> 2) & 1) - 1.0),
                    )
                    corner = c2 + wp.quat_rotate(q2, corner_local)
                    dist = wp.dot(corner - c1, z1)
                    if dist < margin and found < 4:  # MuJoCo keeps at most 4 box corners
                        found += 1
                        n = _emit(n, w, corner - z1 * (0.5 * dist), z1, dist, g1, g2, margin, out)
        elif t1 == 2:  # a sphere
            if t2 == 2:
                n = _sphere_sphere_geom(n, w, c1, s1[0], c2, s2[0], g1, g2, margin, out)
            elif t2 == 3:
                closest = _closest_on_segment(c2 - z2 * s2[1], c2 + z2 * s2[1], c1)
                n = _sphere_sphere_geom(n, w, c1, s1[0], closest, s2[0], g1, g2, margin, out)
            elif t2 == 6:
                normal_local = wp.vec3(0.0, 0.0, 0.0)
                dist = float(0.0)
                local = wp.quat_rotate_inv(q2, c1 - c2)  # sphere center in the box frame
                clamped = wp.vec3(
                    wp.clamp(local[0], -s2[0], s2[0]),
                    wp.clamp(local[1], -s2[1], s2[1]),
                    wp.clamp(local[2], -s2[2], s2[2]),
                )
                gap = clamped - local
                if wp.length(gap) > 1.0e-12:  # center outside the box: toward the closest surface point
                    normal_local = gap / wp.length(gap)
                    dist = wp.length(gap) - s1[0]
                else:  # center inside: out through the nearest face
                    face = wp.vec3(s2[0] - wp.abs(local[0]), s2[1] - wp.abs(local[1]), s2[2] - wp.abs(local[2]))
                    axis = int(0)
                    if face[1] < face[axis]:
                        axis = 1
                    if face[2] < face[axis]:
                        axis = 2
                    normal_local[axis] = -wp.sign(local[axis])
                    dist = -face[axis] - s1[0]
                normal = wp.quat_rotate(q2, normal_local)
                n = _emit(n, w, c1 + normal * (s1[0] + 0.5 * dist), normal, dist, g1, g2, margin, out)
        elif t1 == 3 and t2 == 3:  # two capsules: their segments' closest points as spheres
            e1a = c1 - z1 * s1[1]
            e1b = c1 + z1 * s1[1]
            e2a = c2 - z2 * s2[1]
            e2b = c2 + z2 * s2[1]
            st = _segments_closest_t(e1a, e1b, e2a, e2b)
            pa = e1a + (e1b - e1a) * st[0]
            pb = e2a + (e2b - e2a) * st[1]
            n = _sphere_sphere_geom(n, w, pa, s1[0], pb, s2[0], g1, g2, margin, out)
    count[w] = wp.min(n, out.pos.shape[1])
    overflow[w] = wp.max(n - out.pos.shape[1], 0)


def collide(
    plan: CollisionPlan, xpos: wp.array, xquat: wp.array, max_contacts: int, margin: float = 0.0
) -> Contacts:
    """Contacts of every env for body poses ``xpos``/``xquat`` ``(nworld, nbody)``."""
    nworld, device = xpos.shape[0], xpos.device
    slots = _Out()
    slots.pos = wp.zeros((nworld, max_contacts), dtype=wp.vec3, device=device)
    slots.normal = wp.zeros((nworld, max_contacts), dtype=wp.vec3, device=device)
    slots.dist = wp.zeros((nworld, max_contacts), dtype=wp.float32, device=device)
    slots.geom = wp.zeros((nworld, max_contacts), dtype=wp.vec2i, device=device)
    count = wp.zeros(nworld, dtype=wp.int32, device=device)
    overflow = wp.zeros(nworld, dtype=wp.int32, device=device)
    p = plan
    geoms = [p.pair_geoms, p.geom_type, p.geom_body, p.geom_pos, p.geom_quat, p.geom_size]
    wp.launch(
        _collide_kernel,
        dim=nworld,
        inputs=[xpos, xquat, *geoms, float(margin)],
        outputs=[slots, count, overflow],
        device=device,
    )
    t = wp.to_torch
    return Contacts(t(slots.pos), t(slots.normal), t(slots.dist), t(slots.geom), t(count), t(overflow))
