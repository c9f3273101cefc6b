"""The contact solver's tables and per-env buffers: ``ContactModel`` (constant, from the model) and
``ContactData`` (slots, impulses, warm start and the solver's scratch), each one kernel argument."""

from __future__ import annotations

import numpy as np
import warp as wp

from ..engine.tree import Tree
from .geometry import ContactSlots

__all__ = [
    "ContactModel",
    "ContactData",
    "SCRATCH",
    "build_contact_model",
    "make_contact_data",
    "env_minor",
    "scratch",
    "with_own_scratch",
    "vec5",
]

vec5 = wp.types.vector(length=5, dtype=wp.float32)


@wp.struct
class ContactModel:
    """Constant tables of a model for the contacts' rows and the joint-limit rows (one kernel argument)."""

    geom_body: wp.array(dtype=wp.int32)  # (ngeom,)
    geom_solref: wp.array(dtype=wp.vec2)  # (ngeom,) (timeconst s, dampratio)
    geom_solimp: wp.array(dtype=vec5)  # (ngeom,) (dmin, dmax, width m, midpoint, power)
    dof_body: wp.array(dtype=wp.int32)  # (nv,)
    body_tree: wp.array(dtype=wp.vec2i)  # (nbody,) dof range [start, end) of the body's tree
    lim_dof: wp.array(dtype=wp.int32)  # (nlim,) the limited dofs, in the generated code's order


@wp.struct
class ContactData:
    """Per-env contact buffers and solver scratch rows (one kernel argument)."""

    slots: ContactSlots  # (nworld, max_contacts) pos, normal, dist, geom
    nxt: ContactSlots  # (nworld, max_contacts) the contacts at the end of the last step: the next one's first
    nxt_wanted: wp.array(dtype=wp.int32)  # (nworld,) contacts found there, beyond the budget too
    fresh: wp.array(dtype=wp.int32)  # (nworld,) 1: nxt is still of the current state (nothing set since)
    count: wp.array(dtype=wp.int32)  # (nworld,) contacts in the slots after the last substep
    overflow: wp.array(dtype=wp.int32)  # (nworld,) contacts dropped in the last step (max over substeps)
    rounds: wp.array(dtype=wp.int32)  # (nworld,) rounds of friction and normals in the last substep's solve
    force: wp.array2d(dtype=wp.vec3)  # (nworld, max_contacts) (normal, t1, t2) force on geom2, N
    friction: wp.array2d(dtype=wp.float32)  # (nworld, ngeom) sliding friction coefficient
    lim_side: wp.array2d(dtype=wp.float32)  # (nworld, nlim) +1 / -1: lower / upper limit active, 0: not
    lim_tgt: wp.array2d(dtype=wp.float32)  # (nworld, nlim) velocity that lands the joint on its limit
    fac: wp.array2d(dtype=wp.float32)  # (nworld, nfac) the step's packed factor of A
    vel: wp.array2d(dtype=wp.float32)  # (nworld, nv) velocity being corrected
    jac: wp.array3d(dtype=wp.vec3)  # (nworld, max_contacts, nv) J: the (normal, t1, t2) rows per dof
    ajac: wp.array3d(dtype=wp.vec3)  # (nworld, max_contacts, nv) A^-1 J^T, same layout
    wblk: wp.array2d(dtype=wp.mat33)  # (nworld, max_contacts) the contact's block of W = J A^-1 J^T
    wnn: wp.array3d(dtype=wp.float32)  # (nworld, max_contacts, max_contacts) normal rows' block of W
    u0: wp.array2d(dtype=wp.float32)  # (nworld, max_contacts) normal velocity without normal impulses
    state: wp.array2d(dtype=wp.int32)  # (nworld, max_contacts) normal row INACTIVE, SOFT or CAPPED
    act: wp.array2d(dtype=wp.int32)  # (nworld, max_contacts) the active rows
    sysm: wp.array3d(dtype=wp.float32)  # (nworld, max_contacts, max_contacts) active rows' system
    sysb: wp.array2d(dtype=wp.float32)  # (nworld, max_contacts) its right-hand side, then solution
    nact: wp.array(dtype=wp.int32)  # (nworld,) active rows the factor in sysm is for; -1: stale
    lnew: wp.array2d(dtype=wp.float32)  # (nworld, max_contacts) normal impulses of a round
    trees: wp.array2d(dtype=wp.vec4i)  # (nworld, max_contacts) dof ranges [a0, a1), [b0, b1) it touches
    lam: wp.array2d(dtype=wp.vec3)  # (nworld, max_contacts) impulses (normal, t1, t2), N s
    lam_prev: wp.array2d(dtype=wp.vec3)  # (nworld, max_contacts) the last substep's impulses: warm start
    lam_geom: wp.array2d(dtype=wp.vec2i)  # (nworld, max_contacts) their pair ((-2, dof): a limit); -1 ends
    lam_pos: wp.array2d(dtype=wp.vec3)  # (nworld, max_contacts) their contact points, world
    lam_state: wp.array2d(dtype=wp.int32)  # (nworld, max_contacts) their normal rows' final state
    uref: wp.array2d(dtype=wp.float32)  # (nworld, max_contacts) normal row's target velocity, m/s
    umin: wp.array2d(dtype=wp.float32)  # (nworld, max_contacts) least normal velocity (depth cap), m/s
    reg: wp.array2d(dtype=wp.float32)  # (nworld, max_contacts) normal row's regularization R
    mu: wp.array2d(dtype=wp.float32)  # (nworld, max_contacts) friction coefficient of the pair
    row_key: wp.array2d(dtype=wp.vec2i)  # (nworld, max_contacts) each row's pair, (-2, dof) for a limit


def build_contact_model(t: Tree, device: str) -> ContactModel:
    """The constant tables of ``t``'s model (its compiled MjModel for the geoms' solref/solimp)."""
    m, mjm = t.m, t.m.mjmodel
    nbody = m.nbody
    body_tree = np.zeros((nbody, 2), np.int32)  # dof range of the tree that moves the body
    for b in range(1, nbody):
        d = t.deepest_dof(b)
        if d >= 0:
            body_tree[b] = t.dof_tree[d]
    arr = lambda x, dt: wp.array(np.ascontiguousarray(x), dtype=dt, device=device)  # noqa: E731
    cm = ContactModel()
    cm.geom_body = arr(mjm.geom_bodyid.astype(np.int32), wp.int32)
    cm.geom_solref = arr(mjm.geom_solref.astype(np.float32), wp.vec2)
    cm.geom_solimp = arr(mjm.geom_solimp.astype(np.float32), vec5)
    cm.dof_body = arr(m.dof_bodyid.astype(np.int32), wp.int32)
    cm.body_tree = arr(body_tree, wp.vec2i)
    lim = [d for d, *_ in t.limited_dofs()]
    cm.lim_dof = arr(np.array(lim, np.int32).reshape(-1), wp.int32)
    return cm


def make_contact_data(
    slots: ContactSlots,
    nxt: ContactSlots,
    nworld: int,
    max_contacts: int,
    nlim: int,
    nv: int,
    nfac: int,
    friction,
    device: str,
) -> ContactData:
    """Zeroed buffers for ``nworld`` envs: ``max_contacts`` contact slots (``slots``, ``nxt``), and
    solver rows for them plus the ``nlim`` limited joints; ``friction`` (ngeom,) is every env's
    initial friction.

    The solver's scratch (everything an env's substep writes before it reads it: Jacobians, W,
    the active-set system, the rows' targets, the velocities being corrected) is one env's worth
    on the CPU, where Warp runs a kernel's threads one after another: every env's solve then works
    in the same ~25 KB, which stays in cache (1024 envs' own scratch, ~25 MB, would not). The
    arrays keep their ``(nworld, ...)`` shape there with a stride of 0 over envs; a launch shared
    among host threads gives each further thread scratch of its own (``with_own_scratch``). On a
    GPU, where threads run at once, each env has its own, env-minor (``env_minor``)."""
    rows = max_contacts + nlim
    z = lambda shape, dtype=wp.float32: wp.zeros(shape, dtype=dtype, device=device)  # noqa: E731
    cd = ContactData()
    cd.slots = slots
    cd.nxt = nxt
    cd.nxt_wanted = z(nworld, wp.int32)
    cd.fresh = z(nworld, wp.int32)
    cd.count = z(nworld, wp.int32)
    cd.overflow = z(nworld, wp.int32)
    cd.rounds = z(nworld, wp.int32)
    cd.force = z((nworld, max_contacts), wp.vec3)
    per_env = np.tile(np.asarray(friction, np.float32), (nworld, 1))
    cd.friction = wp.array(per_env, dtype=wp.float32, device=device)
    for name, (shape, dtype) in _scratch_fields(rows, nlim, nv, nfac).items():
        setattr(cd, name, scratch((nworld, *shape), dtype, device))
    cd.lam_prev = z((nworld, rows), wp.vec3)  # the warm start: kept per env from one substep to the next
    cd.lam_geom = wp.full((nworld, rows), wp.vec2i(-1, -1), dtype=wp.vec2i, device=device)
    cd.lam_pos = z((nworld, rows), wp.vec3)
    cd.lam_state = z((nworld, rows), wp.int32)
    return cd


def _scratch_fields(rows: int, nlim: int, nv: int, nfac: int) -> dict[str, tuple[tuple, type]]:
    """The fields of ``ContactData`` that are solver scratch, each with its per-env shape and dtype."""
    f32, i32, n = wp.float32, wp.int32, max(nlim, 1)
    out = {"lim_side": ((n,), f32), "lim_tgt": ((n,), f32), "fac": ((nfac,), f32), "vel": ((nv,), f32)}
    out |= {"jac": ((rows, nv), wp.vec3), "ajac": ((rows, nv), wp.vec3), "wblk": ((rows,), wp.mat33)}
    out |= {"wnn": ((rows, rows), f32), "sysm": ((rows, rows), f32), "nact": ((), i32)}
    out |= {name: ((rows,), f32) for name in ("u0", "sysb", "lnew", "uref", "umin", "reg", "mu")}
    out |= {"state": ((rows,), i32), "act": ((rows,), i32), "trees": ((rows,), wp.vec4i)}
    return out | {"lam": ((rows,), wp.vec3), "row_key": ((rows,), wp.vec2i)}


SCRATCH = tuple(_scratch_fields(1, 1, 1, 1))


GPU_SCRATCH_ENV_MINOR = True  # read when a scene is built; False: env-major on a GPU too (to compare)


def scratch(shape: tuple, dtype, device: str) -> wp.array:
    """A scratch array of ``shape`` (env first): on a GPU each env's own, env-minor
    (``env_minor``); on the CPU one env's worth, seen by every env through a stride of 0
    (``make_contact_data``; also the adaptive split's start state, which on the CPU the thread that
    stepped an env redoes it from at once)."""
    if not wp.get_device(device).is_cpu:
        return (
            env_minor(shape, dtype, device) if GPU_SCRATCH_ENV_MINOR else wp.zeros(shape, dtype, device=device)
        )
    one = wp.zeros((1, *shape[1:]), dtype=dtype, device=device)
    strides = (0, *one.strides[1:])
    return _view(one, shape, strides)


def env_minor(shape: tuple, dtype, device: str) -> wp.array:
    """Zeros of ``shape`` (env first) laid out with the env index varying fastest: element
    ``[w, i, j]`` of envs ``w`` and ``w + 1`` are adjacent. A GPU runs one env per thread, and the
    threads of a warp, at the same ``[i, j]`` of their envs, then read and write one contiguous run
    of memory (coalesced) instead of one place per env a whole env's buffer apart. Indexing is
    unchanged: only the strides differ."""
    phys = wp.zeros((*shape[1:], shape[0]), dtype=dtype, device=device)
    return _view(phys, shape, (phys.strides[-1], *phys.strides[:-1]))


def _view(owner: wp.array, shape: tuple, strides: tuple) -> wp.array:
    """A view of ``owner``'s memory with ``shape`` and ``strides`` (bytes) that keeps it alive (its
    deleter frees nothing and holds ``owner``)."""
    keep = lambda ptr, size, owner=owner: None  # noqa: E731
    return wp.array(
        ptr=owner.ptr, dtype=owner.dtype, shape=shape, strides=strides, device=owner.device, deleter=keep
    )


def with_own_scratch(cd: ContactData) -> ContactData:
    """The same buffers as ``cd`` but scratch of its own: for a host thread that steps some of the
    envs while another steps the others (``host_threads.py``)."""
    out = ContactData()
    for name in ContactData.vars:
        a = getattr(cd, name)
        setattr(out, name, scratch(a.shape, a.dtype, str(a.device)) if name in SCRATCH else a)
    return out
