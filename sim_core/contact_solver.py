"""Contact forces: soft normal constraints and Coulomb friction, by projected Gauss-Seidel on impulses.

One env per thread, called from the generated step kernel after the smooth velocity update (see
``step.py``). With ``v*`` the velocity the smooth forces alone would give and ``A = M + dt * D`` the
matrix of the implicit step (``integrator.py``), the contact impulses ``lam`` change it to
``v = v* + A^-1 J^T lam``. Each contact has three rows in its frame (normal ``n``, tangents ``t1``,
``t2``); ``J`` maps dof velocities to the relative velocity of the two bodies at the contact point
along them (geom2's body minus geom1's, the normal pointing from geom1 to geom2).

- Normal rows, penetrating (``dist <= 0``): MuJoCo's soft constraint (MuJoCo documentation,
  "Computation: soft constraints"). With the impedance ``d`` from ``solimp`` at this depth and
  ``k = 1 / (dmax^2 tc^2 zeta^2)``, ``b = 2 / (dmax tc)`` from ``solref = (tc, zeta)``
  (``tc >= 2 dt``), the row solves ``(W + R) lam = u_ref - J v*`` with ``lam >= 0``, where
  ``W = J A^-1 J^T``, ``R = (1 - d) / d * W_rr`` and ``u_ref = J v_0 + dt (-b J v_0 - k d dist)``
  (``v_0``: velocity at the start of the substep). At rest this settles at a depth of
  ``(1 - d) g / (k d^2)`` (a few tenths of a millimetre with the defaults) without jitter. The soft
  model's compliance scales with the bodies' effective mass, so a strong push on a light object
  (an arm crushing a cube into the floor) would sink it centimetres deep: each normal row is
  therefore also held rigidly to ``J v >= -(dist + max_penetration) / dt``, a depth cap.
- Normal rows, apart by less than the detection margin (``dist > 0``): speculative contacts
  (Catto, "Contacts", GDC 2013): a rigid row ``J v >= -dist / dt``, so a body closes the gap in one
  step but never passes through, whatever its speed.
- Friction rows: rigid Coulomb friction, ``|lam_t| <= mu lam_n`` (the elliptic cone), target
  tangential velocity zero, so objects at rest on a slope stick without creep. When the impulse
  that would stop the contact lies outside the cone, the contact slides and gets the full
  ``mu lam_n`` against its slip velocity (maximal dissipation; projecting that impulse radially
  onto the cone instead tilts the friction of a sliding box's corners and under-brakes it by ~7%).
  ``mu`` is the larger of the two geoms' sliding friction, as in MuJoCo.

Rows are swept in contact order (deterministic) until they settle or the sweep budget is spent, starting from the
last substep's impulses where a slot holds the same geom pair again (warm start, as in Box2D and
Bullet), which is what lets a stack of boxes settle without creeping. ``A^-1`` is
applied with the packed ``L^T D L`` factor the step already computed, restricted to the dof ranges of
the two bodies' kinematic trees (the factor is block-diagonal by tree).
"""

from __future__ import annotations

import numpy as np
import warp as wp

from .collision import _Out
from .types import JointType, Model

wp.set_module_options({"enable_backward": False})

__all__ = ["ContactModel", "ContactData", "solve_contacts", "forget_contacts", "build_contact_model", "make_contact_data"]

_vec5 = wp.types.vector(length=5, dtype=wp.float32)

HINGE_DOF, SLIDE_DOF, FREE_T_DOF, FREE_R_DOF = 0, 1, 2, 3


@wp.struct
class ContactModel:
    """Constant tables of a model for contact Jacobians and factor solves (one kernel argument)."""

    geom_body: wp.array(dtype=wp.int32)  # (ngeom,)
    geom_solref: wp.array(dtype=wp.vec2)  # (ngeom,) (timeconst s, dampratio)
    geom_solimp: wp.array(dtype=_vec5)  # (ngeom,) (dmin, dmax, width m, midpoint, power)
    dof_body: wp.array(dtype=wp.int32)  # (nv,)
    dof_parent: wp.array(dtype=wp.int32)  # (nv,) -1 for a root dof
    dof_kind: wp.array(dtype=wp.int32)  # (nv,) HINGE_DOF, SLIDE_DOF, FREE_T_DOF, FREE_R_DOF
    dof_axis: wp.array(dtype=wp.vec3)  # (nv,) in the body frame (free translation: world axis)
    dof_anchor: wp.array(dtype=wp.vec3)  # (nv,) in the body frame
    dof_fac: wp.array(dtype=wp.int32)  # (nv,) where dof i's L entries (its ancestors') start in fac
    body_dof: wp.array(dtype=wp.int32)  # (nbody,) deepest dof that moves the body, -1 if none
    body_tree: wp.array(dtype=wp.vec2i)  # (nbody,) dof range [start, end) of the body's tree
    ndinv: int  # offset of the nv inverse pivots in fac


@wp.struct
class ContactData:
    """Per-env contact buffers and solver scratch rows (one kernel argument)."""

    slots: _Out  # (nworld, max_contacts) pos, normal, dist, geom
    count: wp.array(dtype=wp.int32)  # (nworld,) contacts in the slots after the last substep
    overflow: wp.array(dtype=wp.int32)  # (nworld,) contacts dropped in the last step (max over substeps)
    force: wp.array2d(dtype=wp.vec3)  # (nworld, max_contacts) (normal, t1, t2) force on geom2, N
    friction: wp.array2d(dtype=wp.float32)  # (nworld, ngeom) sliding friction coefficient
    fac: wp.array2d(dtype=wp.float32)  # (nworld, nfac) the step's packed factor of A
    vel0: wp.array2d(dtype=wp.float32)  # (nworld, nv) velocity at the start of the substep
    vel: wp.array2d(dtype=wp.float32)  # (nworld, nv) velocity being corrected
    jac: wp.array3d(dtype=wp.vec3)  # (nworld, max_contacts, nv) J: the (normal, t1, t2) rows per dof
    ajac: wp.array3d(dtype=wp.vec3)  # (nworld, max_contacts, nv) A^-1 J^T, same layout
    wblk: wp.array2d(dtype=wp.mat33)  # (nworld, max_contacts) the contact's block of W = J A^-1 J^T
    grounded: wp.array2d(dtype=wp.bool)  # (nworld, max_contacts) one of the bodies is fixed to the world
    trees: wp.array2d(dtype=wp.vec4i)  # (nworld, max_contacts) dof ranges [a0, a1), [b0, b1) it touches
    lam: wp.array2d(dtype=wp.vec3)  # (nworld, max_contacts) impulses (normal, t1, t2), N s
    lam_geom: wp.array2d(dtype=wp.vec2i)  # (nworld, max_contacts) the pair each slot's lam belongs to
    uref: wp.array2d(dtype=wp.float32)  # (nworld, max_contacts) normal row's target velocity, m/s
    umin: wp.array2d(dtype=wp.float32)  # (nworld, max_contacts) least normal velocity (depth cap), m/s
    reg: wp.array2d(dtype=wp.float32)  # (nworld, max_contacts) normal row's regularization R
    mu: wp.array2d(dtype=wp.float32)  # (nworld, max_contacts) friction coefficient of the pair


@wp.func
def _quat_xyzw(q: wp.vec4) -> wp.quat:
    return wp.quat(q[1], q[2], q[3], q[0])


@wp.func
def _point_jac(
    kind: int,
    axis_local: wp.vec3,
    anchor_local: wp.vec3,
    xpos: wp.vec3,
    xquat: wp.vec4,
    p: wp.vec3,
) -> wp.vec3:
    """World velocity of the point ``p`` per unit velocity of a dof of the given kind, axis and
    anchor on a body at pose (``xpos``, ``xquat``) (the point moves with that body's subtree)."""
    if kind == FREE_T_DOF:
        return axis_local
    rot = _quat_xyzw(xquat)
    axis = wp.quat_rotate(rot, axis_local)
    if kind == SLIDE_DOF:
        return axis
    return wp.cross(axis, p - (xpos + wp.quat_rotate(rot, anchor_local)))


@wp.func
def _solve3(
    ajac: wp.array3d(dtype=wp.vec3),
    fac: wp.array2d(dtype=wp.float32),
    dof_parent: wp.array(dtype=wp.int32),
    dof_fac: wp.array(dtype=wp.int32),
    ndinv: int,
    w: int,
    c: int,
    s: int,
    e: int,
):
    """``ajac[w, c]`` = A^-1 ``ajac[w, c]`` (three rows at once) over the dofs [s, e) of one tree, with
    the packed factor ``fac[w]`` (MuJoCo's mj_solveM). Helpers take arrays, not the structs: Warp
    passes a struct argument by value, a copy of every array it holds per call."""
    for ii in range(e - s):
        i = e - 1 - ii
        xi = ajac[w, c, i]
        j = dof_parent[i]
        k = dof_fac[i]
        while j >= 0:
            ajac[w, c, j] = ajac[w, c, j] - fac[w, k] * xi
            k += 1
            j = dof_parent[j]
    for i in range(s, e):
        ajac[w, c, i] = ajac[w, c, i] * fac[w, ndinv + i]
    for i in range(s, e):
        x = ajac[w, c, i]
        j = dof_parent[i]
        k = dof_fac[i]
        while j >= 0:
            x = x - fac[w, k] * ajac[w, c, j]
            k += 1
            j = dof_parent[j]
        ajac[w, c, i] = x


@wp.func
def _rows_dot(
    jac: wp.array3d(dtype=wp.vec3), v: wp.array2d(dtype=wp.float32), w: int, c: int, t: wp.vec4i
) -> wp.vec3:
    """``J_c v``: the three row velocities of contact ``c`` for dof velocities ``v[w]``."""
    u = wp.vec3(0.0)
    for i in range(t[0], t[1]):
        u += jac[w, c, i] * v[w, i]
    for i in range(t[2], t[3]):
        u += jac[w, c, i] * v[w, i]
    return u


@wp.func
def _apply(
    ajac: wp.array3d(dtype=wp.vec3), vel: wp.array2d(dtype=wp.float32), w: int, c: int, dlam: wp.vec3, t: wp.vec4i
):
    """``vel += A^-1 J_c^T dlam``."""
    for i in range(t[0], t[1]):
        vel[w, i] = vel[w, i] + wp.dot(ajac[w, c, i], dlam)
    for i in range(t[2], t[3]):
        vel[w, i] = vel[w, i] + wp.dot(ajac[w, c, i], dlam)


@wp.func
def _impedance(solimp: _vec5, depth: float) -> float:
    """MuJoCo's impedance ``d`` at penetration ``depth`` >= 0 (solimp's power-sigmoid in depth/width)."""
    dmin = solimp[0]
    dmax = solimp[1]
    x = depth / wp.max(solimp[2], 1.0e-10)
    if x >= 1.0:
        return dmax
    mid = solimp[3]
    p = solimp[4]
    y = float(0.0)
    if x <= mid:
        y = wp.pow(x, p) / wp.pow(mid, p - 1.0)
    else:
        y = 1.0 - wp.pow(1.0 - x, p) / wp.pow(1.0 - mid, p - 1.0)
    return dmin + y * (dmax - dmin)


@wp.func
def solve_contacts(
    cm: ContactModel,
    cd: ContactData,
    xpos: wp.array2d(dtype=wp.vec3),
    xquat: wp.array2d(dtype=wp.vec4),
    w: int,
    nc: int,
    dt: float,
    iterations: int,
    tolerance: float,
    max_penetration: float,
):
    """Correct ``cd.vel[w]`` for env ``w``'s first ``nc`` contacts (see the module docstring) and
    write their forces to ``cd.force[w]``; ``xpos``/``xquat`` are the body poses the contacts were
    found at.

    Each sweep visits the contacts in order; per contact, the normal row first, then the two
    friction rows together (their 2x2 block of W), then the cone projection. Sweeps stop after
    ``iterations``, or earlier once no row changed its velocity by ``tolerance`` (m/s) or more."""
    for c in range(nc):
        # contact c's three rows (normal, t1, t2): J, A^-1 J^T, the 3x3 block of W, the normal row's
        # target velocity and regularization; warm-start impulses
        g = cd.slots.geom[w, c]
        p = cd.slots.pos[w, c]
        n = cd.slots.normal[w, c]
        dist = cd.slots.dist[w, c]
        ta = cm.body_tree[cm.geom_body[g[0]]]
        tb = cm.body_tree[cm.geom_body[g[1]]]
        if tb[0] == ta[0] and tb[1] == ta[1]:
            tb = wp.vec2i(0, 0)  # one tree: visit its dofs once
        t = wp.vec4i(ta[0], ta[1], tb[0], tb[1])
        cd.trees[w, c] = t
        cd.grounded[w, c] = cm.body_dof[cm.geom_body[g[0]]] < 0 or cm.body_dof[cm.geom_body[g[1]]] < 0
        # a tangent frame: t1 perpendicular to n and to the world axis n is least aligned with
        t1 = wp.cross(n, wp.vec3(1.0, 0.0, 0.0))
        if wp.abs(n[0]) > 0.5:
            t1 = wp.cross(n, wp.vec3(0.0, 1.0, 0.0))
        t1 = wp.normalize(t1)
        t2 = wp.cross(n, t1)
        for i in range(t[0], t[1]):
            cd.jac[w, c, i] = wp.vec3(0.0)
        for i in range(t[2], t[3]):
            cd.jac[w, c, i] = wp.vec3(0.0)
        for side in range(2):
            sign = 2.0 * float(side) - 1.0  # geom2's body counts positive
            d = cm.body_dof[cm.geom_body[g[side]]]
            while d >= 0:
                b = cm.dof_body[d]
                jp = sign * _point_jac(cm.dof_kind[d], cm.dof_axis[d], cm.dof_anchor[d], xpos[w, b], xquat[w, b], p)
                cd.jac[w, c, d] = cd.jac[w, c, d] + wp.vec3(wp.dot(n, jp), wp.dot(t1, jp), wp.dot(t2, jp))
                d = cm.dof_parent[d]
        for i in range(t[0], t[1]):
            cd.ajac[w, c, i] = cd.jac[w, c, i]
        for i in range(t[2], t[3]):
            cd.ajac[w, c, i] = cd.jac[w, c, i]
        _solve3(cd.ajac, cd.fac, cm.dof_parent, cm.dof_fac, cm.ndinv, w, c, t[0], t[1])
        _solve3(cd.ajac, cd.fac, cm.dof_parent, cm.dof_fac, cm.ndinv, w, c, t[2], t[3])
        blk = wp.mat33(0.0)
        for i in range(t[0], t[1]):
            blk += wp.outer(cd.jac[w, c, i], cd.ajac[w, c, i])
        for i in range(t[2], t[3]):
            blk += wp.outer(cd.jac[w, c, i], cd.ajac[w, c, i])
        cd.wblk[w, c] = blk
        lam = wp.vec3(0.0)
        prev = cd.lam_geom[w, c]
        if prev[0] == g[0] and prev[1] == g[1]:  # same pair in this slot last substep: warm start
            lam = cd.lam[w, c]
            _apply(cd.ajac, cd.vel, w, c, lam, t)
        cd.lam[w, c] = lam
        u_ref = -dist / dt  # speculative: close the gap, no further
        reg = float(0.0)
        if dist <= 0.0:
            solref = 0.5 * (cm.geom_solref[g[0]] + cm.geom_solref[g[1]])
            solimp = 0.5 * (cm.geom_solimp[g[0]] + cm.geom_solimp[g[1]])
            tc = wp.max(solref[0], 2.0 * dt)
            dmax = solimp[1]
            imp = _impedance(solimp, -dist)
            kk = 1.0 / (dmax * dmax * tc * tc * solref[1] * solref[1])
            bb = 2.0 / (dmax * tc)
            vn0 = _rows_dot(cd.jac, cd.vel0, w, c, t)[0]
            u_ref = vn0 + dt * (-bb * vn0 - kk * imp * dist)
            reg = (1.0 - imp) / imp * blk[0, 0]
        cd.uref[w, c] = u_ref
        cd.reg[w, c] = reg
        cd.umin[w, c] = -(dist + max_penetration) / dt
        cd.mu[w, c] = wp.max(cd.friction[w, g[0]], cd.friction[w, g[1]])
    for _it in range(iterations):
        change = float(0.0)  # largest velocity change a row's update made in this sweep, m/s
        for k in range(2 * nc):  # contacts between moving bodies first, then those with the world
            c = k % nc
            if (k < nc) == cd.grounded[w, c]:
                continue
            t = cd.trees[w, c]
            blk = cd.wblk[w, c]
            lam = cd.lam[w, c]
            u = _rows_dot(cd.jac, cd.vel, w, c, t)
            reg = cd.reg[w, c]
            ln = wp.max(lam[0] - (u[0] + reg * lam[0] - cd.uref[w, c]) / (blk[0, 0] + reg), 0.0)
            # never deeper than max_penetration after this step, whatever the soft model allows
            short = cd.umin[w, c] - (u[0] + blk[0, 0] * (ln - lam[0]))
            if short > 0.0:
                ln = ln + short / blk[0, 0]
            u = u + wp.vec3(blk[0, 0], blk[1, 0], blk[2, 0]) * (ln - lam[0])
            # friction: drive both tangential velocities to zero, then project onto the cone
            det = blk[1, 1] * blk[2, 2] - blk[1, 2] * blk[2, 1]
            d1 = -(blk[2, 2] * u[1] - blk[1, 2] * u[2]) / det
            d2 = -(blk[1, 1] * u[2] - blk[2, 1] * u[1]) / det
            l1 = lam[1] + d1
            l2 = lam[2] + d2
            norm = wp.sqrt(l1 * l1 + l2 * l2)
            limit = cd.mu[w, c] * ln
            if norm > limit:  # sliding: full friction against the slip velocity (maximal dissipation)
                slip = wp.sqrt(u[1] * u[1] + u[2] * u[2])
                if slip > 1.0e-6:
                    l1 = -limit * u[1] / slip
                    l2 = -limit * u[2] / slip
                else:
                    scale = limit / wp.max(norm, 1.0e-20)
                    l1 = l1 * scale
                    l2 = l2 * scale
            new = wp.vec3(ln, l1, l2)
            dlam = new - lam
            _apply(cd.ajac, cd.vel, w, c, dlam, t)
            cd.lam[w, c] = new
            change = wp.max(change, wp.max(wp.abs(dlam[0]) * blk[0, 0], wp.abs(dlam[1]) * blk[1, 1]))
            change = wp.max(change, wp.abs(dlam[2]) * blk[2, 2])
        if change < tolerance:
            break
    for c in range(nc):
        cd.force[w, c] = cd.lam[w, c] / dt
        cd.lam_geom[w, c] = cd.slots.geom[w, c]
    forget_contacts(cd, w, nc)


@wp.func
def forget_contacts(cd: ContactData, w: int, start: int):
    """Drop the warm-start impulses of env ``w``'s slots from ``start`` on."""
    for c in range(start, cd.lam_geom.shape[1]):
        if cd.lam_geom[w, c][0] < 0:
            break  # the rest were forgotten already
        cd.lam_geom[w, c] = wp.vec2i(-1, -1)


def build_contact_model(m: Model, mjm, device: str) -> ContactModel:
    """The constant tables of ``m`` (``mjm``: the compiled MjModel, for the geoms' solref/solimp)."""
    nv, nbody = m.nv, m.nbody
    kind = np.zeros(nv, np.int32)
    axis = np.zeros((nv, 3), np.float32)
    anchor = np.zeros((nv, 3), np.float32)
    for d in range(nv):
        j = int(m.dof_jntid[d])
        jt, k = JointType(int(m.jnt_type[j])), d - int(m.jnt_dofadr[j])
        if jt == JointType.FREE:
            kind[d] = FREE_T_DOF if k < 3 else FREE_R_DOF
            axis[d] = np.eye(3)[k % 3]
        else:
            kind[d] = HINGE_DOF if jt == JointType.HINGE else SLIDE_DOF
            axis[d], anchor[d] = m.jnt_axis[j], m.jnt_pos[j]
    fac_off, off = np.zeros(nv, np.int32), 0
    for d in range(nv):
        fac_off[d] = off
        j = m.dof_parentid[d]
        while j >= 0:
            off += 1
            j = m.dof_parentid[j]
    body_dof = np.full(nbody, -1, np.int32)
    body_tree = np.zeros((nbody, 2), np.int32)
    for b in range(1, nbody):
        p = int(m.body_parentid[b])
        own = np.flatnonzero(m.dof_bodyid == b)
        body_dof[b] = own[-1] if len(own) else body_dof[p]
    root = np.zeros(nv, np.int64)  # root dof of each dof's tree
    for d in range(nv):
        root[d] = d if m.dof_parentid[d] < 0 else root[m.dof_parentid[d]]
    for b in range(1, nbody):
        if body_dof[b] >= 0:
            members = np.flatnonzero(root == root[body_dof[b]])
            body_tree[b] = (members[0], members[-1] + 1)  # MuJoCo numbers a tree's dofs contiguously
            assert len(members) == members[-1] + 1 - members[0]
    arr = lambda x, dt: wp.array(np.ascontiguousarray(x), dtype=dt, device=device)  # noqa: E731
    cm = ContactModel()
    cm.geom_body = arr(mjm.geom_bodyid.astype(np.int32), wp.int32)
    cm.geom_solref = arr(mjm.geom_solref.astype(np.float32), wp.vec2)
    cm.geom_solimp = arr(mjm.geom_solimp.astype(np.float32), _vec5)
    cm.dof_body = arr(m.dof_bodyid.astype(np.int32), wp.int32)
    cm.dof_parent = arr(m.dof_parentid.astype(np.int32), wp.int32)
    cm.dof_kind = arr(kind, wp.int32)
    cm.dof_axis = arr(axis, wp.vec3)
    cm.dof_anchor = arr(anchor, wp.vec3)
    cm.dof_fac = arr(fac_off, wp.int32)
    cm.body_dof = arr(body_dof, wp.int32)
    cm.body_tree = arr(body_tree, wp.vec2i)
    cm.ndinv = int(off)
    return cm


def make_contact_data(slots: _Out, nworld: int, max_contacts: int, nv: int, nfac: int, friction, device: str):
    """Zeroed buffers for ``nworld`` envs; ``friction`` (ngeom,) is every env's initial friction."""
    cd = ContactData()
    cd.slots = slots
    cd.count = wp.zeros(nworld, dtype=wp.int32, device=device)
    cd.overflow = wp.zeros(nworld, dtype=wp.int32, device=device)
    cd.force = wp.zeros((nworld, max_contacts), dtype=wp.vec3, device=device)
    cd.friction = wp.array(np.tile(np.asarray(friction, np.float32), (nworld, 1)), dtype=wp.float32, device=device)
    cd.fac = wp.zeros((nworld, nfac), dtype=wp.float32, device=device)
    cd.vel0 = wp.zeros((nworld, nv), dtype=wp.float32, device=device)
    cd.vel = wp.zeros((nworld, nv), dtype=wp.float32, device=device)
    cd.jac = wp.zeros((nworld, max_contacts, nv), dtype=wp.vec3, device=device)
    cd.ajac = wp.zeros((nworld, max_contacts, nv), dtype=wp.vec3, device=device)
    cd.wblk = wp.zeros((nworld, max_contacts), dtype=wp.mat33, device=device)
    cd.grounded = wp.zeros((nworld, max_contacts), dtype=wp.bool, device=device)
    cd.trees = wp.zeros((nworld, max_contacts), dtype=wp.vec4i, device=device)
    cd.lam = wp.zeros((nworld, max_contacts), dtype=wp.vec3, device=device)
    for name in ("uref", "umin", "reg", "mu"):
        setattr(cd, name, wp.zeros((nworld, max_contacts), dtype=wp.float32, device=device))
    cd.lam_geom = wp.full((nworld, max_contacts), wp.vec2i(-1, -1), dtype=wp.vec2i, device=device)
    return cd
