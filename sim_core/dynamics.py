"""Dynamics, emitted per body/dof: body inertias, bias forces (recursive Newton-Euler), the joint-space
mass matrix (composite rigid bodies) and MuJoCo's sparse L^T D L factorization of a tree matrix.

Emitted names: ``mh{b}``, ``mI{b}`` (body first moment and inertia about the origin, mass folded as a
constant), ``bias{i}`` (Coriolis, centrifugal and gravity force on dof i, MuJoCo's ``qfrc_bias``),
``M{i}_{j}`` (mass matrix entry, ``j`` an ancestor of ``i`` or ``i`` itself, armature included),
``a{i}_{j}`` / ``dinv{i}`` (the factorization of a matrix ``A`` with M's sparsity).
"""

from __future__ import annotations

from .codegen import Emitter, Tree, is_identity_quat, is_zero, lit, quat, vec3

__all__ = ["emit_inertias", "emit_bias", "emit_mass_matrix", "emit_factor", "emit_solve"]


def _massive(t: Tree, b: int) -> bool:
    return bool(t.dynamic[b] and t.m.body_mass[b] > 0)


def emit_inertias(t: Tree, e: Emitter) -> None:
    """``mh{b}``, ``mI{b}`` for every moving body with mass, from the current poses."""
    m = t.m
    for b in range(1, m.nbody):
        if not _massive(t, b):
            continue
        mass = lit(m.body_mass[b])
        com = f"xp{b}" if is_zero(m.body_ipos[b]) else f"xp{b} + wp.quat_rotate(xq{b}, {vec3(m.body_ipos[b])})"
        rot = f"xq{b}" if is_identity_quat(m.body_iquat[b]) else f"xq{b} * {quat(m.body_iquat[b])}"
        e(f"_com = {com} - ref{t.root[b]}")
        e(f"mh{b} = {mass} * _com")
        e(f"mI{b} = body_inertia({mass}, _com, wp.quat_to_matrix({rot}), {vec3(m.body_inertia[b])})")


def _subtree_sum(t: Tree, e: Emitter, prefix: str, own: str | None, b: int) -> bool:
    """Emit ``{prefix}{b} = own + sum over children``; return False when it would be zero."""
    terms = [own] if own else []
    terms += [f"{prefix}{c}" for c in t.children[b] if t.dynamic[c] and t.subtree_mass[c] > 0]
    if not terms:
        return False
    e(f"{prefix}{b} = {' + '.join(terms)}")
    return True


def emit_bias(t: Tree, e: Emitter) -> None:
    """``bias{i}``: RNEA with zero joint acceleration and the world accelerating at -gravity."""
    m = t.m
    e("ca0 = spatial(wp.vec3(0.0), -gravity)")
    for b in range(1, m.nbody):
        if not t.dynamic[b]:
            continue
        p = m.body_parentid[b]
        terms = [f"ca{p}" if t.dynamic[p] else "ca0"] + [f"cdd{i} * v{i}" for i in t.body_dofs[b]]
        e(f"ca{b} = {' + '.join(terms)}")
    for b in range(m.nbody - 1, 0, -1):
        if not t.dynamic[b] or t.subtree_mass[b] <= 0:
            continue
        own = None
        if _massive(t, b):
            mass = lit(m.body_mass[b])
            e(
                f"_f = inertia_mul({mass}, mh{b}, mI{b}, ca{b}) + "
                f"force_cross(cv{b}, inertia_mul({mass}, mh{b}, mI{b}, cv{b}))"
            )
            own = "_f"
        _subtree_sum(t, e, "cf", own, b)
    for i in range(m.nv):
        b = m.dof_bodyid[i]
        e(f"bias{i} = wp.dot(cd{i}, cf{b})" if t.subtree_mass[b] > 0 else f"bias{i} = 0.0")


def emit_mass_matrix(t: Tree, e: Emitter) -> None:
    """``M{i}_{j}`` from composite rigid-body inertias ``(cm, ch{b}, cI{b})``, plus armature."""
    m = t.m
    for b in range(m.nbody - 1, 0, -1):
        if not t.dynamic[b] or t.subtree_mass[b] <= 0:
            continue
        _subtree_sum(t, e, "ch", f"mh{b}" if _massive(t, b) else None, b)
        _subtree_sum(t, e, "cI", f"mI{b}" if _massive(t, b) else None, b)
    for i in range(m.nv):
        b = m.dof_bodyid[i]
        arm = lit(m.dof_armature[i])
        if t.subtree_mass[b] <= 0:
            e(f"M{i}_{i} = {arm}")
            for j in t.ancestors(i):
                e(f"M{i}_{j} = 0.0")
            continue
        e(f"_F = inertia_mul({lit(t.subtree_mass[b])}, ch{b}, cI{b}, cd{i})")
        e(f"M{i}_{i} = wp.dot(cd{i}, _F) + {arm}")
        for j in t.ancestors(i):
            e(f"M{i}_{j} = wp.dot(cd{j}, _F)")


def emit_factor(t: Tree, e: Emitter, diag_extra: list[str] | None = None) -> None:
    """Factor ``A = M + diag(diag_extra)`` as L^T D L in place (MuJoCo's mj_factorM, no fill-in on a
    tree): ``a{i}_{j}`` holds L below the diagonal, ``dinv{i}`` holds 1 / D."""
    m = t.m
    for i in range(m.nv):
        extra = f" + {diag_extra[i]}" if diag_extra else ""
        e(f"a{i}_{i} = M{i}_{i}{extra}")
        for j in t.ancestors(i):
            e(f"a{i}_{j} = M{i}_{j}")
    for k in range(m.nv - 1, -1, -1):
        e(f"dinv{k} = 1.0 / a{k}_{k}")
        for i in t.ancestors(k):
            e(f"_t = a{k}_{i} * dinv{k}")
            for j in [i] + t.ancestors(i):
                e(f"a{i}_{j} = a{i}_{j} - _t * a{k}_{j}")
            e(f"a{k}_{i} = _t")


def emit_solve(t: Tree, e: Emitter, rhs: list[str], out: str) -> None:
    """``{out}{i}`` = A^-1 rhs with the factorization from ``emit_factor`` (MuJoCo's mj_solveM)."""
    m = t.m
    for i in range(m.nv):
        e(f"{out}{i} = {rhs[i]}")
    for i in range(m.nv - 1, -1, -1):
        for j in t.ancestors(i):
            e(f"{out}{j} = {out}{j} - a{i}_{j} * {out}{i}")
    for i in range(m.nv):
        e(f"{out}{i} = {out}{i} * dinv{i}")
    for i in range(m.nv):
        for j in t.ancestors(i):
            e(f"{out}{i} = {out}{i} - a{i}_{j} * {out}{j}")
