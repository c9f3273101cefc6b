"""The contacts' rows, emitted for the model: the per-contact half of the contact solve.

For each contact of a substep (``solver.py`` has the method) the generated step computes,
one env per thread:

- ``J``: its three rows (normal, t1, t2) per dof, the point velocity of geom2's body minus
  geom1's at the contact point, projected on the contact frame. The chain of dofs moving each
  colliding body is unrolled, its world axes and anchors computed once per substep from the poses.
- ``A^-1 J^T`` by the packed ``L^T D L`` factor the velocity update left in registers, unrolled
  per kinematic tree the contact touches (the factor is block-diagonal by tree).
- its 3x3 block of ``W = J A^-1 J^T`` (the normal rows' entries of ``W`` between rows are built by
  the solver when its rounds start, ``_normal_matrix``, through ``_normal_pair`` emitted here).

A contact apart by more than its bodies close in two substeps sits out (``idle_row``). The rest of
the row (warm start, targets) and the rounds of the solve are generic Warp functions
(``start_row``, ``solve_contacts``). Written out rather than walking the tree tables at run time,
since the rows are a large share of a step with a cube on the floor.
"""

from __future__ import annotations

import numpy as np

from ..engine.codegen import Emitter, is_zero, vec3
from ..engine.dynamics import emit_solve
from ..engine.integrator import factor_size
from ..engine.tree import Tree
from ..types import JointType
from .pairs import colliding_bodies

__all__ = ["emit_contact_rows", "emit_dof_helpers"]


def _chains(t: Tree) -> dict[int, list[int]]:
    """Each moving body with colliding geoms: the dofs that move it, deepest first."""
    out = {}
    for b in colliding_bodies(t.m.mjmodel):
        chain, d = [], t.deepest_dof(b)
        while d >= 0:
            chain.append(d)
            d = int(t.m.dof_parentid[d])
        if chain:
            out[b] = chain
    return out


def _trees(t: Tree, dofs: set[int]) -> list[tuple[int, int]]:
    """The dof ranges [start, end) of the kinematic trees holding ``dofs``, in order."""
    return sorted({t.dof_tree[d] for d in dofs})


def _dof_kind(t: Tree, d: int) -> tuple[JointType, int]:
    j = int(t.m.dof_jntid[d])
    return JointType(int(t.m.jnt_type[j])), d - int(t.m.jnt_dofadr[j])


def _emit_dof_axes(t: Tree, e: Emitter, dofs: list[int]) -> None:
    """``ax{d}``, ``an{d}``: each dof's world axis and a point on it (hinges) from the poses
    ``xp{b}``/``xq{b}``; a free joint's translations have the world axes, folded in later."""
    m = t.m
    for d in dofs:
        jt, k = _dof_kind(t, d)
        b, j = int(m.dof_bodyid[d]), int(m.dof_jntid[d])
        if jt == JointType.FREE:
            if k >= 3:
                e(f"ax{d} = wp.quat_rotate(xq{b}, {vec3(np.eye(3)[k - 3])})")
                e(f"an{d} = xp{b}")
            continue
        e(f"ax{d} = wp.quat_rotate(xq{b}, {vec3(m.jnt_axis[j])})")
        if jt != JointType.SLIDE:
            anchor = m.jnt_pos[j]
            e(f"an{d} = " + (f"xp{b}" if is_zero(anchor) else f"xp{b} + wp.quat_rotate(xq{b}, {vec3(anchor)})"))


def _emit_jacobian(t: Tree, e: Emitter, chains: dict[int, list[int]], tree_dofs: list[int]) -> None:
    """``j{d}``: contact ``_c``'s (normal, t1, t2) rows for each dof of the contact trees."""
    for d in tree_dofs:
        e(f"j{d} = wp.vec3(0.0)")
    for side, sign in ((0, "-"), (1, "+")):  # geom2's body counts positive
        e(f"_body = cm.geom_body[_g[{side}]]")
        for n, (b, chain) in enumerate(chains.items()):
            e(f"{'if' if n == 0 else 'elif'} _body == {b}:")
            with e.indent():
                for d in chain:
                    jt, k = _dof_kind(t, d)
                    if jt == JointType.FREE and k < 3:
                        e(f"j{d} = j{d} {sign} wp.vec3(_n[{k}], _t1[{k}], _t2[{k}])")
                        continue
                    jp = f"ax{d}" if jt == JointType.SLIDE else f"wp.cross(ax{d}, _p - an{d})"
                    e(f"_jp = {jp}")
                    e(f"j{d} = j{d} {sign} wp.vec3(wp.dot(_n, _jp), wp.dot(_t1, _jp), wp.dot(_t2, _jp))")


def _sum(terms: list[str]) -> str:
    """The sum of ``terms`` as two interleaved partial sums: two chains of dependent adds half as
    long (a dot product over a tree's dofs waited on each add in turn)."""
    if len(terms) < 4:
        return " + ".join(terms) or "0.0"
    return f"({' + '.join(terms[0::2])}) + ({' + '.join(terms[1::2])})"


def _touches(rows: str, s: int, end: int) -> str:
    """Condition: the rows with dof ranges ``rows`` (a ``wp.vec4i``) touch the tree [s, end)."""
    return f"(({rows}[0] == {s} and {rows}[1] == {end}) or ({rows}[2] == {s} and {rows}[3] == {end}))"


def emit_contact_rows(t: Tree, e: Emitter) -> None:
    """For each of the ``_ncs`` contacts in ``cd.slots``: its rows and blocks of ``W`` into ``cd``,
    its warm start applied to ``cd.vel`` (``start_row``), or ``idle_row`` if it sits out this
    substep. Needs in scope the poses ``xp{b}``/``xq{b}``, the velocities ``v{i}`` (and ``v0_{i}``,
    at the start of the substep) and the factor."""
    chains = _chains(t)
    trees = _trees(t, {d for chain in chains.values() for d in chain})
    tree_dofs = [d for s, end in trees for d in range(s, end)]
    _emit_dof_axes(t, e, sorted({d for chain in chains.values() for d in chain}))
    e("for _c in range(_ncs):")
    with e.indent():
        e("_g = cd.slots.geom[w, _c]")
        e("_p = cd.slots.pos[w, _c]")
        e("_n = cd.slots.normal[w, _c]")
        e("_t1 = contact_tangent(_n)")
        e("_t2 = wp.cross(_n, _t1)")
        e("cd.row_key[w, _c] = _g")
        _emit_jacobian(t, e, chains, tree_dofs)
        e("_ta = cm.body_tree[cm.geom_body[_g[0]]]")
        e("_tb = cm.body_tree[cm.geom_body[_g[1]]]")
        e("if _tb[0] == _ta[0] and _tb[1] == _ta[1]:")
        e("    _tb = wp.vec2i(0, 0)  # one tree: visit its dofs once")
        e("_rt = wp.vec4i(_ta[0], _ta[1], _tb[0], _tb[1])")
        # a speculative contact that its bodies' velocities would not close within two substeps
        # sits out this one: no dofs, never active, no friction
        e("_idle = False")
        e("_dist = cd.slots.dist[w, _c]")
        e("if _dist > 0.0:")
        with e.indent():
            e("_vn = " + _sum([f"j{d}[0] * v{d}" for d in tree_dofs]))
            e("_idle = _dist + 2.0 * dt * _vn > 0.0")
        e("if _idle:")
        e("    idle_row(cd, w, _c)")
        e("else:")
        with e.indent():
            e("cd.trees[w, _c] = _rt")
            e("_blk = wp.mat33(0.0)")
            for s, end in trees:
                dofs = range(s, end)
                e(f"if {_touches('_rt', s, end)}:")
                with e.indent():
                    emit_solve(t, e, [f"j{d}" for d in range(t.m.nv)], "aj", dofs)
                    for d in dofs:
                        e(f"cd.jac[w, _c, {d}] = j{d}")
                        e(f"cd.ajac[w, _c, {d}] = aj{d}")
                        e(f"_blk = _blk + wp.outer(j{d}, aj{d})")
            e("cd.wblk[w, _c] = _blk")
            e("_vn0 = " + _sum([f"j{d}[0] * v0_{d}" for d in tree_dofs]))
            e("start_row(cm, cd, w, _c, _dist, _vn0, dt, max_pen, vec_nv())")


def emit_dof_helpers(t: Tree, e: Emitter) -> None:
    """The contact solver's dof loops (``solver.DOF_HELPERS``, the signatures listed there) for this
    model: over the dofs of each kinematic tree a contact can touch that row ``c`` touches
    (``trees[w, c]``), unrolled, instead of over all of the model's dofs."""
    chains = _chains(t)
    trees = _trees(t, {d for chain in chains.values() for d in chain})
    arrays = "trees: wp.array2d(dtype=wp.vec4i), w: int, c: int"
    jv = f"jac: wp.array3d(dtype=wp.vec3), v: wp.array2d(dtype=wp.float32), {arrays}"
    av = f"ajac: wp.array3d(dtype=wp.vec3), vel: wp.array2d(dtype=wp.float32), {arrays}"
    for name, args, ret, zero, term in (
        ("_rows_dot", jv, "wp.vec3", "wp.vec3(0.0)", "jac[w, c, {d}] * v[w, {d}]"),
        ("_normal_dot", jv, "float", "float(0.0)", "jac[w, c, {d}][0] * v[w, {d}]"),
    ):
        e("@wp.func(inline=True)")
        e(f"def {name}({args}, dofs: vec_nv) -> {ret}:")
        with e.indent():
            e("t = trees[w, c]")
            e(f"u = {zero}")
            e(f"u2 = {zero}")
            for s, end in trees:
                e(f"if {_touches('t', s, end)}:")
                with e.indent():
                    for k, d in enumerate(range(s, end)):  # two interleaved partial sums
                        e(f"{'u' if k % 2 == 0 else 'u2'} = {'u' if k % 2 == 0 else 'u2'} + {term.format(d=d)}")
            e("return u + u2")
        e("")
    e("@wp.func(inline=True)")
    pair = f"jac: wp.array3d(dtype=wp.vec3), ajac: wp.array3d(dtype=wp.vec3), {arrays}, b: int"
    e(f"def _normal_pair({pair}, dofs: vec_nv) -> float:")
    with e.indent():
        e("ta = trees[w, c]")
        e("tb = trees[w, b]")
        e("s = float(0.0)")
        for s0, end in trees:
            e(f"if {_touches('ta', s0, end)} and {_touches('tb', s0, end)}:")
            e("    s = s + " + _sum([f"jac[w, c, {d}][0] * ajac[w, b, {d}][0]" for d in range(s0, end)]))
        e("return s")
    e("")
    nfac = factor_size(t)
    e("@wp.func(inline=True)")
    e("def _limit_column(fac: wp.array2d(dtype=wp.float32), w: int, d: int, dofs: vec_nv) -> vec_nv:")
    e(f"    return _unit_solve(vec_fac({', '.join(f'fac[w, {k}]' for k in range(nfac))}), d)")
    e("")
    for name, arg, term in (
        ("_apply", "dlam: wp.vec3", "wp.dot(ajac[w, c, {d}], dlam)"),
        ("_apply_normal", "dl: float", "ajac[w, c, {d}][0] * dl"),
    ):
        e("@wp.func(inline=True)")
        e(f"def {name}({av}, {arg}, dofs: vec_nv):")
        with e.indent():
            e("t = trees[w, c]")
            for s, end in trees:
                e(f"if {_touches('t', s, end)}:")
                with e.indent():
                    for d in range(s, end):
                        e(f"vel[w, {d}] = vel[w, {d}] + {term.format(d=d)}")
        e("")
