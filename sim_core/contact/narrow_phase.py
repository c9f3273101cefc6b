"""Narrow phase: the contacts between two primitive geoms, as MuJoCo defines them.

Conventions (MuJoCo's): in a pair, ``geom1`` has the smaller geom type; the contact normal points
from ``geom1`` to ``geom2``; ``dist`` is the signed distance between the surfaces (negative:
penetration); ``pos`` is halfway between them. A contact is reported when ``dist < margin``.

Each env has a fixed budget of slots (``ContactSlots``); contacts beyond it are counted, never
written into another env's slots. The generated step calls ``pair_apart`` and ``narrow_phase`` for
each of the model's candidate pairs in a fixed order (``emit_pairs.py``), so the contact order is
deterministic on every device.
"""

from __future__ import annotations

import warp as wp

from . import pairs
from .box_box import box_box, col
from .geometry import ContactSlots, closest_on_segment, emit, segments_closest_t

wp.set_module_options({"enable_backward": False, "optimization_level": 3})

# geom types (mujoco.mjtGeom) as the kernels' constants
PLANE_T, SPHERE_T, CAPSULE_T, BOX_T = (
    wp.constant(t) for t in (pairs.PLANE, pairs.SPHERE, pairs.CAPSULE, pairs.BOX)
)

__all__ = ["pair_apart", "narrow_phase"]


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
    out: ContactSlots,
) -> int:
    d = c2 - c1
    length = wp.length(d)
    normal = wp.vec3(1.0, 0.0, 0.0)
    if length > 1.0e-12:
        normal = d / length
    dist = length - r1 - r2
    return emit(n, w, c1 + normal * (r1 + 0.5 * dist), normal, dist, g1, g2, margin, out)


@wp.func
def _sphere_box(
    n: int,
    w: int,
    c1: wp.vec3,
    r1: float,
    c2: wp.vec3,
    q2: wp.quat,
    s2: wp.vec3,
    g1: int,
    g2: int,
    margin: float,
    out: ContactSlots,
) -> int:
    """A sphere (geom1) against a box (geom2), normal from the sphere to the box."""
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
        dist = wp.length(gap) - r1
    else:  # center inside: out through the nearest face
        face = wp.vec3(s2[0] - wp.abs(local[0]), s2[1] - wp.abs(local[1]), s2[2] - wp.abs(local[2]))
        axis = int(0)
        if face[1] < face[axis]:
            axis = 1
        if face[2] < face[axis]:
            axis = 2
        normal_local[axis] = -wp.sign(local[axis])
        dist = -face[axis] - r1
    normal = wp.quat_rotate(q2, normal_local)
    return emit(n, w, c1 + normal * (r1 + 0.5 * dist), normal, dist, g1, g2, margin, out)


@wp.func
def _box_sdf(p: wp.vec3, c: wp.vec3, q: wp.quat, s: wp.vec3) -> float:
    """Signed distance from point ``p`` to the box (negative inside)."""
    local = wp.quat_rotate_inv(q, p - c)
    d = wp.vec3(wp.abs(local[0]) - s[0], wp.abs(local[1]) - s[1], wp.abs(local[2]) - s[2])
    outside = wp.vec3(wp.max(d[0], 0.0), wp.max(d[1], 0.0), wp.max(d[2], 0.0))
    return wp.length(outside) + wp.min(wp.max(d[0], wp.max(d[1], d[2])), 0.0)


@wp.func
def _capsule_box(
    n: int,
    w: int,
    a: wp.vec3,
    b: wp.vec3,
    r1: float,
    c2: wp.vec3,
    q2: wp.quat,
    s2: wp.vec3,
    g1: int,
    g2: int,
    margin: float,
    out: ContactSlots,
) -> int:
    """A capsule (geom1, segment a-b, radius r1) against a box: the segment point nearest the box
    (golden-section search on the convex distance) as a sphere contact, plus each end point that is
    within the margin and apart from it, so a capsule lying on a face gets a line of support. A
    segment whose end points lie beyond one of the box's face planes by more than the radius and
    the margin (the box's slab along that axis, widened), or further from its center than its
    bounding sphere by that much, has none."""
    la = wp.quat_rotate_inv(q2, a - c2)
    lb = wp.quat_rotate_inv(q2, b - c2)
    for k in range(3):  # the slack keeps a pair that the search would find just within the margin
        reach = s2[k] + r1 + margin + 1.0e-6
        if wp.min(la[k], lb[k]) > reach or wp.max(la[k], lb[k]) < -reach:
            return n
    if wp.length(closest_on_segment(a, b, c2) - c2) - r1 - wp.length(s2) >= margin:
        return n
    lo = float(0.0)
    hi = float(1.0)
    t1 = hi - 0.618034 * (hi - lo)  # the interior points; each round keeps one, and its distance
    t2 = lo + 0.618034 * (hi - lo)
    f1 = _box_sdf(a + (b - a) * t1, c2, q2, s2)
    f2 = _box_sdf(a + (b - a) * t2, c2, q2, s2)
    for _it in range(24):  # shrinks the bracket by 0.618^24 ~ 1e-5 of the segment
        if f1 < f2:
            hi = t2
            t2 = t1
            f2 = f1
            t1 = hi - 0.618034 * (hi - lo)
            f1 = _box_sdf(a + (b - a) * t1, c2, q2, s2)
        else:
            lo = t1
            t1 = t2
            f1 = f2
            t2 = lo + 0.618034 * (hi - lo)
            f2 = _box_sdf(a + (b - a) * t2, c2, q2, s2)
    t = 0.5 * (lo + hi)
    n = _sphere_box(n, w, a + (b - a) * t, r1, c2, q2, s2, g1, g2, margin, out)
    if t > 0.1:
        n = _sphere_box(n, w, a, r1, c2, q2, s2, g1, g2, margin, out)
    if t < 0.9:
        n = _sphere_box(n, w, b, r1, c2, q2, s2, g1, g2, margin, out)
    return n


@wp.func
def _bound(t: int, s: wp.vec3) -> float:
    """Radius of a sphere around the geom's center that holds it."""
    r = s[0]
    if t == CAPSULE_T:
        r = s[0] + s[1]
    elif t == BOX_T:
        r = wp.length(s)
    return r


@wp.func
def pair_apart(
    t1: int, t2: int, c1: wp.vec3, z1: wp.vec3, s1: wp.vec3, c2: wp.vec3, s2: wp.vec3, margin: float
) -> bool:
    """Geoms of types ``t1 <= t2`` (centers ``c1``, ``c2``, sizes ``s1``, ``s2``, ``z1``: geom1's z axis)
    are further apart than ``margin`` by their bounding spheres (a plane: by its half-space): most
    pairs, most steps, decided before the rest of their frames is built."""
    if t1 == PLANE_T:  # a plane: its normal is its frame's z axis
        return wp.dot(c2 - c1, z1) - _bound(t2, s2) >= margin
    return wp.length(c2 - c1) - _bound(t1, s1) - _bound(t2, s2) >= margin


@wp.func
def narrow_phase(
    n: int,
    w: int,
    t1: int,
    t2: int,
    c1: wp.vec3,
    q1: wp.quat,
    z1: wp.vec3,
    s1: wp.vec3,
    c2: wp.vec3,
    q2: wp.quat,
    s2: wp.vec3,
    g1: int,
    g2: int,
    margin: float,
    out: ContactSlots,
) -> int:
    """The contacts of geoms ``g1``, ``g2`` (types ``t1 <= t2``, world centers ``c*``, orientations
    ``q*``, ``z1``: geom1's z axis, sizes ``s*``) into env ``w``'s slots from ``n`` on; returns the
    new count."""
    z2 = wp.quat_rotate(q2, wp.vec3(0.0, 0.0, 1.0))
    if t1 == PLANE_T:
        if t2 == SPHERE_T:
            dist = wp.dot(c2 - c1, z1) - s2[0]
            n = emit(n, w, c2 - z1 * (s2[0] + 0.5 * dist), z1, dist, g1, g2, margin, out)
        elif t2 == CAPSULE_T:
            for k in range(2):
                end = c2 + z2 * (s2[1] * (2.0 * float(k) - 1.0))
                dist = wp.dot(end - c1, z1) - s2[0]
                n = emit(n, w, end - z1 * (s2[0] + 0.5 * dist), z1, dist, g1, g2, margin, out)
        elif t2 == BOX_T:  # each corner's height from the center's and the half axes' (as mjc_PlaneBox)
            r2 = wp.quat_to_matrix(q2)
            a0 = col(r2, 0) * s2[0]
            a1 = col(r2, 1) * s2[1]
            a2 = col(r2, 2) * s2[2]
            h = wp.dot(c2 - c1, z1)
            h0 = wp.dot(a0, z1)
            h1 = wp.dot(a1, z1)
            h2 = wp.dot(a2, z1)
            found = int(0)
            for k in range(8):
                x = 2.0 * float(k & 1) - 1.0
                y = 2.0 * float((k >> 1) & 1) - 1.0
                z = 2.0 * float((k >> 2) & 1) - 1.0
                dist = h + x * h0 + y * h1 + z * h2
                if dist < margin and found < 4:  # MuJoCo keeps at most 4 box corners
                    found += 1
                    corner = c2 + a0 * x + a1 * y + a2 * z
                    n = emit(n, w, corner - z1 * (0.5 * dist), z1, dist, g1, g2, margin, out)
    elif t1 == SPHERE_T:  # a sphere
        if t2 == SPHERE_T:
            n = _sphere_sphere_geom(n, w, c1, s1[0], c2, s2[0], g1, g2, margin, out)
        elif t2 == CAPSULE_T:
            closest = closest_on_segment(c2 - z2 * s2[1], c2 + z2 * s2[1], c1)
            n = _sphere_sphere_geom(n, w, c1, s1[0], closest, s2[0], g1, g2, margin, out)
        elif t2 == BOX_T:
            n = _sphere_box(n, w, c1, s1[0], c2, q2, s2, g1, g2, margin, out)
    elif t1 == CAPSULE_T:
        if t2 == CAPSULE_T:  # two capsules: their segments' closest points as spheres
            e1a = c1 - z1 * s1[1]
            e1b = c1 + z1 * s1[1]
            e2a = c2 - z2 * s2[1]
            e2b = c2 + z2 * s2[1]
            st = segments_closest_t(e1a, e1b, e2a, e2b)
            pa = e1a + (e1b - e1a) * st[0]
            pb = e2a + (e2b - e2a) * st[1]
            n = _sphere_sphere_geom(n, w, pa, s1[0], pb, s2[0], g1, g2, margin, out)
        elif t2 == BOX_T:
            n = _capsule_box(n, w, c1 - z1 * s1[1], c1 + z1 * s1[1], s1[0], c2, q2, s2, g1, g2, margin, out)
    elif t1 == BOX_T and t2 == BOX_T:
        n = box_box(n, w, c1, q1, s1, c2, q2, s2, g1, g2, margin, out)
    return n
