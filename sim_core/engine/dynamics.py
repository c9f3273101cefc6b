"""Dynamics in segment frames (Featherstone's formulation), emitted with constants folded in.

Each segment's inertia is a constant in its own frame, and a hinge about a body axis has a constant
motion subspace there, so most products vanish at generation time. Emitted names: ``bias{d}``
(Coriolis, centrifugal and gravity force on dof d, MuJoCo's ``qfrc_bias``, by recursive
Newton-Euler), ``M{k}_{l}`` (mass matrix entry for ``l`` = k or an ancestor of k, armature included,
from composite rigid-body inertias), ``a{i}_{j}`` / ``dinv{i}`` (MuJoCo's sparse L^T D L factorization
of a matrix with M's sparsity, no fill-in on a tree).
"""

from __future__ import annotations

from collections.abc import Sequence

from .codegen import Emitter, lit
from .kinematics import emit_segment_transforms, force_to_parent, motion_to_child
from .segments import Segment
from .symbolic import Val, add, cross, dot, materialize, matmul, matvec, mul, neg, snap, sub, transpose
from .tree import Tree

__all__ = ["emit_bias", "emit_mass_matrix", "factor_pattern", "emit_factor", "emit_solve", "emit_load_inertial"]


def _inertia(s: Segment):
    """(mass, first moment, inertia about the origin) of the bodies riding on segment ``s``: constants,
    or for a per-env inertial slot ``k`` expressions in its mass scale ``km{k}`` and principal inertia
    scales ``ki{k}_{a}`` (loaded by ``emit_load_inertial``)."""
    if s.slot < 0:
        return snap(s.mass), [snap(x) for x in s.h], [[snap(x) for x in row] for row in s.inertia]
    km = f"km{s.slot}"
    inertia = [
        [
            add(
                *[mul(f"ki{s.slot}_{a}", snap(p[r][c])) for a, p in enumerate(s.principal)],
                mul(km, snap(s.parallel[r][c])),
            )
            for c in range(3)
        ]
        for r in range(3)
    ]
    return mul(km, snap(s.mass)), [mul(km, snap(x)) for x in s.h], inertia


def _subtree_mass(segs: list[Segment], i: int) -> Val:
    """Mass of segment ``i``'s subtree, with the per-env slots in it as expressions."""
    return add(_inertia(segs[i])[0], *[_subtree_mass(segs, c) for c in segs[i].children])


def emit_load_inertial(segs: list[Segment], e: Emitter) -> None:
    """Load each per-env inertial slot's scales from ``body_inertial[w, k]`` (mass, 3 principal)."""
    for s in segs:
        if s.slot >= 0:
            e(f"_bi{s.slot} = body_inertial[w, {s.slot}]")
            e(f"km{s.slot} = _bi{s.slot}[0]")
            for a in range(3):
                e(f"ki{s.slot}_{a} = _bi{s.slot}[{a + 1}]")


def inertia_mul(m: Val, h: list, inertia: list, w: list, v: list) -> tuple[list, list]:
    """Spatial inertia (m, h, I) about the origin times twist (w, v): (I w + h x v, m v - h x w)."""
    n = [add(a, b) for a, b in zip(matvec(inertia, w), cross(h, v), strict=True)]
    f = [sub(mul(m, v[k]), c) for k, c in enumerate(cross(h, w))]
    return n, f


def _force_cross(w, v, n, f) -> tuple[list, list]:
    """Twist (w, v) x* force (n, f) = (w x n + v x f, w x f)."""
    return [add(a, b) for a, b in zip(cross(w, n), cross(v, f), strict=True)], cross(w, f)


def emit_bias(segs: list[Segment], e: Emitter, X: list, vel: list, cvp: list) -> None:
    """``bias{d}``: recursive Newton-Euler with zero joint acceleration and the world accelerating
    at -gravity, in segment frames (constant inertias). A tree with MuJoCo's ``gravcomp`` c sees
    (1 - c) of gravity: the same generalized force as MuJoCo's qfrc_bias - qfrc_gravcomp."""
    e("gx = -gravity[0]")
    e("gy = -gravity[1]")
    e("gz = -gravity[2]")
    acc, force = [], []
    for i, s in enumerate(segs):
        if s.parent < 0:  # the world accelerates at -gravity, times the tree's uncompensated share
            E, _r = X[i]
            aw, av = [0.0] * 3, matvec(E, [mul(snap(s.gravity), g) for g in ("gx", "gy", "gz")])
        else:
            aw, av = motion_to_child(X[i], *acc[s.parent])
        cw, cv = cvp[i]
        aw = materialize(e, f"aw{i}", [add(p, q) for p, q in zip(aw, cw, strict=True)])
        av = materialize(e, f"av{i}", [add(p, q) for p, q in zip(av, cv, strict=True)])
        acc.append((aw, av))
        if s.mass > 0:
            m, h, inertia = _inertia(s)
            n1, f1 = inertia_mul(m, h, inertia, aw, av)
            vw, vv = vel[i]
            pn, pf = inertia_mul(m, h, inertia, vw, vv)
            pn, pf = materialize(e, f"pn{i}", pn), materialize(e, f"pf{i}", pf)
            n2, f2 = _force_cross(vw, vv, pn, pf)
            force.append(
                (
                    [add(a, b) for a, b in zip(n1, n2, strict=True)],
                    [add(a, b) for a, b in zip(f1, f2, strict=True)],
                )
            )
        else:
            force.append(([0.0] * 3, [0.0] * 3))
    for i in range(len(segs) - 1, -1, -1):
        n, f = force[i]
        for c in segs[i].children:
            if segs[c].subtree_mass > 0:
                cn, cf = force_to_parent(X[c], *force[c])
                n = [add(a, b) for a, b in zip(n, cn, strict=True)]
                f = [add(a, b) for a, b in zip(f, cf, strict=True)]
        force[i] = (materialize(e, f"fn{i}", n), materialize(e, f"ff{i}", f))
        for k, d in enumerate(segs[i].dofs):
            sw, sv = [snap(x) for x in segs[i].S[k][:3]], [snap(x) for x in segs[i].S[k][3:]]
            e(f"bias{d} = {_expr(add(dot(sw, force[i][0]), dot(sv, force[i][1])))}")


def _expr(v: Val) -> str:
    return lit(v) if isinstance(v, float) else v


def _inertia_to_parent(x, m: float, h: list, inertia: list) -> tuple[list, list]:
    """Spatial inertia (m, h, I) about the child origin in child coords -> about the parent origin
    in parent coords: rotate, then shift by r (parallel axis theorem with first moment)."""
    E, r = x
    et = transpose(E)
    hr = matvec(et, h)
    ir = matmul(et, matmul(inertia, E))
    h2 = [add(hr[k], mul(m, r[k])) for k in range(3)]
    diag = add(mul(2.0, dot(r, hr)), mul(m, dot(r, r)))
    out = [[0.0] * 3 for _ in range(3)]
    for a in range(3):
        for b in range(a + 1):
            terms = [ir[a][b], neg(mul(r[a], hr[b])), neg(mul(hr[a], r[b])), neg(mul(m, mul(r[a], r[b])))]
            if a == b:
                terms.append(diag)
            out[a][b] = out[b][a] = add(*terms)
    return h2, out


def emit_mass_matrix(t: Tree, segs: list[Segment], e: Emitter, X: list) -> None:
    """``M{k}_{l}`` (l = k and its ancestors) from composite inertias, plus armature. Returns the
    pairs (k, l) whose entry is zero whatever the state (e.g. a free body's linear against its
    angular dofs when its centre of mass is its frame's origin)."""
    m = t.m
    zeros = set()
    comp: list = [None] * len(segs)
    for i in range(len(segs) - 1, -1, -1):
        if segs[i].subtree_mass <= 0:
            continue
        _mass, h, inertia = _inertia(segs[i])
        h = list(h)
        inertia = [list(row) for row in inertia]
        for c in segs[i].children:
            if comp[c] is not None:
                ch, ci = _inertia_to_parent(X[c], _subtree_mass(segs, c), *comp[c])
                h = [add(a, b) for a, b in zip(h, ch, strict=True)]
                inertia = [[add(inertia[a][b], ci[a][b]) for b in range(3)] for a in range(3)]
        comp[i] = (materialize(e, f"ch{i}", h), materialize(e, f"cI{i}", inertia))
    done = set()
    for i, s in enumerate(segs):
        for k, d in enumerate(s.dofs):
            arm = lit(m.dof_armature[d])
            if comp[i] is None:
                e(f"M{d}_{d} = {arm}")
                for anc in t.ancestors(d):
                    e(f"M{d}_{anc} = 0.0")
                    zeros.add((d, anc))
                continue
            sw, sv = [snap(x) for x in s.S[k][:3]], [snap(x) for x in s.S[k][3:]]
            fn, ff = inertia_mul(_subtree_mass(segs, i), *comp[i], sw, sv)
            fn, ff = materialize(e, f"Fn{d}", fn), materialize(e, f"Ff{d}", ff)
            e(f"M{d}_{d} = {_expr(add(dot(sw, fn), dot(sv, ff)))} + {arm}")
            cur, owned = i, list(zip(s.dofs[:k], s.S[:k], strict=True))  # earlier dofs, same frame
            while True:
                for anc, sa in owned:
                    aw, av = [snap(x) for x in sa[:3]], [snap(x) for x in sa[3:]]
                    entry = add(dot(aw, fn), dot(av, ff))
                    e(f"M{d}_{anc} = {_expr(entry)}")
                    done.add((d, anc))
                    if entry == 0.0:
                        zeros.add((d, anc))
                if segs[cur].parent < 0:
                    break
                fn, ff = force_to_parent(X[cur], fn, ff)
                cur = segs[cur].parent
                fn, ff = materialize(e, f"Fn{d}_{cur}", fn), materialize(e, f"Ff{d}_{cur}", ff)
                owned = list(zip(segs[cur].dofs, segs[cur].S, strict=True))
            assert {a for (dd, a) in done if dd == d} == set(t.ancestors(d)), "tree mismatch"
    return zeros


def factor_pattern(t: Tree) -> dict[int, list[int]]:
    """For each dof ``i``, the ancestors ``j`` whose factor entry ``a{i}_{j}`` can be nonzero: M's
    entries minus its structural zeros (``emit_mass_matrix``), plus the fill-in the elimination
    brings into them. ``emit_factor`` and ``emit_solve`` skip the rest, which stay exactly 0: a
    product with 0 is kept by the compiler (it cannot assume the other factor finite), and a free
    body's 6x6 block is diagonal, with 15 such entries. Computed once per tree."""
    if t.factor_rows is None:
        scratch = Emitter()
        zeros = emit_mass_matrix(t, t.segments, scratch, emit_segment_transforms(t.segments, scratch))
        nz = {(i, j) for i in range(t.m.nv) for j in t.ancestors(i) if (i, j) not in zeros}
        for k in range(t.m.nv - 1, -1, -1):
            for i in t.ancestors(k):
                if (k, i) in nz:
                    nz.update((i, j) for j in t.ancestors(i) if (k, j) in nz)
        t.factor_rows = {i: [j for j in t.ancestors(i) if (i, j) in nz] for i in range(t.m.nv)}
    return t.factor_rows


def emit_factor(t: Tree, e: Emitter, diag_extra: list[str] | None = None) -> None:
    """Factor ``A = M + diag(diag_extra)`` as L^T D L in place (MuJoCo's mj_factorM, no fill-in on a
    tree): ``a{i}_{j}`` holds L below the diagonal, ``dinv{i}`` holds 1 / D. Entries outside
    ``factor_pattern`` are set to 0 and take no part."""
    m, rows = t.m, factor_pattern(t)
    for i in range(m.nv):
        extra = f" + {diag_extra[i]}" if diag_extra else ""
        e(f"a{i}_{i} = M{i}_{i}{extra}")
        for j in t.ancestors(i):
            e(f"a{i}_{j} = " + (f"M{i}_{j}" if j in rows[i] else "0.0"))
    for k in range(m.nv - 1, -1, -1):
        e(f"dinv{k} = 1.0 / a{k}_{k}")
        for i in rows[k]:
            e(f"_t = a{k}_{i} * dinv{k}")
            for j in [i] + t.ancestors(i):
                if j == i or j in rows[k]:
                    e(f"a{i}_{j} = a{i}_{j} - _t * a{k}_{j}")
            e(f"a{k}_{i} = _t")


def emit_solve(t: Tree, e: Emitter, rhs: list[str], out: str, dofs: Sequence[int] | None = None) -> None:
    """``{out}{i}`` = A^-1 rhs with the factorization from ``emit_factor`` (MuJoCo's mj_solveM);
    ``dofs``: only these (whole kinematic trees, ascending; the factor is block-diagonal by tree)."""
    dofs = list(range(t.m.nv)) if dofs is None else list(dofs)
    rows = factor_pattern(t)
    for i in dofs:
        e(f"{out}{i} = {rhs[i]}")
    for i in reversed(dofs):
        for j in rows[i]:
            e(f"{out}{j} = {out}{j} - a{i}_{j} * {out}{i}")
    for i in dofs:
        e(f"{out}{i} = {out}{i} * dinv{i}")
    for i in dofs:
        for j in rows[i]:
            e(f"{out}{i} = {out}{i} - a{i}_{j} * {out}{j}")
