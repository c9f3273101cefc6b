"""Contact and joint-limit impulses: soft normal constraints, Coulomb friction, depth cap.

One env per thread, called from the generated step kernel after the smooth velocity update (see
``step.py``). With ``v*`` the velocity the smooth forces alone would give and ``A = M + dt * D`` the
matrix of the implicit step (``integrator.py``), the impulses ``lam`` change it to
``v = v* + A^-1 J^T lam``. Each contact has three rows in its frame (normal ``n``, tangents ``t1``,
``t2``); ``J`` maps dof velocities to the relative velocity of the two bodies at the contact point
along them (geom2's body minus geom1's, the normal pointing from geom1 to geom2). Each active joint
limit of a tree a contact touches adds one row (``integrator.emit_limits`` with ``speculative``: the
step has already projected the velocities onto the limits), so contacts cannot push joints through.

- Normal rows, penetrating (``dist <= 0``): MuJoCo's soft constraint (MuJoCo documentation,
  "Computation: soft constraints"). With the impedance ``d`` from ``solimp`` at this depth and
  ``k = 1 / (dmax^2 tc^2 zeta^2)``, ``b = 2 / (dmax tc)`` from ``solref = (tc, zeta)``
  (``tc >= 2 dt``), the row asks ``J v + R lam = u_ref`` with ``lam >= 0``, where
  ``W = J A^-1 J^T``, ``R = (1 - d) / d * W_rr`` and ``u_ref = J v_0 + dt (-b J v_0 - k d dist)``
  (``v_0``: velocity at the start of the substep). At rest this settles at a depth of
  ``(1 - d) g / (k d^2)`` (a few tenths of a millimetre with the defaults) without jitter. The soft
  model's compliance scales with the bodies' effective mass, so a strong push on a light object
  (an arm crushing a cube into the floor) would sink it centimetres deep: each normal row is
  therefore also held rigidly to ``J v >= -(dist + max_penetration) / dt``, a depth cap.
- Normal rows, apart by less than the detection margin (``dist > 0``): speculative contacts
  (Catto, "Contacts", GDC 2013): a rigid row ``J v >= -dist / dt``, so a body closes the gap in one
  step but does not pass through, up to speeds of about (margin + gap) / dt.
- Friction rows: rigid Coulomb friction, ``|lam_t| <= mu lam_n`` (the elliptic cone), target
  tangential velocity zero, so objects at rest on a slope stick without creep. When the impulse
  that would stop the contact lies outside the cone, the contact slides and gets the full
  ``mu lam_n`` against its slip velocity (maximal dissipation; projecting that impulse radially
  onto the cone instead tilts the friction of a sliding box's corners and under-brakes it by ~7%);
  below 1 cm/s of slip, whose direction is then mostly round-off of the iteration, the radial
  projection.
  ``mu`` is the larger of the two geoms' sliding friction, as in MuJoCo. A budget spent before the
  rounds settle can leave the last normal solve with a friction impulse outside its cone (a
  contact that let go still pushing sideways, which would fling pinched cubes spinning): such impulses
  are projected back onto the cone, and the normals solved once more, up to ``CONE_PASSES`` times.
  Each normal solve can shrink a normal impulse again (a pinch whose pads shift under the friction),
  so friction that the last pass leaves outside is projected once more without a normal solve: the
  solve never ends with friction beyond its cone.

Solution: all normal and limit rows together by an active-set method on their block of ``W``
(``_solve_normals``: exact, so a light object between a heavy arm and the floor is held, where
projected Gauss-Seidel would need thousands of sweeps), then each contact's friction pair with the
normals held, alternating until nothing changes by ``tolerance`` or the iteration budget is spent,
the normal solve last; the rounds also stop at the first round that does not halve the change
(``STALL_ROUNDS``): from there the alternation cycles (a tumbling cube, a pad pressed into the
floor by the arm) or creeps (a held cube: a few percent a round), and each further round costs as
much as the first. Each row starts from the last substep's impulses and active-set state of the
same pair's row whose contact point was nearest (warm start, as Box2D and Bullet match contact
points: a pair's slots reorder as a box's corners come and go); a warm start that already meets
every row to a tenth of the tolerance takes no round at all (``_settled``: a body at rest), only
the block Gauss-Seidel sweep of the check itself, which keeps it at rest (``_polish_row``).
Everything runs in a fixed order: deterministic.

A contact's J, ``A^-1 J^T`` (by the packed ``L^T D L`` factor the step already computed, over the
dof ranges of the two bodies' kinematic trees: the factor is block-diagonal by tree) and its 3x3
block of W are written by the generated step, unrolled for the model (``rows.py``); a
joint limit's by ``_limit_row`` here. The normal rows' block of W between rows (``cd.wnn``) is
built only when the rounds start (``_normal_matrix``): a settled warm start never reads it.

Loops with a bound known only at run time are written as ``while`` loops: Warp compiles
``for i in range(a, b)`` through a general iterator (any step, either sign) that the CPU compiler
does not reduce to a plain counted loop; a ``while`` loop does the same operations in the same
order and compiles to faster CPU code. Loops over the dofs are generated for each model instead
(``DOF_HELPERS``, unrolled over each kinematic tree a row touches), and the generated step rebuilds
this module's functions with them (``specialize.py``).
"""

from __future__ import annotations

from typing import Any

import warp as wp

from .buffers import ContactData, ContactModel
from .impedance import impedance
from .ldl import ldl_factor, ldl_solve
from .warm_start import forget_contacts, warm_slot

wp.set_module_options({"enable_backward": False, "optimization_level": 3})

__all__ = [
    "solve_contacts",
    "DOF_HELPERS",
]


# The loops over a row's dofs that the functions below call, generated for each model
# (``rows.emit_dof_helpers``: unrolled over the dofs of each kinematic tree a row can touch; a row's J
# and A^-1 J^T are written only within its trees ``cd.trees[w, c]``) and put in by ``specialize``:
#   _rows_dot(jac, v, trees, w, c, dofs) -> wp.vec3: J_c v, the three row velocities of row c
#   _normal_dot(jac, v, trees, w, c, dofs) -> float: its normal row alone
#   _apply(ajac, vel, trees, w, c, dlam, dofs): vel += A^-1 J_c^T dlam
#   _apply_normal(ajac, vel, trees, w, c, dl, dofs): the same for a normal impulse dl alone
#   _normal_pair(jac, ajac, trees, w, c, b, dofs) -> float: J_c A^-1 J_b^T over the normal rows
#   _limit_column(fac, w, d, dofs) -> vector: column d of A^-1, by the step's packed factor fac[w]
# ``dofs`` is a vector as long as the model has dofs (its value unused).
DOF_HELPERS = ("_rows_dot", "_apply", "_normal_dot", "_apply_normal", "_normal_pair", "_limit_column")
_rows_dot = _apply = _normal_dot = _apply_normal = _normal_pair = _limit_column = None  # generated per model


@wp.func
def _in_trees(i: int, t: wp.vec4i) -> bool:
    return (i >= t[0] and i < t[1]) or (i >= t[2] and i < t[3])


@wp.func
def _normal_matrix(cd: ContactData, w: int, nrow: int, dofs: Any):
    """``wnn[w, a, b]`` = J_a A^-1 J_b^T over the normal rows of all ``nrow`` rows, written when the
    rounds start (a settled warm start, most substeps, needs none of it)."""
    b = int(0)
    while b < nrow:
        a = int(0)
        while a < b + 1:
            s = _normal_pair(cd.jac, cd.ajac, cd.trees, w, a, b, dofs)
            cd.wnn[w, a, b] = s
            cd.wnn[w, b, a] = s
            a += 1
        b += 1


INACTIVE, SOFT, CAPPED = 0, 1, 2
SLIP_DIRECTION_MIN = 1.0e-2  # m/s: slower slip takes the radially projected stick impulse
RIGID_REG = 1.0e-4  # regularization of rigid normal rows, relative to their diagonal of W
STALL_ROUNDS = 1  # rounds that may fail to halve the change before the rounds stop (module docstring)
CONE_PASSES = 8  # most rounds of projecting friction onto the final cones, then the normals again
FLIP_EPS = 1.0e-4  # m/s (1 um per step at dt = 0.01): float32 round-off must not flip a normal row's state


@wp.func
def _settled(cd: ContactData, w: int, nc: int, nrow: int, tolerance: float, dofs: Any) -> bool:
    """The warm start already solves every row to within ``tolerance`` (m/s) of its target: then the
    rounds would change no velocity by ``tolerance`` and are skipped (a body at rest, a held grasp:
    most substeps). A row with a normal impulse must meet its target (soft: ``J v + R lam = u_ref``;
    capped: ``J v = u_min``) and not want to switch between them, must stick (tangential velocity
    below ``tolerance``, its friction impulse inside the cone); a row without one must carry no
    friction and separate as the normal solve would leave it inactive. Sets the rows' states as
    the normal solve would start them, and polishes each row that passes (``_polish_row``), so
    the rows after it are checked with its polished impulse: a block Gauss-Seidel sweep."""
    r = int(0)
    while r < nrow:
        lam = cd.lam[w, r]
        u = _rows_dot(cd.jac, cd.vel, cd.trees, w, r, dofs)
        uref = cd.uref[w, r]
        umin = cd.umin[w, r]
        if lam[0] <= 0.0:
            if lam[1] != 0.0 or lam[2] != 0.0 or u[0] < wp.max(uref, umin) - FLIP_EPS:
                return False
            cd.state[w, r] = INACTIVE
        else:
            if cd.state[w, r] == INACTIVE:
                cd.state[w, r] = SOFT
            soft_u = uref - cd.reg[w, r] * lam[0]  # the soft target at this impulse
            if cd.state[w, r] == SOFT:
                if wp.abs(u[0] - soft_u) > tolerance or u[0] < umin - FLIP_EPS:
                    return False
            elif wp.abs(u[0] - umin) > tolerance or soft_u > umin + FLIP_EPS:
                return False
            limit = cd.mu[w, r] * lam[0]
            if limit > 0.0:
                if lam[1] * lam[1] + lam[2] * lam[2] >= limit * limit:
                    return False  # on or outside the cone: sliding, the rounds decide
                if wp.abs(u[1]) > tolerance or wp.abs(u[2]) > tolerance:
                    return False
            _polish_row(cd, w, r, nc, lam, u, dofs)
        r += 1
    return True


@wp.func
def _polish_row(cd: ContactData, w: int, r: int, nc: int, lam: wp.vec3, u: wp.vec3, dofs: Any):
    """Row ``r`` of a settled warm start (impulses ``lam``, row velocities ``u``), its state held:
    its normal impulse moves to its target (soft: ``J v + R lam = u_ref``; capped: ``J v = u_min``;
    not below 0), then its friction to stop its tangential velocity (within the cone). The warm
    start alone replays the last substep's impulses, which a body's state has moved away from by
    then: without this sweep a cube at rest would rock and twist ever faster until a row missed
    its target and a full solve put it back (a limit cycle, ~1e-4 rad/s)."""
    blk = cd.wblk[w, r]
    ln = lam[0]
    if cd.state[w, r] == SOFT:
        reg = cd.reg[w, r]
        ln = lam[0] + (cd.uref[w, r] - reg * lam[0] - u[0]) / (blk[0, 0] + reg)
    elif blk[0, 0] > 0.0:
        ln = lam[0] + (cd.umin[w, r] - u[0]) / blk[0, 0]
    ln = wp.max(ln, 0.0)
    l1 = lam[1]
    l2 = lam[2]
    limit = cd.mu[w, r] * ln
    if r < nc and limit > 0.0:  # the tangential velocities after the normal's change, stopped
        u1 = u[1] + blk[1, 0] * (ln - lam[0])
        u2 = u[2] + blk[2, 0] * (ln - lam[0])
        det = blk[1, 1] * blk[2, 2] - blk[1, 2] * blk[2, 1]
        l1 = lam[1] - (blk[2, 2] * u1 - blk[1, 2] * u2) / det
        l2 = lam[2] - (blk[1, 1] * u2 - blk[2, 1] * u1) / det
        norm = wp.sqrt(l1 * l1 + l2 * l2)
        if norm > limit:
            l1 = l1 * limit / norm
            l2 = l2 * limit / norm
    dlam = wp.vec3(ln - lam[0], l1 - lam[1], l2 - lam[2])
    if dlam[0] != 0.0 or dlam[1] != 0.0 or dlam[2] != 0.0:
        _apply(cd.ajac, cd.vel, cd.trees, w, r, dlam, dofs)
        cd.lam[w, r] = wp.vec3(ln, l1, l2)


@wp.func
def _active_targets(cd: ContactData, w: int, k: int):
    """The right-hand side of the active rows' system (``cd.sysb``): each active row's target
    velocity (soft: ``uref``; capped: ``umin``) less its velocity without normal impulses."""
    r = int(0)
    while r < k:
        i = cd.act[w, r]
        target = wp.where(cd.state[w, i] == SOFT, cd.uref[w, i], cd.umin[w, i])
        cd.sysb[w, r] = target - cd.u0[w, i]
        r += 1


@wp.func
def _scatter_active(cd: ContactData, w: int, nc: int, k: int):
    """The normal impulses the active system's solution (``cd.sysb``) gives, into ``cd.lnew``:
    each active row's, 0 for the others."""
    i = int(0)
    while i < nc:
        cd.lnew[w, i] = 0.0
        i += 1
    r = int(0)
    while r < k:
        cd.lnew[w, cd.act[w, r]] = cd.sysb[w, r]
        r += 1


@wp.func
def _solve_normals(cd: ContactData, w: int, nc: int, dofs: Any) -> float:
    """All normal impulses of env ``w`` at once, the friction impulses held: an active-set solve
    (each row inactive with ``lam = 0``, soft, or held at its depth cap) of the mixed
    complementarity problem, by an L D L^T factor of the active rows' system (kept while the active set
    stays, so the rounds of friction and normals in a substep mostly reuse it); one row changes
    state per round, the first that contradicts the solution (Murty's least-index rule, which cannot
    cycle in exact arithmetic; after 4 nc + 4 rounds the last solution stands, negative impulses
    clipped).
    Exact where projected Gauss-Seidel would need thousands of sweeps: a light cube pressed by a
    heavy arm into the floor. Applies the change to ``vel``; returns the largest velocity change."""
    i = int(0)  # u0: normal velocity without any normal impulse
    while i < nc:
        u = _normal_dot(cd.jac, cd.vel, cd.trees, w, i, dofs)
        j = int(0)
        while j < nc:
            u -= cd.wnn[w, i, j] * cd.lam[w, j][0]
            j += 1
        cd.u0[w, i] = u
        st = cd.state[w, i]
        if cd.lam[w, i][0] <= 0.0:
            st = INACTIVE
        elif st == INACTIVE:
            st = SOFT
        if st != cd.state[w, i]:
            cd.state[w, i] = st
            cd.nact[w] = -1  # another active set: the factor is stale
        i += 1
    eps_lam = 1.0e-6  # N s
    _round = int(0)
    while _round < 4 * nc + 4:
        if cd.nact[w] < 0:  # factor the active rows' system once per active set
            _factor_active(cd, w, nc)
        k = cd.nact[w]
        _active_targets(cd, w, k)
        ldl_solve(cd.sysm, cd.sysb, w, k)
        _scatter_active(cd, w, nc, k)
        settled = int(1)  # else the first row whose state contradicts the solution flips (least index)
        i = int(0)
        while i < nc:
            lam_i = cd.lnew[w, i]
            u = cd.u0[w, i]
            j = int(0)
            while j < nc:
                u += cd.wnn[w, i, j] * cd.lnew[w, j]
                j += 1
            st = cd.state[w, i]
            if st != INACTIVE and lam_i < -eps_lam:
                st = INACTIVE
            elif st == SOFT and u < cd.umin[w, i] - FLIP_EPS:
                st = CAPPED
            elif st == CAPPED and cd.uref[w, i] - cd.reg[w, i] * lam_i > cd.umin[w, i] + FLIP_EPS:
                st = SOFT
            elif st == INACTIVE and u < wp.max(cd.uref[w, i], cd.umin[w, i]) - FLIP_EPS:
                st = SOFT
                if cd.umin[w, i] > cd.uref[w, i]:
                    st = CAPPED
            if st != cd.state[w, i]:
                cd.state[w, i] = st
                cd.nact[w] = -1
                settled = 0
                break
            i += 1
        if settled == 1:
            break
        _round += 1
    change = float(0.0)
    i = int(0)
    while i < nc:
        lam = cd.lam[w, i]
        ln = wp.max(cd.lnew[w, i], 0.0)
        if ln != lam[0]:
            _apply_normal(cd.ajac, cd.vel, cd.trees, w, i, ln - lam[0], dofs)
        cd.lam[w, i] = wp.vec3(ln, lam[1], lam[2])
        change = wp.max(change, wp.abs(ln - lam[0]) * cd.wnn[w, i, i])
        i += 1
    return change


@wp.func
def _factor_active(cd: ContactData, w: int, nc: int):
    """The active rows (``cd.act``, ``cd.nact``) and the ``L D L^T`` factor of their system
    (``cd.sysm``, ``_ldl_factor``): the normal rows' block of W plus each row's regularization,
    symmetric positive definite."""
    k = int(0)
    i = int(0)
    while i < nc:
        if cd.state[w, i] != INACTIVE:
            cd.act[w, k] = i
            k += 1
        i += 1
    r = int(0)
    while r < k:
        i = cd.act[w, r]
        q = int(0)
        while q < r:
            cd.sysm[w, r, q] = cd.wnn[w, i, cd.act[w, q]]
            q += 1
        # rigid rows get a tiny regularization: coplanar contacts (a box's four corners, on both
        # faces of a cube in a stack) are redundant, and the system would be singular
        if cd.state[w, i] == SOFT:
            cd.sysm[w, r, r] = cd.wnn[w, i, i] + wp.max(cd.reg[w, i], RIGID_REG * cd.wnn[w, i, i])
        else:
            cd.sysm[w, r, r] = cd.wnn[w, i, i] * (1.0 + RIGID_REG)
        r += 1
    ldl_factor(cd.sysm, w, k)
    cd.nact[w] = k


@wp.func
def _touched(cd: ContactData, w: int, nc: int, d: int) -> bool:
    """Some contact's rows involve dof ``d`` (its tree)."""
    c = int(0)
    while c < nc:
        if _in_trees(d, cd.trees[w, c]):
            return True
        c += 1
    return False


@wp.func
def _limit_row(cm: ContactModel, cd: ContactData, w: int, r: int, d: int, side: float, tgt: float, dofs: Any):
    """Row ``r`` for the active limit of dof ``d``: ``side * v_d >= side * tgt`` (rigid, no friction),
    solved with the contacts so a contact cannot push a joint through its limit."""
    tree = cm.body_tree[cm.dof_body[d]]
    t = wp.vec4i(tree[0], tree[1], 0, 0)
    cd.trees[w, r] = t
    col = _limit_column(cd.fac, w, d, dofs)
    i = int(t[0])
    while i < t[1]:
        cd.jac[w, r, i] = wp.vec3(0.0)
        cd.ajac[w, r, i] = wp.vec3(side * col[i], 0.0, 0.0)
        i += 1
    cd.jac[w, r, d] = wp.vec3(side, 0.0, 0.0)
    wrr = col[d]
    cd.wblk[w, r] = wp.mat33(wrr, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    key = wp.vec2i(-2, d)
    cd.row_key[w, r] = key
    j = warm_slot(cd, w, key, wp.vec3(0.0))
    lam = wp.vec3(0.0)
    cd.state[w, r] = INACTIVE
    if j >= 0:
        lam = wp.vec3(cd.lam_prev[w, j][0], 0.0, 0.0)
        cd.state[w, r] = cd.lam_state[w, j]
        _apply(cd.ajac, cd.vel, cd.trees, w, r, lam, dofs)
    cd.lam[w, r] = lam
    cd.uref[w, r] = side * tgt
    cd.umin[w, r] = -1.0e30
    cd.reg[w, r] = 0.0
    cd.mu[w, r] = 0.0


@wp.func
def idle_row(cd: ContactData, w: int, c: int):
    """Contact ``c`` sits out this substep: no dofs, never active, no impulse."""
    cd.trees[w, c] = wp.vec4i(0, 0, 0, 0)
    cd.wblk[w, c] = wp.mat33(0.0)
    cd.lam[w, c] = wp.vec3(0.0)
    cd.state[w, c] = INACTIVE
    cd.uref[w, c] = -1.0e30
    cd.umin[w, c] = -1.0e30
    cd.reg[w, c] = 0.0
    cd.mu[w, c] = 0.0


@wp.func
def contact_tangent(n: wp.vec3) -> wp.vec3:
    """The contact frame's first tangent: perpendicular to the normal ``n`` and to the world axis
    ``n`` is least aligned with (the second is ``n x t1``)."""
    t1 = wp.cross(n, wp.vec3(1.0, 0.0, 0.0))
    if wp.abs(n[0]) > 0.5:
        t1 = wp.cross(n, wp.vec3(0.0, 1.0, 0.0))
    return wp.normalize(t1)


@wp.func
def start_row(
    cm: ContactModel,
    cd: ContactData,
    w: int,
    c: int,
    dist: float,
    vn0: float,
    dt: float,
    max_penetration: float,
    dofs: Any,
):
    """Contact ``c``'s rows, once the generated step has written their J, A^-1 J^T, dof ranges and
    3x3 block of W (``rows.py``): the warm start (applied to ``cd.vel``), the normal row's
    target velocity (``vn0``: its normal velocity at the start of the substep), regularization and
    depth cap, the friction coefficient. ``dofs``: see ``_rows_dot``."""
    g = cd.slots.geom[w, c]
    p = cd.slots.pos[w, c]
    lam = wp.vec3(0.0)
    j = warm_slot(cd, w, g, p)
    cd.state[w, c] = INACTIVE
    if j >= 0:
        lam = cd.lam_prev[w, j]
        cd.state[w, c] = cd.lam_state[w, j]  # the active set's start: where that row ended
        _apply(cd.ajac, cd.vel, cd.trees, w, c, lam, dofs)
    cd.lam[w, c] = lam
    u_ref = -dist / dt  # speculative: close the gap, no further
    reg = float(0.0)
    if dist <= 0.0:
        solref = 0.5 * (cm.geom_solref[g[0]] + cm.geom_solref[g[1]])
        solimp = 0.5 * (cm.geom_solimp[g[0]] + cm.geom_solimp[g[1]])
        tc = wp.max(solref[0], 2.0 * dt)
        dmax = solimp[1]
        imp = impedance(solimp, -dist)
        kk = 1.0 / (dmax * dmax * tc * tc * solref[1] * solref[1])
        bb = 2.0 / (dmax * tc)
        u_ref = vn0 + dt * (-bb * vn0 - kk * imp * dist)
        reg = (1.0 - imp) / imp * cd.wblk[w, c][0, 0]
    cd.uref[w, c] = u_ref
    cd.reg[w, c] = reg
    cd.umin[w, c] = -(dist + max_penetration) / dt
    cd.mu[w, c] = wp.max(cd.friction[w, g[0]], cd.friction[w, g[1]])


@wp.func
def _friction_sweep(cd: ContactData, w: int, nc: int, dofs: Any) -> float:
    """One Gauss-Seidel sweep over the contacts' friction pairs, the normal impulses held: each
    stops its tangential velocity with its 2x2 block of W, within its cone. Applies the change to
    ``vel``; returns the largest velocity change."""
    change = float(0.0)
    c = int(0)
    while c < nc:  # friction, the normal impulses held
        lam = cd.lam[w, c]
        # no normal impulse, no friction: nothing to change (and idle rows are empty)
        if lam[0] != 0.0 or lam[1] != 0.0 or lam[2] != 0.0:
            blk = cd.wblk[w, c]
            u = _rows_dot(cd.jac, cd.vel, cd.trees, w, c, dofs)
            # drive both tangential velocities to zero with the 2x2 block, then the cone
            det = blk[1, 1] * blk[2, 2] - blk[1, 2] * blk[2, 1]
            l1 = lam[1] - (blk[2, 2] * u[1] - blk[1, 2] * u[2]) / det
            l2 = lam[2] - (blk[1, 1] * u[2] - blk[2, 1] * u[1]) / det
            norm = wp.sqrt(l1 * l1 + l2 * l2)
            limit = cd.mu[w, c] * lam[0]
            if norm > limit:  # sliding: full friction against the slip velocity (maximal dissipation)
                slip = wp.sqrt(u[1] * u[1] + u[2] * u[2])
                # below SLIP_DIRECTION_MIN the slip's direction is mostly this round's residual: the
                # full impulse along it makes the rounds of a cube crushed between hand and floor
                # oscillate; the stick impulse's radial projection onto the cone does not
                if slip > SLIP_DIRECTION_MIN:
                    l1 = -limit * u[1] / slip
                    l2 = -limit * u[2] / slip
                else:
                    scale = limit / wp.max(norm, 1.0e-20)
                    l1 = l1 * scale
                    l2 = l2 * scale
            dlam = wp.vec3(0.0, l1 - lam[1], l2 - lam[2])
            if dlam[1] != 0.0 or dlam[2] != 0.0:
                _apply(cd.ajac, cd.vel, cd.trees, w, c, dlam, dofs)
            cd.lam[w, c] = wp.vec3(lam[0], l1, l2)
            change = wp.max(change, wp.max(wp.abs(dlam[1]) * blk[1, 1], wp.abs(dlam[2]) * blk[2, 2]))
        c += 1
    return change


@wp.func
def _project_cones(cd: ContactData, w: int, nc: int, dofs: Any) -> bool:
    """Friction impulses outside their contact's cone projected radially onto it (the last normal
    solve may have shrunk a normal impulse after its friction was solved), applied to ``vel``;
    whether any was."""
    projected = int(0)
    c = int(0)
    while c < nc:
        lam = cd.lam[w, c]
        norm = wp.sqrt(lam[1] * lam[1] + lam[2] * lam[2])
        limit = cd.mu[w, c] * lam[0]
        if norm > limit * (1.0 + 1.0e-3):
            scale = limit / norm
            dlam = wp.vec3(0.0, lam[1] * (scale - 1.0), lam[2] * (scale - 1.0))
            _apply(cd.ajac, cd.vel, cd.trees, w, c, dlam, dofs)
            cd.lam[w, c] = wp.vec3(lam[0], lam[1] * scale, lam[2] * scale)
            projected = 1
        c += 1
    return projected == 1


@wp.func
def _keep_warm_start(cd: ContactData, w: int, nc: int, nrow: int, dt: float):
    """The rows' final impulses, states, pairs and contact points, for the next substep's warm
    start; the contacts' forces (N) into ``cd.force``."""
    c = int(0)
    while c < nrow:
        cd.lam_prev[w, c] = cd.lam[w, c]
        cd.lam_state[w, c] = cd.state[w, c]
        cd.lam_geom[w, c] = cd.row_key[w, c]
        if c < nc:
            cd.force[w, c] = cd.lam[w, c] / dt
            cd.lam_pos[w, c] = cd.slots.pos[w, c]
        c += 1


@wp.func
def solve_contacts(
    cm: ContactModel,
    cd: ContactData,
    w: int,
    nc: int,
    dt: float,
    iterations: int,
    tolerance: float,
    max_penetration: float,
    limits: bool,
    dofs: Any,
):
    """Correct ``cd.vel[w]`` for env ``w``'s first ``nc`` contacts, whose rows are set up
    (``start_row`` or ``idle_row``), and, if ``limits``
    (some joint limit is active), its active joint limits (``cd.lim_side``/``lim_tgt``, and the
    factor ``cd.fac``: written only then); write the contact forces to ``cd.force[w]`` (see the module
    docstring). Up to ``iterations`` rounds of friction (normal impulses held: the warm start's at
    first), then all normals, stopping once no row changes its velocity by ``tolerance`` (m/s) or
    more. ``dofs``: see ``_rows_dot``."""
    nrow = nc
    k = int(0)  # active limits of touched trees: one more row each
    while limits and k < cm.lim_dof.shape[0]:
        d = cm.lim_dof[k]
        if cd.lim_side[w, k] != 0.0 and _touched(cd, w, nc, d):
            _limit_row(cm, cd, w, nrow, d, cd.lim_side[w, k], cd.lim_tgt[w, k], dofs)
            nrow += 1
        k += 1
    cd.nact[w] = -1  # a new matrix: no factor yet
    # rounds of friction (the normal impulses held), each closed by the normal solve, until nothing
    # changes by ``tolerance`` or the budget is spent; then up to CONE_PASSES rounds that project
    # the friction back onto the final cones: the last normal solve may have shrunk (or zeroed) a
    # normal impulse after its friction was solved, and a contact that let go must not push
    # sideways. One loop, so the (large) normal solve is inlined once.
    cone = int(0)
    rounds = int(0)
    if _settled(cd, w, nc, nrow, 0.1 * tolerance, dofs):
        rounds = iterations + CONE_PASSES  # nothing more to do
        cd.rounds[w] = 0
    else:
        _normal_matrix(cd, w, nrow, dofs)
    ref = float(1.0e30)  # the change STALL_ROUNDS rounds must halve
    stalled = int(0)
    while rounds < iterations + CONE_PASSES:
        change = float(0.0)
        if cone == 0:
            change = _friction_sweep(cd, w, nc, dofs)
        elif not _project_cones(cd, w, nc, dofs):
            break
        # the normal solve last: whatever friction left unconverged, no contact goes deeper
        change = wp.max(change, _solve_normals(cd, w, nrow, dofs))
        rounds += 1
        if change < 0.5 * ref:
            ref = change
            stalled = 0
        else:
            stalled += 1
        if cone == 0 and (change < tolerance or rounds >= iterations or stalled >= STALL_ROUNDS):
            cone = 1
            cd.rounds[w] = rounds
            rounds = iterations
    if cone == 1 and rounds >= iterations + CONE_PASSES:
        _project_cones(cd, w, nc, dofs)  # the passes ran out: the cones hold, the normals as they are
    _keep_warm_start(cd, w, nc, nrow, dt)
    forget_contacts(cd, w, nrow)
