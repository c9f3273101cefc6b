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

wp.set_module_options({"enable_backward": False, "optimization_level": 3})

# geom types (mujoco.mjtGeom) as the kernels' constants
PLANE_T, SPHERE_T, CAPSULE_T, BOX_T = (
    wp.constant(t) for t in (pairs.PLANE, pairs.SPHERE, pairs.CAPSULE, pairs.BOX)
)

__all__ = ["ContactSlots", "pair_apart", "narrow_phase", "deepest", "copy_contacts", "make_slots"]


@wp.struct
class ContactSlots:
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
    out: ContactSlots,
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
    out: ContactSlots,
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
    return _emit(n, w, c1 + normal * (r1 + 0.5 * dist), normal, dist, g1, g2, margin, out)


@wp.func
def _closest_in_box(p: wp.vec3, c: wp.vec3, q: wp.quat, s: wp.vec3) -> wp.vec3:
    """The point of the box (center c, orientation q, half extents s) nearest to ``p``."""
    local = wp.quat_rotate_inv(q, p - c)
    clamped = wp.vec3(
        wp.clamp(local[0], -s[0], s[0]), wp.clamp(local[1], -s[1], s[1]), wp.clamp(local[2], -s[2], s[2])
    )
    return c + wp.quat_rotate(q, clamped)


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
    segment further from the box's center than its bounding sphere by the margin has none."""
    if wp.length(_closest_on_segment(a, b, c2) - c2) - r1 - wp.length(s2) >= margin:
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


_mat43 = wp.types.matrix(shape=(4, 3), dtype=wp.float32)


@wp.struct
class _Manifold:
    """Up to five contact points of a face contact: the deepest point, and the extreme points along
    the reference face's diagonals (so a square contact keeps its four corners), with depths."""

    pos: _mat43
    depth: wp.vec4
    score: wp.vec4
    deep_pos: wp.vec3
    deep: float


@wp.func
def _manifold_add(mf: _Manifold, p: wp.vec3, pu: float, pv: float, depth: float, margin: float) -> _Manifold:
    out = mf
    if depth < margin:
        s = wp.vec4(pu + pv, pu - pv, -pu + pv, -pu - pv)
        for k in range(4):
            if s[k] > out.score[k]:
                out.score[k] = s[k]
                out.depth[k] = depth
                out.pos[k] = p
        if depth < out.deep:
            out.deep = depth
            out.deep_pos = p
    return out


@wp.func(inline=True)
def _edge_crossings(
    mf: _Manifold,
    p0: wp.vec3,
    p1: wp.vec3,
    fc: wp.vec3,
    u: wp.vec3,
    v: wp.vec3,
    nr: wp.vec3,
    hu: float,
    hv: float,
    margin: float,
) -> _Manifold:
    """Add the points where the incident edge p0-p1 crosses the four edge lines of the reference
    face (center ``fc``, axes ``u``, ``v``, half sizes ``hu``, ``hv``) within that face."""
    out = mf
    tol = 1.0e-6
    u0 = wp.dot(p0 - fc, u)
    v0 = wp.dot(p0 - fc, v)
    u1 = wp.dot(p1 - fc, u)
    v1 = wp.dot(p1 - fc, v)
    for side in range(4):
        bound = hu
        if side >= 2:
            bound = hv
        bound = bound * (2.0 * float(side & 1) - 1.0)
        x0 = u0
        x1 = u1
        y0 = v0
        y1 = v1
        ylim = hv
        if side >= 2:
            x0 = v0
            x1 = v1
            y0 = u0
            y1 = u1
            ylim = hu
        den = x1 - x0
        if wp.abs(den) > 1.0e-12:
            s = (bound - x0) / den
            if s >= 0.0 and s <= 1.0:
                y = y0 + (y1 - y0) * s
                if wp.abs(y) <= ylim + tol:
                    p = p0 + (p1 - p0) * s
                    pu = wp.dot(p - fc, u)
                    pv = wp.dot(p - fc, v)
                    out = _manifold_add(out, p, pu, pv, wp.dot(p - fc, nr), margin)
    return out


@wp.func(inline=True)
def _emit_manifold(
    n: int, w: int, mf: _Manifold, nr: wp.vec3, flip: float, g1: int, g2: int, margin: float, out: ContactSlots
) -> int:
    """Write a face contact's points: the deepest (unless it is one of the extremes, as a polygon's
    deepest vertex need not be), then the distinct extremes, each halfway between the incident
    point and the reference face, normal ``flip * nr``."""
    if mf.deep < 1.0e29:
        extreme = int(0)
        for k2 in range(4):
            if wp.length(mf.pos[k2] - mf.deep_pos) < 1.0e-7:
                extreme = 1
        if extreme == 0:
            n = _emit(n, w, mf.deep_pos - nr * (0.5 * mf.deep), nr * flip, mf.deep, g1, g2, margin, out)
    for k2 in range(4):
        if mf.score[k2] > -1.0e29:
            dup = int(0)
            for k3 in range(k2):
                if wp.length(mf.pos[k3] - mf.pos[k2]) < 1.0e-7:
                    dup = 1
            if dup == 0:
                d = mf.depth[k2]
                n = _emit(n, w, mf.pos[k2] - nr * (0.5 * d), nr * flip, d, g1, g2, margin, out)
    return n


@wp.func
def _box_face_contacts(
    n: int,
    w: int,
    cr: wp.vec3,
    qr: wp.quat,
    sr: wp.vec3,
    k: int,
    nr: wp.vec3,
    ci: wp.vec3,
    qi: wp.quat,
    si: wp.vec3,
    flip: float,
    g1: int,
    g2: int,
    margin: float,
    out: ContactSlots,
) -> int:
    """Contacts of the incident box (ci, qi, si) against face ``k`` of the reference box, whose outward
    normal ``nr`` points toward the incident box: the vertices of the incident face clipped to the
    reference face (incident corners inside it, reference corners inside the incident face, and edge
    crossings), reduced to four. The contact normal is ``flip * nr`` (from geom1 to geom2)."""
    ku = (k + 1) % 3
    kv = (k + 2) % 3
    fc = cr + nr * sr[k]  # reference face center
    u = wp.quat_rotate(qr, wp.vec3(float(ku == 0), float(ku == 1), float(ku == 2)))
    v = wp.quat_rotate(qr, wp.vec3(float(kv == 0), float(kv == 1), float(kv == 2)))
    hu = sr[ku]
    hv = sr[kv]
    # incident face: the face of the other box whose normal is most opposed to nr
    j = int(0)
    best = float(-1.0)
    for a in range(3):
        ax = wp.quat_rotate(qi, wp.vec3(float(a == 0), float(a == 1), float(a == 2)))
        c = wp.abs(wp.dot(ax, nr))
        if c > best:
            best = c
            j = a
    aj = wp.quat_rotate(qi, wp.vec3(float(j == 0), float(j == 1), float(j == 2)))
    ni = aj
    if wp.dot(aj, nr) > 0.0:
        ni = -aj
    ic = ci + ni * si[j]  # incident face center
    j1 = (j + 1) % 3
    j2 = (j + 2) % 3
    e1 = wp.quat_rotate(qi, wp.vec3(float(j1 == 0), float(j1 == 1), float(j1 == 2)))
    e2 = wp.quat_rotate(qi, wp.vec3(float(j2 == 0), float(j2 == 1), float(j2 == 2)))
    h1 = si[j1]
    h2 = si[j2]
    tol = 1.0e-6
    mf = _Manifold()
    mf.score = wp.vec4(-1.0e30)
    mf.deep = 1.0e30
    for m in range(4):
        sa = 2.0 * float(m & 1) - 1.0
        sb = 2.0 * float((m >> 1) & 1) - 1.0
        # incident corner inside the reference face
        p = ic + e1 * (sa * h1) + e2 * (sb * h2)
        pu = wp.dot(p - fc, u)
        pv = wp.dot(p - fc, v)
        if wp.abs(pu) <= hu + tol and wp.abs(pv) <= hv + tol:
            mf = _manifold_add(mf, p, pu, pv, wp.dot(p - fc, nr), margin)
        # reference corner, projected along nr onto the incident plane, inside the incident face
        r = fc + u * (sa * hu) + v * (sb * hv)
        t = wp.dot(ic - r, ni) / wp.dot(nr, ni)
        p = r + nr * t
        if wp.abs(wp.dot(p - ic, e1)) <= h1 + tol and wp.abs(wp.dot(p - ic, e2)) <= h2 + tol:
            mf = _manifold_add(mf, p, sa * hu, sb * hv, t, margin)
        # incident edge m (corner m to the next corner going around) crossing the reference edges
        ma = 2.0 * float(((m + 1) >> 1) & 1) - 1.0  # corners in order (-,-), (+,-), (+,+), (-,+)
        mb = 2.0 * float((m >> 1) & 1) - 1.0
        na = 2.0 * float(((m + 2) >> 1) & 1) - 1.0
        nb = 2.0 * float(((m + 1) >> 1) & 1) - 1.0
        p0 = ic + e1 * (ma * h1) + e2 * (mb * h2)
        p1 = ic + e1 * (na * h1) + e2 * (nb * h2)
        mf = _edge_crossings(mf, p0, p1, fc, u, v, nr, hu, hv, margin)
    return _emit_manifold(n, w, mf, nr, flip, g1, g2, margin, out)


@wp.func
def _extent(r: wp.mat33, s: wp.vec3, axis: wp.vec3) -> float:
    """Half-width along a unit ``axis`` of a box with half extents ``s`` and rotation ``r``."""
    a = wp.transpose(r) * axis  # the axis in the box frame
    return s[0] * wp.abs(a[0]) + s[1] * wp.abs(a[1]) + s[2] * wp.abs(a[2])


@wp.func
def _col(r: wp.mat33, k: int) -> wp.vec3:
    return wp.vec3(r[0, k], r[1, k], r[2, k])


@wp.func(inline=True)
def _boxes_apart(
    n: int,
    w: int,
    c1: wp.vec3,
    q1: wp.quat,
    s1: wp.vec3,
    c2: wp.vec3,
    q2: wp.quat,
    s2: wp.vec3,
    g1: int,
    g2: int,
    margin: float,
    out: ContactSlots,
) -> int:
    """The contact of two separated boxes from their closest points, found by alternating
    projection (convex sets: it converges)."""
    p2 = c2
    p1 = c1
    for _it in range(16):
        p1 = _closest_in_box(p2, c1, q1, s1)
        p2 = _closest_in_box(p1, c2, q2, s2)
    gap = p2 - p1
    dist = wp.length(gap)
    if dist < 1.0e-9:
        return n
    return _emit(n, w, 0.5 * (p1 + p2), gap / dist, dist, g1, g2, margin, out)


@wp.func
def _box_box(
    n: int,
    w: int,
    c1: wp.vec3,
    q1: wp.quat,
    s1: wp.vec3,
    c2: wp.vec3,
    q2: wp.quat,
    s2: wp.vec3,
    g1: int,
    g2: int,
    margin: float,
    out: ContactSlots,
) -> int:
    """Two boxes by the separating-axis test over their 15 axes (Gottschalk et al. 1996; Ericson,
    RTCD 4.4). The axis of largest separation (least penetration) decides the contact: a face axis
    clips the other box's face against that face (up to 4 points), an edge-edge axis gives the
    closest points of the two edges. Face axes are preferred unless an edge axis separates more by
    a small tolerance, which keeps resting face contacts from flickering to edge contacts."""
    d = c2 - c1
    r1 = wp.quat_to_matrix(q1)  # columns: the boxes' axes in the world
    r2 = wp.quat_to_matrix(q2)
    best = float(-1.0e30)
    kind = int(-1)  # 0: face of box 1, 1: face of box 2, 2: edge-edge
    idx = int(0)
    axis = wp.vec3(0.0, 0.0, 1.0)
    for k in range(3):
        a = _col(r1, k)
        sep = wp.abs(wp.dot(d, a)) - s1[k] - _extent(r2, s2, a)
        if sep > best:
            best = sep
            kind = 0
            idx = k
            axis = a
    for k in range(3):
        a = _col(r2, k)
        sep = wp.abs(wp.dot(d, a)) - s2[k] - _extent(r1, s1, a)
        if sep > best + 1.0e-6:
            best = sep
            kind = 1
            idx = k
            axis = a
    face_best = best
    for i in range(3):
        for j in range(3):
            a = wp.cross(_col(r1, i), _col(r2, j))
            length = wp.length(a)
            if length > 1.0e-4:
                a = a / length
                sep = wp.abs(wp.dot(d, a)) - _extent(r1, s1, a) - _extent(r2, s2, a)
                if sep > best and sep > face_best + 1.0e-4:
                    best = sep
                    kind = 2
                    idx = i * 3 + j
                    axis = a
    if best >= margin:
        return n
    if wp.dot(d, axis) < 0.0:
        axis = -axis  # from box 1 toward box 2
    if kind < 2:
        n0 = n
        if kind == 0:
            n = _box_face_contacts(n, w, c1, q1, s1, idx, axis, c2, q2, s2, 1.0, g1, g2, margin, out)
        else:
            n = _box_face_contacts(n, w, c2, q2, s2, idx, -axis, c1, q1, s1, -1.0, g1, g2, margin, out)
        if n > n0 or best <= 0.0:
            return n
        # apart, and the faces do not overlap across the axis (boxes offset diagonally, closest at an
        # edge or corner)
        return _boxes_apart(n, w, c1, q1, s1, c2, q2, s2, g1, g2, margin, out)
    # edge-edge: the edge of each box that reaches furthest toward the other
    i = idx / 3
    j = idx % 3
    p1 = c1
    p2 = c2
    for k in range(3):
        a1 = _col(r1, k)
        a2 = _col(r2, k)
        if k != i:
            p1 = p1 + a1 * (s1[k] * wp.sign(wp.dot(a1, axis)))
        if k != j:
            p2 = p2 - a2 * (s2[k] * wp.sign(wp.dot(a2, axis)))
    ei = _col(r1, i) * s1[i]
    ej = _col(r2, j) * s2[j]
    st = _segments_closest_t(p1 - ei, p1 + ei, p2 - ej, p2 + ej)
    pa = p1 - ei + ei * (2.0 * st[0])
    pb = p2 - ej + ej * (2.0 * st[1])
    return _emit(n, w, 0.5 * (pa + pb), axis, best, g1, g2, margin, out)


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
            n = _emit(n, w, c2 - z1 * (s2[0] + 0.5 * dist), z1, dist, g1, g2, margin, out)
        elif t2 == CAPSULE_T:
            for k in range(2):
                end = c2 + z2 * (s2[1] * (2.0 * float(k) - 1.0))
                dist = wp.dot(end - c1, z1) - s2[0]
                n = _emit(n, w, end - z1 * (s2[0] + 0.5 * dist), z1, dist, g1, g2, margin, out)
        elif t2 == BOX_T:  # each corner's height from the center's and the half axes' (as mjc_PlaneBox)
            r2 = wp.quat_to_matrix(q2)
            a0 = _col(r2, 0) * s2[0]
            a1 = _col(r2, 1) * s2[1]
            a2 = _col(r2, 2) * s2[2]
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
                    n = _emit(n, w, corner - z1 * (0.5 * dist), z1, dist, g1, g2, margin, out)
    elif t1 == SPHERE_T:  # a sphere
        if t2 == SPHERE_T:
            n = _sphere_sphere_geom(n, w, c1, s1[0], c2, s2[0], g1, g2, margin, out)
        elif t2 == CAPSULE_T:
            closest = _closest_on_segment(c2 - z2 * s2[1], c2 + z2 * s2[1], c1)
            n = _sphere_sphere_geom(n, w, c1, s1[0], closest, s2[0], g1, g2, margin, out)
        elif t2 == BOX_T:
            n = _sphere_box(n, w, c1, s1[0], c2, q2, s2, g1, g2, margin, out)
    elif t1 == CAPSULE_T:
        if t2 == CAPSULE_T:  # two capsules: their segments' closest points as spheres
            e1a = c1 - z1 * s1[1]
            e1b = c1 + z1 * s1[1]
            e2a = c2 - z2 * s2[1]
            e2b = c2 + z2 * s2[1]
            st = _segments_closest_t(e1a, e1b, e2a, e2b)
            pa = e1a + (e1b - e1a) * st[0]
            pb = e2a + (e2b - e2a) * st[1]
            n = _sphere_sphere_geom(n, w, pa, s1[0], pb, s2[0], g1, g2, margin, out)
        elif t2 == BOX_T:
            n = _capsule_box(n, w, c1 - z1 * s1[1], c1 + z1 * s1[1], s1[0], c2, q2, s2, g1, g2, margin, out)
    elif t1 == BOX_T and t2 == BOX_T:
        n = _box_box(n, w, c1, q1, s1, c2, q2, s2, g1, g2, margin, out)
    return n


@wp.func
def deepest(w: int, n: int, out: ContactSlots) -> float:
    """The most negative ``dist`` of env ``w``'s first ``n`` contacts (as many as fit), 0 if none."""
    d = float(0.0)
    for c in range(wp.min(n, out.pos.shape[1])):
        d = wp.min(d, out.dist[w, c])
    return d


@wp.func
def copy_contacts(w: int, src: ContactSlots, dst: ContactSlots, n: int):
    """Env ``w``'s first ``n`` contacts of ``src`` into ``dst``."""
    for c in range(n):
        dst.pos[w, c] = src.pos[w, c]
        dst.normal[w, c] = src.normal[w, c]
        dst.dist[w, c] = src.dist[w, c]
        dst.geom[w, c] = src.geom[w, c]


def make_slots(nworld: int, max_contacts: int, device) -> ContactSlots:
    """Zeroed contact slots for ``nworld`` envs of ``max_contacts`` each."""
    slots = ContactSlots()
    slots.pos = wp.zeros((nworld, max_contacts), dtype=wp.vec3, device=device)
    slots.normal = wp.zeros((nworld, max_contacts), dtype=wp.vec3, device=device)
    slots.dist = wp.zeros((nworld, max_contacts), dtype=wp.float32, device=device)
    slots.geom = wp.zeros((nworld, max_contacts), dtype=wp.vec2i, device=device)
    return slots
