"""Forward kinematics and velocities, emitted per body with the model's frames folded in.

Emitted names, for body ``b`` and dof ``i``: ``xp{b}`` (vec3 world position of the body frame),
``xq{b}`` (``wp.quat``, Warp's (x, y, z, w) order), ``cd{i}`` (the dof's motion subspace, a twist about
the world origin), ``cv{b}`` (body twist) and ``cdd{i}`` (time derivative of ``cd{i}``). Joint angles
are measured from ``qpos0`` as in MuJoCo; a free joint sets the body pose from its ``qpos`` directly.
"""

from __future__ import annotations

import numpy as np

from .codegen import Emitter, Tree, is_identity_quat, is_zero, lit, qmul_np, quat, rotate_np, vec3
from .types import JointType

__all__ = ["emit_fk", "emit_velocities", "emit_store_poses"]

_E = ("wp.vec3(1.0, 0.0, 0.0)", "wp.vec3(0.0, 1.0, 0.0)", "wp.vec3(0.0, 0.0, 1.0)")


def _axis_angle_quat(axis: np.ndarray, half: str) -> tuple[str, str]:
    """``wp.quat`` for a rotation by ``2 * half`` about a constant unit ``axis``, zeros folded."""
    comps = [f"{lit(a)} * _s" if a not in (0.0, 1.0) else ("_s" if a == 1.0 else "0.0") for a in axis]
    return f"_s = wp.sin({half})", f"wp.quat({comps[0]}, {comps[1]}, {comps[2]}, wp.cos({half}))"


def emit_fk(t: Tree, e: Emitter, *, with_dofs: bool) -> None:
    """Body poses ``xp{b}``, ``xq{b}`` from ``q{k}``; with ``with_dofs``, also ``cd{i}``."""
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
            _emit_joint(t, e, b, j, with_dofs)
        if not with_dofs:
            continue
        if t.root[b] == b:
            e(f"ref{b} = xp{b}")
        for i in t.body_dofs[b]:  # motion subspaces about the tree's reference point
            if t.dof_translational[i]:
                e(f"cd{i} = spatial(wp.vec3(0.0), _ax{i})")
            else:
                e(f"cd{i} = spatial(_ax{i}, wp.cross(_anc{i} - ref{t.root[b]}, _ax{i}))")


def _emit_joint(t: Tree, e: Emitter, b: int, j: int, with_dofs: bool) -> None:
    m = t.m
    jt = JointType(int(m.jnt_type[j]))
    a, i = int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
    if jt == JointType.FREE:
        e(f"xp{b} = wp.vec3(q{a}, q{a + 1}, q{a + 2})")
        e(f"xq{b} = wp.normalize(wp.quat(q{a + 4}, q{a + 5}, q{a + 6}, q{a + 3}))")
        if with_dofs:
            for k in range(3):
                e(f"_ax{i + k} = {_E[k]}")
                e(f"_ax{i + 3 + k} = wp.quat_rotate(xq{b}, {_E[k]})")
                e(f"_anc{i + 3 + k} = xp{b}")
        return
    angle = f"q{a}" if m.qpos0[a] == 0 else f"(q{a} - {lit(m.qpos0[a])})"
    axis = m.jnt_axis[j]
    if jt == JointType.SLIDE:
        e(f"_ax{i} = wp.quat_rotate(xq{b}, {vec3(axis)})")
        e(f"xp{b} = xp{b} + _ax{i} * {angle}")
        return
    has_anchor = not is_zero(m.jnt_pos[j])
    anchor = f"xp{b} + wp.quat_rotate(xq{b}, {vec3(m.jnt_pos[j])})" if has_anchor else f"xp{b}"
    if with_dofs or has_anchor:
        e(f"_anc{i} = {anchor}")
    if with_dofs:
        e(f"_ax{i} = wp.quat_rotate(xq{b}, {vec3(axis)})")
    s_line, q_expr = _axis_angle_quat(axis, f"0.5 * {angle}")
    e(s_line)
    e(f"xq{b} = xq{b} * {q_expr}")
    if has_anchor:
        e(f"xp{b} = _anc{i} - wp.quat_rotate(xq{b}, {vec3(m.jnt_pos[j])})")


def emit_velocities(t: Tree, e: Emitter) -> None:
    """Body twists ``cv{b}`` and dof derivatives ``cdd{i}`` from ``v{i}`` (MuJoCo's comVel).

    Dofs are taken in groups that share the twist they are crossed with: one group per hinge or
    slide; a free joint's three translations (derivative 0: world axes), then its three rotations
    together (body axes, so their own rotation cancels: sum_k (w x R e_k) w_k = w x w = 0).
    """
    m = t.m
    for b in range(1, m.nbody):
        if not t.dynamic[b]:
            continue
        p = m.body_parentid[b]
        cur = f"cv{p}" if t.dynamic[p] else None
        groups = []
        for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]):
            i = int(m.jnt_dofadr[j])
            if m.jnt_type[j] == JointType.FREE:
                groups += [(list(range(i, i + 3)), True), (list(range(i + 3, i + 6)), False)]
            else:
                groups.append(([i], False))
        for dofs, translation in groups:
            for i in dofs:
                if cur is None or translation:
                    e(f"cdd{i} = spatial(wp.vec3(0.0), wp.vec3(0.0))")
                else:
                    e(f"cdd{i} = motion_cross({cur}, cd{i})")
            terms = ([cur] if cur else []) + [f"cd{i} * v{i}" for i in dofs]
            e(f"cv{b} = {' + '.join(terms)}")
            cur = f"cv{b}"
        if not groups:
            e(f"cv{b} = {cur}")


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
