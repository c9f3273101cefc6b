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
  ``(1 - d) g / (k d^2)`` (a few tenths of a millimetre with the defaults) without jitter.
- Normal rows, apart by less than the detection margin (``dist > 0``): speculative contacts
  (Catto, "Contacts", GDC 2013): a rigid row ``J v >= -dist / dt``, so a body closes the gap in one
  step but never passes through, whatever its speed.
- Friction rows: rigid Coulomb friction, ``|lam_t| <= mu lam_n`` (the elliptic cone, projected onto
  the disc), target tangential velocity zero, so objects at rest on a slope stick without creep.
  ``mu`` is the larger of the two geoms' sliding friction, as in MuJoCo.

Rows are swept in contact order for a fixed number of iterations (deterministic), starting from the
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
    jac: wp.array3d(dtype=wp.float32)  # (nworld, 3 * max_contacts, nv) J rows
    ajac: wp.array3d(dtype=wp.float32)  # (nworld, 3 * max_contacts, nv) A^-1 J^T columns
    diag: wp.array2d(dtype=wp.float32)  # (nworld, 3 * max_contacts) W_rr = J_r A^-1 J_r^T
    lam: wp.array2d(dtype=wp.float32)  # (nworld, 3 * max_contacts) impulses, N s
    lam_geom: wp.array2d(dtype=wp.vec2i)  # (nworld, max_contacts) the pair each slot's lam belongs to


@wp.func
def _quat_xyzw(q: wp.vec4) -> wp.quat:
    return wp.quat(q[1], q[2], q[3], q[0])


@wp.func
def _point_jac(
    cm: ContactModel,
    xpos: wp.array2d(dtype=wp.vec3),
    xquat: wp.array2d(dtype=wp.vec4),
    w: int,
    d: int,
    p: wp.vec3,
) -> wp.vec3:
    """World velocity of the point ``p`` (moving with the body of dof ``d``'s subtree) per unit
    velocity of dof ``d``."""
    kind = cm.dof_kind[d]
    if kind == FREE_T_DOF:
        return cm.dof_axis[d]
    b = cm.dof_body[d]
    rot = _quat_xyzw(xquat[w, b])
    axis = wp.quat_rotate(rot, cm.dof_axis[d])
    if kind == SLIDE_DOF:
        return axis
    anchor = xpos[w, b] + wp.quat_rotate(rot, cm.dof_anchor[d])
    return wp.cross(axis, p - anchor)


@wp.func
def _solve_range(cm: ContactModel, cd: ContactData, w: int, r: int, s: int, e: int):
    """``ajac[w, r]`` = A^-1 ``ajac[w, r]`` over the dofs [s, e) of one tree (MuJoCo's mj_solveM)."""
    for ii in range(e - s):
        i = e - 1 - ii
        j = cm.dof_parent[i]
        k = cm.dof_fac[i]
        while j >= 0:
            cd.ajac[w, r, j] = cd.ajac[w, r, j] - cd.fac[w, k] * cd.ajac[w, r, i]
            k += 1
            j = cm.dof_parent[j]
    for i in range(s, e):
        cd.ajac[w, r, i] = cd.ajac[w, r, i] * cd.fac[w, cm.ndinv + i]
    for i in range(s, e):
        j = cm.dof_parent[i]
        k = cm.dof_fac[i]
        while j >= 0:
            cd.ajac[w, r, i] = cd.ajac[w, r, i] - cd.fac[w, k] * cd.ajac[w, r, j]
            k += 1
            j = cm.dof_parent[j]


@wp.func
def _row_dot(cd: ContactData, w: int, r: int, v: wp.array2d(dtype=wp.float32), t1: wp.vec2i, t2: wp.vec2i) -> float:
    s = float(0.0)
    for i in range(t1[0], t1[1]):
        s += cd.jac[w, r, i] * v[w, i]
    for i in range(t2[0], t2[1]):
        s += cd.jac[w, r, i] * v[w, i]
    return s


@wp.func
def _apply(cd: ContactData, w: int, r: int, dlam: float, t1: wp.vec2i, t2: wp.vec2i):
    """``vel += A^-1 J_r^T dlam``."""
    for i in range(t1[0], t1[1]):
        cd.vel[w, i] = cd.vel[w, i] + cd.ajac[w, r, i] * dlam
    for i in range(t2[0], t2[1]):
        cd.vel[w, i] = cd.vel[w, i] + cd.ajac[w, r, i] * dlam


@wp.func
def _trees(cm: ContactModel, cd: ContactData, w: int, c: int) -> tuple[wp.vec2i, wp.vec2i]:
    """Dof ranges of the trees of contact ``c``'s two bodies (the second empty if they share one)."""
    g = cd.slots.geom[w, c]
    t1 = cm.body_tree[cm.geom_body[g[0]]]
    t2 = cm.body_tree[cm.geom_body[g[1]]]
    if t2[0] == t1[0] and t2[1] == t1[1]:
        t2 = wp.vec2i(0, 0)
    return t1, t2


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
def _build_rows(
    cm: ContactModel,
    cd: ContactData,
    xpos: wp.array2d(dtype=wp.vec3),
    xquat: wp.array2d(dtype=wp.vec4),
    w: int,
    c: int,
):
    """J rows and A^-1 J^T columns of contact ``c`` (rows 3c: normal, 3c+1, 3c+2: tangents)."""
    g = cd.slots.geom[w, c]
    p = cd.slots.pos[w, c]
    n = cd.slots.normal[w, c]
    ta, tb = _trees(cm, cd, w, c)
    # a tangent frame: t1 perpendicular to n and to the world axis n is least aligned with
    t1 = wp.cross(n, wp.vec3(1.0, 0.0, 0.0))
    if wp.abs(n[0]) > 0.5:
        t1 = wp.cross(n, wp.vec3(0.0, 1.0, 0.0))
    t1 = wp.normalize(t1)
    t2 = wp.cross(n, t1)
    for k in range(3):
        r = 3 * c + k
        dirn = n
        if k == 1:
            dirn = t1
        elif k == 2:
            dirn = t2
        for i in range(ta[0], ta[1]):
            cd.jac[w, r, i] = 0.0
        for i in range(tb[0], tb[1]):
            cd.jac[w, r, i] = 0.0
        for side in range(2):
            b = cm.geom_body[g[side]]
            sign = 2.0 * float(side) - 1.0  # geom2's body counts positive
            d = cm.body_dof[b]
            while d >= 0:
                cd.jac[w, r, d] = cd.jac[w, r, d] + sign * wp.dot(dirn, _point_jac(cm, xpos, xquat, w, d, p))
                d = cm.dof_parent[d]
        diag = float(0.0)
        for i in range(ta[0], ta[1]):
            cd.ajac[w, r, i] = cd.jac[w, r, i]
        for i in range(tb[0], tb[1]):
            cd.ajac[w, r, i] = cd.jac[w, r, i]
        _solve_range(cm, cd, w, r, ta[0], ta[1])
        _solve_range(cm, cd, w, r, tb[0], tb[1])
        for i in range(ta[0], ta[1]):
            diag += cd.jac[w, r, i] * cd.ajac[w, r, i]
        for i in range(tb[0], tb[1]):
            diag += cd.jac[w, r, i] * cd.ajac[w, r, i]
        cd.diag[w, r] = wp.max(diag, 1.0e-12)
        # warm start: a slot holding the same geom pair as in the last substep starts from its impulse
        lam = float(0.0)
        prev = cd.lam_geom[w, c]
        if prev[0] == g[0] and prev[1] == g[1]:
            lam = cd.lam[w, r]
            _apply(cd, w, r, lam, ta, tb)
        cd.lam[w, r] = lam


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
):
    """Correct ``cd.vel[w]`` for env ``w``'s first ``nc`` contacts (see the module docstring) and
    write their forces to ``cd.force[w]``; ``xpos``/``xquat`` are the body poses the contacts were
    found at."""
    for c in range(nc):
        _build_rows(cm, cd, xpos, xquat, w, c)
    for _it in range(iterations):
        for c in range(nc):
            ta, tb = _trees(cm, cd, w, c)
            g = cd.slots.geom[w, c]
            dist = cd.slots.dist[w, c]
            r = 3 * c
            wn = cd.diag[w, r]
            # target normal velocity and regularization
            u_ref = -dist / dt
            reg = float(0.0)
            if dist <= 0.0:
                solref = 0.5 * (cm.geom_solref[g[0]] + cm.geom_solref[g[1]])
                solimp = 0.5 * (cm.geom_solimp[g[0]] + cm.geom_solimp[g[1]])
                tc = wp.max(solref[0], 2.0 * dt)
                dmax = solimp[1]
                imp = _impedance(solimp, -dist)
                kk = 1.0 / (dmax * dmax * tc * tc * solref[1] * solref[1])
                bb = 2.0 / (dmax * tc)
                vn0 = _row_dot(cd, w, r, cd.vel0, ta, tb)
                u_ref = vn0 + dt * (-bb * vn0 - kk * imp * dist)
                reg = (1.0 - imp) / imp * wn
            lam_n = cd.lam[w, r]
            res = _row_dot(cd, w, r, cd.vel, ta, tb) + reg * lam_n - u_ref
            new_n = wp.max(lam_n - res / (wn + reg), 0.0)
            _apply(cd, w, r, new_n - lam_n, ta, tb)
            cd.lam[w, r] = new_n
            mu = wp.max(cd.friction[w, g[0]], cd.friction[w, g[1]])
            l1 = cd.lam[w, r + 1]
            l2 = cd.lam[w, r + 2]
            n1 = l1 - _row_dot(cd, w, r + 1, cd.vel, ta, tb) / cd.diag[w, r + 1]
            n2 = l2 - _row_dot(cd, w, r + 2, cd.vel, ta, tb) / cd.diag[w, r + 2]
            norm = wp.sqrt(n1 * n1 + n2 * n2)
            limit = mu * new_n
            if norm > limit:
                scale = limit / wp.max(norm, 1.0e-20)
                n1 = n1 * scale
                n2 = n2 * scale
            _apply(cd, w, r + 1, n1 - l1, ta, tb)
            _apply(cd, w, r + 2, n2 - l2, ta, tb)
            cd.lam[w, r + 1] = n1
            cd.lam[w, r + 2] = n2
    for c in range(nc):
        r = 3 * c
        cd.force[w, c] = wp.vec3(cd.lam[w, r], cd.lam[w, r + 1], cd.lam[w, r + 2]) / dt
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
    cd.jac = wp.zeros((nworld, 3 * max_contacts, nv), dtype=wp.float32, device=device)
    cd.ajac = wp.zeros((nworld, 3 * max_contacts, nv), dtype=wp.float32, device=device)
    cd.diag = wp.zeros((nworld, 3 * max_contacts), dtype=wp.float32, device=device)
    cd.lam = wp.zeros((nworld, 3 * max_contacts), dtype=wp.float32, device=device)
    cd.lam_geom = wp.full((nworld, max_contacts), wp.vec2i(-1, -1), dtype=wp.vec2i, device=device)
    return cd
