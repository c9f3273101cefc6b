"""The model's candidate pairs, emitted: the collision detection of the step kernel.

Each candidate pair (``pairs.candidate_pairs``) is written out in a fixed order (``emit_collide``):
the geoms' types, ids and local frames are constants, the bodies' poses are the registers the
forward kinematics just computed (a body fixed in the world, such as the floor, is folded to
constants), so a pair whose bounding spheres are apart (most pairs, most steps) costs a few
operations before ``narrow_phase.pair_apart`` rules it out; the others go to
``narrow_phase.narrow_phase``.
"""

from __future__ import annotations

import numpy as np

from ..engine.codegen import Emitter, is_identity_quat, is_zero, quat, vec3
from ..engine.quaternion import qmul_np, rotate_np
from ..engine.tree import Tree
from .pairs import PLANE, candidate_pairs

__all__ = ["emit_collide"]


def _geom_frame(t: Tree, e: Emitter, g: int, k: int) -> None:
    """``_c{k}``, ``_q{k}``: geom ``g``'s world center and orientation (``_z1``: geom1's z axis)."""
    mjm = t.m.mjmodel
    b = int(mjm.geom_bodyid[g])
    pos, rot = mjm.geom_pos[g], mjm.geom_quat[g]
    if not t.dynamic[b]:  # fixed in the world: constants
        q = qmul_np(t.static_quat[b], rot)
        e(f"_c{k} = {vec3(t.static_pos[b] + rotate_np(t.static_quat[b], pos))}")
        e(f"_q{k} = {quat(q)}")
        if k == 1:
            e(f"_z1 = {vec3(rotate_np(q / np.linalg.norm(q), np.array([0.0, 0.0, 1.0])))}")
        return
    e(f"_c{k} = " + (f"xp{b}" if is_zero(pos) else f"xp{b} + wp.quat_rotate(xq{b}, {vec3(pos)})"))
    e(f"_q{k} = " + (f"xq{b}" if is_identity_quat(rot) else f"xq{b} * {quat(rot)}"))
    if k == 1:
        e("_z1 = wp.quat_rotate(_q1, wp.vec3(0.0, 0.0, 1.0))")


def emit_collide(t: Tree, e: Emitter, out: str, wanted: str, deep: str) -> None:
    """Env ``w``'s contacts at the poses ``xp{b}``/``xq{b}`` into the slots ``out`` (a ``ContactSlots``), how
    many were found (beyond the budget too) into ``wanted[w]``, the deepest penetration (>= 0)
    into the variable ``deep``. Needs ``geoms`` (the per-env sizes) and ``margin`` in scope."""
    mjm = t.m.mjmodel
    pairs, _unsupported = candidate_pairs(mjm)
    e("_nn = int(0)")
    for g1, g2 in pairs:
        t1, t2 = int(mjm.geom_type[g1]), int(mjm.geom_type[g2])
        e(f"# pair {mjm.geom(g1).name or g1} - {mjm.geom(g2).name or g2}")
        _geom_frame(t, e, int(g1), 1)
        _geom_frame(t, e, int(g2), 2)
        e("_s1 = " + ("wp.vec3(0.0)" if t1 == PLANE else f"geoms.size[w, {g1}]"))  # a plane is infinite
        e(f"_s2 = geoms.size[w, {g2}]")
        args = f"_c1, _q1, _z1, _s1, _c2, _q2, _s2, {g1}, {g2}, margin, {out}"
        e(f"if not pair_apart({t1}, {t2}, _c1, _z1, _s1, _c2, _s2, margin):")
        e(f"    _nn = narrow_phase(_nn, w, {t1}, {t2}, {args})")
    e(f"{wanted}[w] = _nn")
    e(f"{deep} = -deepest(w, _nn, {out})")
