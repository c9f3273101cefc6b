"""Which geom pairs can collide: MuJoCo's filter, applied once at build time, and the pair tables.

The filter: ``contype``/``conaffinity`` bits, never two geoms of one body or of welded bodies, and
never a parent and child body (unless the parent is the world). Pair types: plane with sphere,
capsule and box; sphere with sphere, capsule and box; capsule with capsule and box; box with box.
Other types (no model that passes the import checks has them) are listed in
``CollisionPlan.unsupported`` and skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import warp as wp

__all__ = [
    "PLANE",
    "SPHERE",
    "CAPSULE",
    "BOX",
    "GEOM_TYPES",
    "MOST_CONTACTS",
    "CollisionPlan",
    "Geoms",
    "candidate_pairs",
    "colliding_geoms",
    "colliding_bodies",
]

PLANE, SPHERE = int(mujoco.mjtGeom.mjGEOM_PLANE), int(mujoco.mjtGeom.mjGEOM_SPHERE)
CAPSULE, BOX = int(mujoco.mjtGeom.mjGEOM_CAPSULE), int(mujoco.mjtGeom.mjGEOM_BOX)
GEOM_TYPES = (PLANE, SPHERE, CAPSULE, BOX)  # the geom types that can collide
# the pairs of types the narrow phase implements, and the most contacts each produces
MOST_CONTACTS = {
    (PLANE, SPHERE): 1,
    (PLANE, CAPSULE): 2,
    (PLANE, BOX): 4,
    (SPHERE, SPHERE): 1,
    (SPHERE, CAPSULE): 1,
    (SPHERE, BOX): 1,
    (CAPSULE, CAPSULE): 1,
    (CAPSULE, BOX): 3,
    (BOX, BOX): 5,
}


@wp.struct
class Geoms:
    """A model's candidate pairs and geoms, on the device (one kernel argument).

    ``size`` is per env (``(nworld, ngeom)``), so objects can differ in size between envs.
    """

    pair: wp.array(dtype=wp.vec2i)  # (npair,) geom ids, geom1 type <= geom2 type
    type: wp.array(dtype=wp.int32)  # (ngeom,)
    body: wp.array(dtype=wp.int32)  # (ngeom,)
    pos: wp.array(dtype=wp.vec3)  # (ngeom,) in the body frame
    quat: wp.array(dtype=wp.quat)  # (ngeom,) (x, y, z, w), in the body frame
    size: wp.array2d(dtype=wp.vec3)  # (nworld, ngeom) MuJoCo's size: half extents, radius, half length


@dataclass
class CollisionPlan:
    """The candidate pairs of a model and its geoms' data on the device (``geoms``)."""

    pairs: np.ndarray  # (npair, 2) geom ids, geom1 type <= geom2 type
    unsupported: list[tuple[int, int]]  # pairs of types not implemented (skipped)
    geoms: Geoms

    @staticmethod
    def build(m: mujoco.MjModel, device: str, nworld: int = 1) -> CollisionPlan:
        pairs_np, unsupported = candidate_pairs(m)
        g = Geoms()
        g.pair = wp.array(pairs_np, dtype=wp.vec2i, device=device)
        g.type = wp.array(m.geom_type.astype(np.int32), dtype=wp.int32, device=device)
        g.body = wp.array(m.geom_bodyid.astype(np.int32), dtype=wp.int32, device=device)
        g.pos = wp.array(m.geom_pos.astype(np.float32), dtype=wp.vec3, device=device)
        g.quat = wp.array(m.geom_quat[:, [1, 2, 3, 0]].astype(np.float32), dtype=wp.quat, device=device)
        size = np.tile(m.geom_size.astype(np.float32)[None], (nworld, 1, 1))
        g.size = wp.array(size, dtype=wp.vec3, device=device)
        return CollisionPlan(pairs=pairs_np, unsupported=unsupported, geoms=g)


def candidate_pairs(m: mujoco.MjModel) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The model's candidate pairs ``(npair, 2)`` (geom1 type <= geom2 type, in the order every env
    visits them) and the pairs of types not implemented."""
    pairs, unsupported = [], []
    for g1 in range(m.ngeom):
        for g2 in range(g1 + 1, m.ngeom):
            if not _may_collide(m, g1, g2):
                continue
            a, b = (g1, g2) if m.geom_type[g1] <= m.geom_type[g2] else (g2, g1)
            key = (int(m.geom_type[a]), int(m.geom_type[b]))
            (pairs if key in MOST_CONTACTS else unsupported).append((a, b))
    return np.array(pairs, dtype=np.int32).reshape(-1, 2), unsupported


def colliding_geoms(m: mujoco.MjModel) -> np.ndarray:
    """``(ngeom,)`` bool: the geom has ``contype`` or ``conaffinity`` bits, so it takes part in
    collisions (with a partner whose bits match)."""
    return (m.geom_contype | m.geom_conaffinity) != 0


def colliding_bodies(m: mujoco.MjModel) -> list[int]:
    """The bodies with a colliding geom, in increasing order."""
    return sorted({int(b) for b in m.geom_bodyid[colliding_geoms(m)]})


def _may_collide(m: mujoco.MjModel, g1: int, g2: int) -> bool:
    """MuJoCo's filter for a geom pair (contype/conaffinity, same or welded body, parent-child)."""
    if not ((m.geom_contype[g1] & m.geom_conaffinity[g2]) or (m.geom_contype[g2] & m.geom_conaffinity[g1])):
        return False
    b1, b2 = int(m.geom_bodyid[g1]), int(m.geom_bodyid[g2])
    w1, w2 = int(m.body_weldid[b1]), int(m.body_weldid[b2])
    if w1 == w2:
        return False
    filter_parent = not (m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_FILTERPARENT)
    p1, p2 = int(m.body_weldid[m.body_parentid[w1]]), int(m.body_weldid[m.body_parentid[w2]])
    return not (filter_parent and w1 != 0 and w2 != 0 and (p1 == w2 or p2 == w1))
