"""Box-box contacts: the separating-axis test and the face contacts' manifold (``box_box``), in
MuJoCo's conventions (``narrow_phase.py``)."""

from __future__ import annotations

import warp as wp

from .geometry import ContactSlots, emit, segments_closest_t
from .pairs import BOX, MOST_CONTACTS

wp.set_module_options({"enable_backward": False, "optimization_level": 3})

__all__ = ["box_box", "col"]


_mat43 = wp.types.matrix(shape=(4, 3), dtype=wp.float32)
_HALF_HEIGHT = wp.constant(wp.vec3(1.0, 1.0, 0.5))  # a face point to halfway between it and the face


@wp.struct
class _Manifold:
    """Up to five contact points of a face contact, in the reference face's frame (u, v, height
    above the face): the deepest point, and the extreme points along the face's diagonals (so a
    square contact keeps its four corners)."""

    pos: _mat43
    score: wp.vec4
    deep_pos: wp.vec3


@wp.func(inline=True)
def _manifold_add(mf: _Manifold, p: wp.vec3, ok: bool, margin: float) -> _Manifold:
    """Keep face point ``p`` = (u, v, height) if ``ok`` and it is within ``margin`` of the face."""
    out = mf
    if ok and p[2] < margin:
        s = wp.vec4(p[0] + p[1], p[0] - p[1], -p[0] + p[1], -p[0] - p[1])
        for k in range(4):
            if s[k] > out.score[k]:
                out.score[k] = s[k]
                out.pos[k] = p
        if p[2] < out.deep_pos[2]:
            out.deep_pos = p
    return out


@wp.func(inline=True)
def _edge_crossings(mf: _Manifold, p0: wp.vec3, p1: wp.vec3, hu: float, hv: float, margin: float) -> _Manifold:
    """Add the points where the incident edge p0-p1 (face points) crosses the four edge lines of the
    reference face (half sizes ``hu``, ``hv``) within that face."""
    out = mf
    tol = 1.0e-6
    d = p1 - p0
    for side in range(4):
        a = side / 2  # the coordinate the edge line bounds (u, then v)
        b = 1 - a
        lim = hu
        other = hv
        if a == 1:
            lim = hv
            other = hu
        bound = lim * (2.0 * float(side & 1) - 1.0)
        crosses = wp.abs(d[a]) > 1.0e-12
        s = (bound - p0[a]) / wp.where(crosses, d[a], 1.0)
        p = p0 + d * s
        ok = crosses and s >= 0.0 and s <= 1.0 and wp.abs(p[b]) <= other + tol
        out = _manifold_add(out, p, ok, margin)
    return out


@wp.func(inline=True)
def _emit_manifold(
    n: int,
    w: int,
    mf: _Manifold,
    fc: wp.vec3,
    to_face: wp.mat33,
    flip: float,
    g1: int,
    g2: int,
    margin: float,
    out: ContactSlots,
) -> int:
    """Write a face contact's points: the deepest (unless it is one of the extremes, as a polygon's
    deepest vertex need not be), then the distinct extremes, each halfway between the incident
    point and the reference face (center ``fc``; ``to_face``: rows u, v and the normal ``nr``),
    normal ``flip * nr``."""
    to_world = wp.transpose(to_face)
    nr = to_face[2]
    if mf.deep_pos[2] < 1.0e29:
        extreme = int(0)
        for k2 in range(4):
            if wp.length(mf.pos[k2] - mf.deep_pos) < 1.0e-7:
                extreme = 1
        if extreme == 0:
            p = mf.deep_pos
            n = emit(n, w, fc + to_world * wp.cw_mul(p, _HALF_HEIGHT), nr * flip, p[2], g1, g2, margin, out)
    for k2 in range(4):
        if mf.score[k2] > -1.0e29:
            dup = int(0)
            for k3 in range(k2):
                if wp.length(mf.pos[k3] - mf.pos[k2]) < 1.0e-7:
                    dup = 1
            if dup == 0:
                p = mf.pos[k2]
                n = emit(n, w, fc + to_world * wp.cw_mul(p, _HALF_HEIGHT), nr * flip, p[2], g1, g2, margin, out)
    return n


@wp.func
def _box_face_contacts(
    n: int,
    w: int,
    cr: wp.vec3,
    rr: wp.mat33,
    sr: wp.vec3,
    k: int,
    nr: wp.vec3,
    ci: wp.vec3,
    ri: wp.mat33,
    si: wp.vec3,
    flip: float,
    g1: int,
    g2: int,
    margin: float,
    out: ContactSlots,
) -> int:
    """Contacts of the incident box (center ``ci``, rotation ``ri``, half extents ``si``) against face
    ``k`` of the reference box (``cr``, ``rr``, ``sr``), whose outward normal ``nr`` points toward the
    incident box: the vertices of the incident face clipped to the reference face (incident corners
    inside it, reference corners inside the incident face, and edge crossings), reduced to four. The
    contact normal is ``flip * nr`` (from geom1 to geom2).

    The clipping runs in the reference face's frame (u, v, height along ``nr``), and every candidate
    point is offered to the manifold with a flag rather than under a branch: Warp merges a struct
    assigned inside a branch by copying it whole, which here would cost more than the geometry."""
    ku = (k + 1) % 3
    kv = (k + 2) % 3
    fc = cr + nr * sr[k]  # reference face center
    u = col(rr, ku)
    v = col(rr, kv)
    hu = sr[ku]
    hv = sr[kv]
    to_face = wp.matrix_from_rows(u, v, nr)  # world to the face's frame
    # incident face: the face of the other box whose normal is most opposed to nr
    ni_local = wp.transpose(ri) * nr  # nr in the incident box's frame
    j = int(0)
    for a in range(1, 3):
        if wp.abs(ni_local[a]) > wp.abs(ni_local[j]):
            j = a
    sj = float(-1.0)
    if ni_local[j] <= 0.0:
        sj = 1.0
    j1 = (j + 1) % 3
    j2 = (j + 2) % 3
    # the incident face's center, normal and half edges in the reference face's frame
    ic = to_face * (ci + col(ri, j) * (sj * si[j]) - fc)
    ni = to_face * col(ri, j) * sj
    e1 = to_face * col(ri, j1)
    e2 = to_face * col(ri, j2)
    h1 = si[j1]
    h2 = si[j2]
    tol = 1.0e-6
    mf = _Manifold()
    mf.score = wp.vec4(-1.0e30)
    mf.deep_pos = wp.vec3(0.0, 0.0, 1.0e30)
    # incident corners in order (-,-), (+,-), (+,+), (-,+), so corner m and m + 1 share an edge
    c0 = ic - e1 * h1 - e2 * h2
    c1 = ic + e1 * h1 - e2 * h2
    c2 = ic + e1 * h1 + e2 * h2
    c3 = ic - e1 * h1 + e2 * h2
    corners = wp.matrix_from_rows(c0, c1, c2, c3)
    for m in range(4):
        # incident corner inside the reference face, in the order of the reference corners below
        p = corners[m ^ (m >> 1)]
        mf = _manifold_add(mf, p, wp.abs(p[0]) <= hu + tol and wp.abs(p[1]) <= hv + tol, margin)
        # reference corner, projected along nr onto the incident plane, inside the incident face
        sa = 2.0 * float(m & 1) - 1.0
        sb = 2.0 * float((m >> 1) & 1) - 1.0
        r = wp.vec3(sa * hu, sb * hv, 0.0)
        r[2] = wp.dot(ic - r, ni) / ni[2]
        inside = wp.abs(wp.dot(r - ic, e1)) <= h1 + tol and wp.abs(wp.dot(r - ic, e2)) <= h2 + tol
        mf = _manifold_add(mf, r, inside, margin)
        # incident edge m crossing the reference edges
        mf = _edge_crossings(mf, corners[m], corners[(m + 1) % 4], hu, hv, margin)
    return _emit_manifold(n, w, mf, fc, to_face, flip, g1, g2, margin, out)


@wp.func
def col(r: wp.mat33, k: int) -> wp.vec3:
    return wp.vec3(r[0, k], r[1, k], r[2, k])


APART_ITERATIONS = 64  # most rounds of alternating projection between separated boxes
APART_STILL = 1.0e-7  # m: the projection has converged once a round moves its points less than this
APART_TOL = 1.0e-6  # m: a distance this much above the boxes' separation along the best axis is not it
MOST = MOST_CONTACTS[(BOX, BOX)]  # contacts a box pair may emit (the budget is sized by it)


@wp.func
def _clamp_to(x: wp.vec3, s: wp.vec3) -> wp.vec3:
    """``x`` clamped to the box ``[-s, s]``."""
    return wp.vec3(wp.clamp(x[0], -s[0], s[0]), wp.clamp(x[1], -s[1], s[1]), wp.clamp(x[2], -s[2], s[2]))


@wp.func
def _feature_step(
    c1: wp.vec3, r1: wp.mat33, s1: wp.vec3, x: wp.vec3, c2: wp.vec3, r2: wp.mat33, s2: wp.vec3, y: wp.vec3
):
    """A step of the closest points ``x`` (box 1's coordinates) and ``y`` (box 2's) of an active-set
    method: the coordinates at a bound stay, and the others (at most three: an edge and an edge, a
    corner and a face, ...) move toward the closest points of the two features they span (least
    squares) until one reaches its bound. Unchanged where more than three are free or the features
    are nearly parallel."""
    free = int(0)
    for i in range(3):
        if wp.abs(x[i]) < s1[i]:
            free += 1
        if wp.abs(y[i]) < s2[i]:
            free += 1
    if free == 0 or free > 3:
        return x, y
    dirs = wp.mat33(0.0)  # row k: the world direction of unknown k
    now = wp.vec3(0.0)  # the unknowns' current values
    bound = wp.vec3(1.0)  # and their bounds (half extents)
    at1 = wp.vec3i(-1)  # the unknown of each coordinate (-1: held at its bound)
    at2 = wp.vec3i(-1)
    gap = c1 - c2  # p1 - p2 with every unknown at 0
    k = int(0)
    for i in range(3):
        if wp.abs(x[i]) < s1[i]:
            dirs[k] = col(r1, i)
            now[k] = x[i]
            bound[k] = s1[i]
            at1[i] = k
            k += 1
        else:
            gap += col(r1, i) * x[i]
    for j in range(3):
        if wp.abs(y[j]) < s2[j]:
            dirs[k] = -col(r2, j)
            now[k] = y[j]
            bound[k] = s2[j]
            at2[j] = k
            k += 1
        else:
            gap -= col(r2, j) * y[j]
    gram = dirs * wp.transpose(dirs)
    for a in range(k, 3):
        gram[a, a] = 1.0
    if wp.determinant(gram) < 1.0e-6:
        return x, y
    best = -(wp.inverse(gram) * (dirs * gap))
    # toward the features' closest points until the first unknown reaches its bound (the distance
    # falls all the way: it is convex, least at ``best``)
    t = float(1.0)
    for a in range(k):
        if best[a] > bound[a]:
            t = wp.min(t, (bound[a] - now[a]) / (best[a] - now[a]))
        elif best[a] < -bound[a]:
            t = wp.min(t, (-bound[a] - now[a]) / (best[a] - now[a]))
    u = _clamp_to(now + (best - now) * t, bound)
    xs = x
    ys = y
    for i in range(3):
        if at1[i] >= 0:
            xs[i] = u[at1[i]]
        if at2[i] >= 0:
            ys[i] = u[at2[i]]
    return xs, ys


@wp.func
def _closest_points(
    start: wp.vec3, c1: wp.vec3, r1: wp.mat33, s1: wp.vec3, c2: wp.vec3, r2: wp.mat33, s2: wp.vec3
):
    """The closest points (on box 1, on box 2) of two separated boxes from ``start`` (a point of box
    2), and whether they converged: alternating projection, which between convex sets converges to
    them but creeps along nearly parallel edges, every fourth round a ``_feature_step`` (kept where
    it brings the points nearer). Not converged, the points are still the boxes', nearer than at
    the start."""
    p2 = start
    x = _clamp_to(wp.transpose(r1) * (p2 - c1), s1)  # coordinates in box 1's frame, y in box 2's
    p1 = c1 + r1 * x
    converged = bool(False)
    for it in range(APART_ITERATIONS):
        y = _clamp_to(wp.transpose(r2) * (p1 - c2), s2)
        q2 = c2 + r2 * y
        x = _clamp_to(wp.transpose(r1) * (q2 - c1), s1)
        q1 = c1 + r1 * x
        moved = wp.length(q2 - p2) + wp.length(q1 - p1)
        p1 = q1
        p2 = q2
        if moved < APART_STILL:
            converged = True
            break
        if it % 4 == 3:
            xs, ys = _feature_step(c1, r1, s1, x, c2, r2, s2, y)
            a = c1 + r1 * xs
            b = c2 + r2 * ys
            if wp.length(b - a) < wp.length(p2 - p1):
                x = xs
                y = ys
                p1 = a
                p2 = b
    return p1, p2, converged


@wp.func
def _apart_contact(
    n: int, w: int, p1: wp.vec3, p2: wp.vec3, g1: int, g2: int, margin: float, out: ContactSlots
) -> int:
    """The contact of separated boxes whose closest points are ``p1`` (box 1) and ``p2`` (box 2),
    into slot ``n``."""
    gap = p2 - p1
    dist = wp.length(gap)
    if dist < 1.0e-9:
        return n
    return emit(n, w, 0.5 * (p1 + p2), gap / dist, dist, g1, g2, margin, out)


@wp.func
def _nearest(w: int, n0: int, n: int, out: ContactSlots) -> float:
    """The smallest distance of env ``w``'s contacts ``n0`` to ``n`` (those within the budget); 1e30 if none."""
    near = float(1.0e30)
    for c in range(n0, wp.min(n, out.pos.shape[1])):
        near = wp.min(near, out.dist[w, c])
    return near


@wp.func
def _edge_edge_contact(
    n: int,
    w: int,
    c1: wp.vec3,
    r1: wp.mat33,
    s1: wp.vec3,
    c2: wp.vec3,
    r2: wp.mat33,
    s2: wp.vec3,
    idx: int,
    axis: wp.vec3,
    best: float,
    g1: int,
    g2: int,
    margin: float,
    out: ContactSlots,
) -> int:
    """The contact of an edge-edge separating axis ``axis`` (from box 1 toward box 2, the cross
    product of box 1's axis ``idx / 3`` and box 2's ``idx % 3``; ``best``: the separation along it):
    the midpoint of the closest points of the edge of each box that reaches furthest toward the
    other. ``r1``, ``r2``: the boxes' rotation matrices."""
    i = idx / 3
    j = idx % 3
    p1 = c1
    p2 = c2
    for k in range(3):
        a1 = col(r1, k)
        a2 = col(r2, k)
        if k != i:
            p1 = p1 + a1 * (s1[k] * wp.sign(wp.dot(a1, axis)))
        if k != j:
            p2 = p2 - a2 * (s2[k] * wp.sign(wp.dot(a2, axis)))
    ei = col(r1, i) * s1[i]
    ej = col(r2, j) * s2[j]
    st = segments_closest_t(p1 - ei, p1 + ei, p2 - ej, p2 + ej)
    pa = p1 - ei + ei * (2.0 * st[0])
    pb = p2 - ej + ej * (2.0 * st[1])
    if best > 0.0 and wp.length(pb - pa) > best + APART_TOL:
        # apart, and the edges' closest points lie at an end of one: the boxes' closest points are
        # elsewhere (a corner against an edge or a face), farther apart than the separation
        ca, cb, exact = _closest_points(pb, c1, r1, s1, c2, r2, s2)
        if exact:  # else the separation, which is never more than the distance, stands
            return _apart_contact(n, w, ca, cb, g1, g2, margin, out)
    return emit(n, w, 0.5 * (pa + pb), axis, best, g1, g2, margin, out)


@wp.func
def box_box(
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
    a small tolerance, which keeps resting face contacts from flickering to edge contacts.

    Boxes apart by less than the margin (speculative contacts, whose distance is how far they may
    close in a step) have the separation along that axis only as a lower bound of their distance:
    where the face points or the two edges do not reach it, the boxes' closest points
    (``_closest_points``) give the contact at their distance (or, where those have not converged,
    the separation stands: short, never long)."""
    d = c2 - c1
    r1 = wp.quat_to_matrix(q1)  # columns: the boxes' axes in the world
    r2 = wp.quat_to_matrix(q2)
    # the 15 separations from box 2's axes in box 1's frame (rel[i, j] = a_i . b_j) and the centers'
    # offset in each frame: a few dozen products where world axes and their extents take hundreds
    rel = wp.transpose(r1) * r2
    ab = wp.mat33(
        wp.abs(rel[0, 0]), wp.abs(rel[0, 1]), wp.abs(rel[0, 2]),
        wp.abs(rel[1, 0]), wp.abs(rel[1, 1]), wp.abs(rel[1, 2]),
        wp.abs(rel[2, 0]), wp.abs(rel[2, 1]), wp.abs(rel[2, 2]),
    )  # fmt: skip
    d1 = wp.transpose(r1) * d
    d2 = wp.transpose(r2) * d
    best = float(-1.0e30)
    kind = int(0)  # 0: face of box 1, 1: face of box 2, 2: edge-edge
    idx = int(0)
    for k in range(3):
        sep = wp.abs(d1[k]) - s1[k] - (s2[0] * ab[k, 0] + s2[1] * ab[k, 1] + s2[2] * ab[k, 2])
        if sep > best:
            best = sep
            kind = 0
            idx = k
    for k in range(3):
        sep = wp.abs(d2[k]) - s2[k] - (s1[0] * ab[0, k] + s1[1] * ab[1, k] + s1[2] * ab[2, k])
        if sep > best + 1.0e-6:
            best = sep
            kind = 1
            idx = k
    if best >= margin:
        return n  # a face axis separates them: the edge axes could only separate them further
    face_best = best
    for i in range(3):
        i1 = (i + 1) % 3
        i2 = (i + 2) % 3
        for j in range(3):
            # a_i x b_j in box 1's frame is e_i x rel[:, j]; box 2's extent along it takes b_j's two
            # other axes, whose components along a_i x b_j are those of a_i along the third
            j1 = (j + 1) % 3
            j2 = (j + 2) % 3
            length = wp.sqrt(rel[i1, j] * rel[i1, j] + rel[i2, j] * rel[i2, j])
            if length > 1.0e-4:
                reach = s1[i1] * ab[i2, j] + s1[i2] * ab[i1, j] + s2[j1] * ab[i, j2] + s2[j2] * ab[i, j1]
                sep = (wp.abs(d1[i2] * rel[i1, j] - d1[i1] * rel[i2, j]) - reach) / length
                if sep > best and sep > face_best + 1.0e-4:
                    best = sep
                    kind = 2
                    idx = i * 3 + j
    # each kind reads its own axes: an edge pair's idx (0-8) is no column index, and reading past a
    # matrix's end would let the compiler assume idx < 3 everywhere
    if kind == 0:
        axis = col(r1, idx)
    elif kind == 1:
        axis = col(r2, idx)
    else:
        axis = wp.normalize(wp.cross(col(r1, idx / 3), col(r2, idx % 3)))
    if best >= margin:
        return n
    if wp.dot(d, axis) < 0.0:
        axis = -axis  # from box 1 toward box 2
    if kind < 2:
        n0 = n
        if kind == 0:
            n = _box_face_contacts(n, w, c1, r1, s1, idx, axis, c2, r2, s2, 1.0, g1, g2, margin, out)
        else:
            n = _box_face_contacts(n, w, c2, r2, s2, idx, -axis, c1, r1, s1, -1.0, g1, g2, margin, out)
        if best <= 0.0:
            return n
        # apart: the face points are at their own distances, but the boxes' closest points may lie
        # outside the faces' overlap (boxes offset diagonally, closest at an edge or a corner)
        near = _nearest(w, n0, n, out)
        if near <= best + APART_TOL:
            return n
        p1, p2, _exact = _closest_points(c2, c1, r1, s1, c2, r2, s2)
        if wp.length(p2 - p1) >= near - APART_TOL:
            return n
        if n - n0 < MOST:
            return _apart_contact(n, w, p1, p2, g1, g2, margin, out)
        _apart_contact(n0, w, p1, p2, g1, g2, margin, out)  # in place of the face contact's nearest point
        return n
    return _edge_edge_contact(n, w, c1, r1, s1, c2, r2, s2, idx, axis, best, g1, g2, margin, out)
