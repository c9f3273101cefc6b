"""Time integration, emitted: MuJoCo's ``implicitfast`` velocity update, joint limits, positions.

Velocity update (as ``mj_implicit`` with ``implicitfast``, checked against ``mj_step``)::

    A    = M + dt * diag(damping + kd)            kd: the actuator kv while its force is unclamped
    qacc = A^-1 (qfrc_actuator - qfrc_bias - damping * qvel + qfrc_applied)
    qvel = qvel + dt * qacc

Joint limits are inelastic velocity-level constraints solved with the same A (an impulse on dof j
changes every velocity by ``A^-1 e_j``): for each limited joint whose position after the step would
leave its range, projected Gauss-Seidel finds non-negative impulses so that it lands exactly on the
limit (a joint already outside, e.g. set there by the user, is pulled back at 20% of the violation per
step instead of being snapped). In a model with contacts, the limits of joints near them (within
``LIMIT_MARGIN``) are also rows of the contact solve that follows, for the trees a contact touches
(``contact/solver.py``), so a contact cannot push a joint through. A final projection keeps every
limited coordinate inside
``[min(lower, q_before), max(upper, q_before)]``, so a joint inside its range never leaves it
(tolerance: float32 rounding, ~1e-7 rad) even when the Gauss-Seidel sweeps do not fully converge.

Positions then integrate with the new velocities (semi-implicit Euler); a free joint's quaternion is
rotated by its body-frame angular velocity and renormalized.
"""

from __future__ import annotations

from ..types import JointType
from .codegen import Emitter, lit
from .dynamics import emit_factor, emit_solve
from .tree import Tree

__all__ = [
    "LIMIT_SWEEPS",
    "LIMIT_RECOVERY",
    "emit_velocity_update",
    "emit_limits",
    "emit_positions",
    "emit_unit_solve_func",
    "emit_limit_func",
    "factor_size",
    "factor_names",
]

LIMIT_SWEEPS = 4
LIMIT_RECOVERY = 0.2
LIMIT_MARGIN = 0.05  # rad or m: limits this close become solver rows when contacts are solved


def factor_names(t: Tree) -> list[str]:
    """The packed factor's entries, as the step stores them for the contact solver: each dof's
    strict-lower L entries (its ancestors', nearest first), dof by dof, then the nv inverse pivots."""
    names = [f"a{i}_{j}" for i in range(t.m.nv) for j in t.ancestors(i)]
    return names + [f"dinv{i}" for i in range(t.m.nv)]


def factor_size(t: Tree) -> int:
    return len(factor_names(t))


def emit_velocity_update(t: Tree, e: Emitter, dt: str) -> None:
    """Factor A with ``dt`` (``0.0`` gives M itself), solve for ``acc{i}``, update ``v{i}``."""
    m = t.m
    emit_factor(t, e, [f"{dt} * (damp{i} + kd{i})" for i in range(m.nv)])
    rhs = [f"fa{i} - bias{i} - damp{i} * v{i} + qa{i}" for i in range(m.nv)]
    emit_solve(t, e, rhs, "acc")


def emit_unit_solve_func(t: Tree, e: Emitter) -> None:
    """``_unit_solve(fac, k)``: column k of A^-1 from the packed factorization."""
    nv = t.m.nv
    e("@wp.func")
    e("def _unit_solve(fac: vec_fac, k: int) -> vec_nv:")
    with e.indent():
        for n, name in enumerate(factor_names(t)):
            e(f"{name} = fac[{n}]")
        emit_solve(t, e, [f"wp.where(k == {i}, 1.0, 0.0)" for i in range(nv)], "x")
        e(f"return vec_nv({', '.join(f'x{i}' for i in range(nv))})")
    e("")


def emit_limits(t: Tree, e: Emitter, dt: str, speculative: bool = False) -> None:
    """Project ``v{i}`` so limited joints stay in range (see the module docstring)."""
    _emit_limit_rows(t, e, dt, speculative)
    _emit_limit_projection(t, e)


def _emit_limit_rows(t: Tree, e: Emitter, dt: str, speculative: bool = False) -> None:
    """For each limited dof i: ``side{i}`` (+1 at the lower limit, -1 at the upper, 0 if free this
    step) and ``tgt{i}``, the velocity that lands it on the limit; ``_any``: some limit is active.

    A limit is active when this step's velocity would cross it; with ``speculative`` also when the
    joint is within ``LIMIT_MARGIN`` of it (a tenth of the range at most), so that the contact
    solver, which gets these rows too, cannot push the joint through it."""
    e("_any = False")
    lims = t.limited_dofs()
    if not lims:
        return
    for i, a, lo, hi in lims:
        margin = min(LIMIT_MARGIN, 0.1 * (hi - lo)) if speculative else 0.0
        e(f"_qn = q{a} + {dt} * v{i}")
        e(f"side{i} = 0.0")
        e(f"tgt{i} = 0.0")
        if margin > 0.0:
            e(f"_qn = wp.min(_qn, q{a} - {lit(margin)})")
        e(f"if _qn < {lit(lo)}:")
        with e.indent():
            e(f"side{i} = 1.0")
            e(f"tgt{i} = ({lit(lo)} - q{a}) / {dt}")
            e(f"if q{a} < {lit(lo)}:")
            with e.indent():
                e(f"tgt{i} = tgt{i} * {lit(LIMIT_RECOVERY)}")
        if margin > 0.0:
            e(f"_qn = wp.max(q{a} + {dt} * v{i}, q{a} + {lit(margin)})")
        e(f"if _qn > {lit(hi)}:")
        with e.indent():
            e(f"side{i} = -1.0")
            e(f"tgt{i} = ({lit(hi)} - q{a}) / {dt}")
            e(f"if q{a} > {lit(hi)}:")
            with e.indent():
                e(f"tgt{i} = tgt{i} * {lit(LIMIT_RECOVERY)}")
        e(f"if side{i} != 0.0:")
        with e.indent():
            e("_any = True")


def _emit_limit_projection(t: Tree, e: Emitter) -> None:
    """The Gauss-Seidel limit impulses on ``v{i}`` for the rows of ``_emit_limit_rows``."""
    lims = t.limited_dofs()
    if not lims:
        return
    nv = t.m.nv
    e("if _any:")
    with e.indent():
        e(f"_fac = vec_fac({', '.join(factor_names(t))})")
        e(f"_v = vec_nv({', '.join(f'v{i}' for i in range(nv))})")
        limited = {lim[0] for lim in lims}
        e(f"_side = vec_nv({', '.join(f'side{i}' if i in limited else '0.0' for i in range(nv))})")
        e(f"_tgt = vec_nv({', '.join(f'tgt{i}' if i in limited else '0.0' for i in range(nv))})")
        e("_v = _limit_impulses(_fac, _v, _side, _tgt)")
        for i in range(nv):
            e(f"v{i} = _v[{i}]")


def emit_limit_func(t: Tree, e: Emitter) -> None:
    """``_limit_impulses(fac, v, side, tgt)``: the Gauss-Seidel sweeps, kept out of the step's body."""
    lims = t.limited_dofs()
    e("@wp.func")
    e("def _limit_impulses(fac: vec_fac, v: vec_nv, side: vec_nv, tgt: vec_nv) -> vec_nv:")
    with e.indent():
        e("_v = v")
        if not lims:
            e("return _v")
            e("")
            return
        for i, _a, _lo, _hi in lims:
            e(f"lam{i} = 0.0")
            e(f"col{i} = vec_nv()")
            e(f"if side[{i}] != 0.0:")
            with e.indent():
                e(f"col{i} = _unit_solve(fac, {i})")
        e(f"for _sweep in range({LIMIT_SWEEPS}):")
        with e.indent():
            for i, _a, _lo, _hi in lims:
                e(f"if side[{i}] != 0.0:")
                with e.indent():
                    e(f"_r = side[{i}] * (_v[{i}] - tgt[{i}])")
                    e(f"_l = wp.max(lam{i} - _r / col{i}[{i}], 0.0)")
                    e(f"_v = _v + col{i} * (side[{i}] * (_l - lam{i}))")
                    e(f"lam{i} = _l")
        e("return _v")
    e("")


def emit_positions(t: Tree, e: Emitter, dt: str) -> None:
    """Integrate ``q{k}`` with the new ``v{i}``; clamp limited joints (see the module docstring)."""
    m = t.m
    lims = {i: (lo, hi) for i, _a, lo, hi in t.limited_dofs()}
    for j in range(m.njnt):
        a, i = int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
        if m.jnt_type[j] == JointType.FREE:
            for k in range(3):
                e(f"q{a + k} = q{a + k} + {dt} * v{i + k}")
            e(
                f"_qt = quat_integrate(wp.quat(q{a + 4}, q{a + 5}, q{a + 6}, q{a + 3}), "
                f"wp.vec3(v{i + 3}, v{i + 4}, v{i + 5}), {dt})"
            )
            e(f"q{a + 3} = _qt[3]")
            for k in range(3):
                e(f"q{a + 4 + k} = _qt[{k}]")
            continue
        if i not in lims:
            e(f"q{a} = q{a} + {dt} * v{i}")
            continue
        lo, hi = lims[i]
        e(f"_lo = wp.min({lit(lo)}, q{a})")
        e(f"_hi = wp.max({lit(hi)}, q{a})")
        e(f"q{a} = q{a} + {dt} * v{i}")
        e(f"if q{a} < _lo:")
        with e.indent():
            e(f"q{a} = _lo")
            e(f"v{i} = wp.max(v{i}, 0.0)")
        e(f"if q{a} > _hi:")
        with e.indent():
            e(f"q{a} = _hi")
            e(f"v{i} = wp.min(v{i}, 0.0)")
