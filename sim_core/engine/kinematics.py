"""Kinematics, emitted with the model's constants folded in.

- World poses (``emit_fk``): ``xp{b}`` (vec3) and ``xq{b}`` (``wp.quat``, Warp's (x, y, z, w) order) of
  every moving body, for the getters; joint angles are measured from ``qpos0`` as in MuJoCo and a
  free joint sets its body's pose from ``qpos`` directly.
- Local frames for the dynamics (``emit_segment_transforms``, ``emit_segment_velocities``): each
  segment's transform from its parent and its twist, as symbolic values (see ``symbolic.py``).
"""

from __future__ import annotations

import numpy as np

from ..types import JointType
from .codegen import Emitter, is_identity_quat, is_zero, lit, quat, vec3
from .quaternion import qmul_np, rotate_np
from .segments import Segment
from .symbolic import Val, add, cross, materialize, matmul, matvec, mul, snap, sub, transpose
from .tree import Tree

__all__ = [
    "emit_fk",
    "emit_store_poses",
    "emit_segment_transforms",
    "emit_segment_velocities",
    "motion_to_child",
    "force_to_parent",
]


def _axis_angle_quat(axis: np.ndarray, half: str) -> tuple[str, str]:
    """``wp.quat`` for a rotation by ``2 * half`` about a constant unit ``axis``, zeros folded."""
    comps = [f"{lit(a)} * _s" if a not in (0.0, 1.0) else ("_s" if a == 1.0 else "0.0") for a in axis]
    return f"_s = wp.sin({half})", f"wp.quat({comps[0]}, {comps[1]}, {comps[2]}, wp.cos({half}))"


def emit_fk(t: Tree, e: Emitter) -> None:
    """World body poses ``xp{b}``, ``xq{b}`` from ``q{k}`` (for the getters and rendering)."""
    m = t.m
    for b in range(1, m.nbody):
        if not t.dynamic[b]:
            continue
        p = m.body_parentid[b]
        if t.dynamic[p]:
            pos = (
                f"xp{p}" if is_zero(m.body_pos[b]) else f"xp{p} + wp.quat_rotate(xq{p}, {vec3(m.body_pos[b])})"
            )
            rot = f"xq{p}" if is_identity_quat(m.body_quat[b]) else f"xq{p} * {quat(m.body_quat[b])}"
            e(f"xp{b} = {pos}")
            e(f"xq{b} = {rot}")
        else:  # parent fixed in the world: the frame before the joints is a constant
            e(f"xp{b} = {vec3(t.static_pos[p] + rotate_np(t.static_quat[p], m.body_pos[b]))}")
            e(f"xq{b} = {quat(qmul_np(t.static_quat[p], m.body_quat[b]))}")
        for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]):
            _emit_joint(t, e, b, j)


def _emit_joint(t: Tree, e: Emitter, b: int, j: int) -> None:
    m = t.m
    jt = JointType(int(m.jnt_type[j]))
    a = int(m.jnt_qposadr[j])
    if jt == JointType.FREE:
        e(f"xp{b} = wp.vec3(q{a}, q{a + 1}, q{a + 2})")
        e(f"xq{b} = wp.normalize(wp.quat(q{a + 4}, q{a + 5}, q{a + 6}, q{a + 3}))")
        return
    angle = f"q{a}" if m.qpos0[a] == 0 else f"(q{a} - {lit(m.qpos0[a])})"
    axis = m.jnt_axis[j]
    if jt == JointType.SLIDE:
        e(f"xp{b} = xp{b} + wp.quat_rotate(xq{b}, {vec3(axis)}) * {angle}")
        return
    has_anchor = not is_zero(m.jnt_pos[j])
    anchor = f"xp{b} + wp.quat_rotate(xq{b}, {vec3(m.jnt_pos[j])})" if has_anchor else f"xp{b}"
    if has_anchor:
        e(f"_anc = {anchor}")
    s_line, q_expr = _axis_angle_quat(axis, f"0.5 * {angle}")
    e(s_line)
    e(f"xq{b} = xq{b} * {q_expr}")
    if has_anchor:
        e(f"xp{b} = _anc - wp.quat_rotate(xq{b}, {vec3(m.jnt_pos[j])})")


def emit_store_poses(t: Tree, e: Emitter, xpos: str, xquat: str) -> None:
    """Write every body's pose (static ones as constants) to ``xpos[w, b]``, ``xquat[w, b]``."""
    m = t.m
    for b in range(m.nbody):
        if t.dynamic[b]:
            e(f"{xpos}[w, {b}] = xp{b}")
            e(f"{xquat}[w, {b}] = quat_wxyz(xq{b})")
        else:
            sq = t.static_quat[b] / np.linalg.norm(t.static_quat[b])
            e(f"{xpos}[w, {b}] = {vec3(t.static_pos[b])}")
            e(f"{xquat}[w, {b}] = wp.vec4({lit(sq[0])}, {lit(sq[1])}, {lit(sq[2])}, {lit(sq[3])})")


# ---- local frames for the dynamics ------------------------------------------------------------
# Segment i's transform from its parent: E (rows: child axes in parent coords, i.e. child_from_parent
# rotation) and r (child origin in parent coords). Motion vectors (w, v) and forces (n, f) are
# expressed in the segment's frame about its origin.


def _rot_about_axis(e: Emitter, axis: np.ndarray, angle: str, tag: str) -> list[list[Val]]:
    """Rodrigues' rotation matrix about a constant unit axis by ``angle``, zeros folded."""
    e(f"c{tag} = wp.cos({angle})")
    e(f"s{tag} = wp.sin({angle})")
    ax = [snap(a) for a in axis]
    generic = any(a not in (0.0, 1.0, -1.0) for a in ax) or sum(a != 0.0 for a in ax) > 1
    if generic:
        e(f"omc{tag} = 1.0 - c{tag}")
    k = [[0.0, -ax[2], ax[1]], [ax[2], 0.0, -ax[0]], [-ax[1], ax[0], 0.0]]
    q = [[0.0] * 3 for _ in range(3)]
    for i in range(3):
        for j in range(3):
            if i == j:
                q[i][j] = add(ax[i] * ax[i], mul(snap(1.0 - ax[i] * ax[i]), f"c{tag}"))
            else:
                sym = mul(ax[i] * ax[j], f"omc{tag}") if generic else 0.0
                q[i][j] = add(sym, mul(k[i][j], f"s{tag}"))
    return q


def emit_segment_transforms(segs: list[Segment], e: Emitter) -> list[tuple[list, list]]:
    """(E, r) of every segment from the joint coordinates ``q{k}``."""
    out = []
    for i, s in enumerate(segs):
        a = s.qadr
        if s.kind == "free_t":
            eye = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
            out.append((eye, [f"q{a}", f"q{a + 1}", f"q{a + 2}"]))
            continue
        if s.kind == "free_r":
            norm2 = " + ".join(f"q{a + k} * q{a + k}" for k in range(3, 7))
            e(f"_qi = 1.0 / wp.sqrt({norm2})")
            for k, n in enumerate("wxyz"):
                e(f"{n}{i} = q{a + 3 + k} * _qi")
            w, x, y, z = (f"w{i}", f"x{i}", f"y{i}", f"z{i}")
            rot = [
                [
                    f"1.0 - 2.0 * ({y} * {y} + {z} * {z})",
                    f"2.0 * ({x} * {y} - {w} * {z})",
                    f"2.0 * ({x} * {z} + {w} * {y})",
                ],
                [
                    f"2.0 * ({x} * {y} + {w} * {z})",
                    f"1.0 - 2.0 * ({x} * {x} + {z} * {z})",
                    f"2.0 * ({y} * {z} - {w} * {x})",
                ],
                [
                    f"2.0 * ({x} * {z} - {w} * {y})",
                    f"2.0 * ({y} * {z} + {w} * {x})",
                    f"1.0 - 2.0 * ({x} * {x} + {y} * {y})",
                ],
            ]
            out.append((materialize(e, f"E{i}", transpose(rot)), [0.0, 0.0, 0.0]))
            continue
        angle = f"q{a}" if s.qpos0 == 0 else f"(q{a} - {lit(s.qpos0)})"
        r_pre = [[snap(x) for x in row] for row in s.R_pre]
        p_pre = [snap(x) for x in s.p_pre]
        if s.kind == "slide":
            rot = r_pre
            ra = [snap(x) for x in s.R_pre @ s.axis]
            r = [add(p_pre[k], mul(ra[k], angle)) for k in range(3)]
        else:
            q = _rot_about_axis(e, s.axis, angle, str(i))
            rot = matmul(r_pre, q)
            r = p_pre
            if np.any(s.anchor != 0):  # origin moves when rotating about an offset anchor
                j = [snap(x) for x in s.anchor]
                shift = [sub(j[k], v) for k, v in enumerate(matvec(q, j))]
                r = [add(p_pre[k], v) for k, v in enumerate(matvec(r_pre, shift))]
        out.append((materialize(e, f"E{i}", transpose(rot)), materialize(e, f"r{i}", r)))
    return out


def motion_to_child(x: tuple[list, list], w: list[Val], v: list[Val]) -> tuple[list, list]:
    """Transform a motion vector from the parent frame into the child's: (E w, E (v - r x w))."""
    E, r = x
    return matvec(E, w), matvec(E, [sub(v[k], c) for k, c in enumerate(cross(r, w))])


def force_to_parent(x: tuple[list, list], n: list[Val], f: list[Val]) -> tuple[list, list]:
    """Transform a force from the child frame into the parent's: (E^T n + r x E^T f, E^T f)."""
    E, r = x
    et = transpose(E)
    fp = matvec(et, f)
    return [add(a, b) for a, b in zip(matvec(et, n), cross(r, fp), strict=True)], fp


def motion_cross(aw, av, bw, bv) -> tuple[list, list]:
    """(aw, av) x (bw, bv) = (aw x bw, aw x bv + av x bw)."""
    return cross(aw, bw), [add(p, q) for p, q in zip(cross(aw, bv), cross(av, bw), strict=True)]


def emit_segment_velocities(segs: list[Segment], e: Emitter, X: list) -> tuple[list, list]:
    """Segment twists ``v[i] = (w, v)`` and velocity-product accelerations ``c[i]`` (symbolic)."""
    vel, cvp = [], []
    for i, s in enumerate(segs):
        if s.parent < 0:
            xw, xv = [0.0] * 3, [0.0] * 3
        else:
            pw, pv = vel[s.parent]
            xw, xv = motion_to_child(X[i], pw, pv)
        jw, jv = [0.0] * 3, [0.0] * 3
        for k, d in enumerate(s.dofs):
            sw, sv = [snap(x) for x in s.S[k][:3]], [snap(x) for x in s.S[k][3:]]
            jw = [add(jw[n], mul(sw[n], f"v{d}")) for n in range(3)]
            jv = [add(jv[n], mul(sv[n], f"v{d}")) for n in range(3)]
        xw, xv = materialize(e, f"xw{i}", xw), materialize(e, f"xv{i}", xv)
        cw, cv = motion_cross(xw, xv, jw, jv)
        cvp.append((materialize(e, f"cw{i}", cw), materialize(e, f"cv{i}", cv)))
        vel.append(
            (
                materialize(e, f"vw{i}", [add(a, b) for a, b in zip(xw, jw, strict=True)]),
                materialize(e, f"vv{i}", [add(a, b) for a, b in zip(xv, jv, strict=True)]),
            )
        )
    return vel, cvp
