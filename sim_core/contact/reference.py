"""The narrow phase run alone from the pair tables, for the checks against MuJoCo's ``mj_collision``
(``tests/test_collision.py``).

``collide_env`` walks the pair table at run time: per pair it loads the geoms' ids, types, bodies
and local frames and the bodies' poses from memory, and calls the same ``pair_apart`` and
``narrow_phase`` in the same pair order as the generated step, which has each pair written out
instead (``emit_pairs.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import warp as wp

from .narrow_phase import ContactSlots, make_slots, narrow_phase, pair_apart
from .pairs import CollisionPlan, Geoms

wp.set_module_options({"enable_backward": False, "optimization_level": 3})

__all__ = ["Contacts", "collide"]


@dataclass
class Contacts:
    """Per-env contacts, torch views of the output arrays: ``pos``, ``normal`` ``(nworld, max, 3)``,
    ``dist`` ``(nworld, max)``, ``geom`` ``(nworld, max, 2)``, ``count`` and ``overflow`` ``(nworld,)``;
    slots at and beyond ``count`` are stale."""

    pos: torch.Tensor
    normal: torch.Tensor
    dist: torch.Tensor
    geom: torch.Tensor
    count: torch.Tensor
    overflow: torch.Tensor


@wp.func
def collide_env(
    w: int,
    xpos: wp.array2d(dtype=wp.vec3),
    xquat: wp.array2d(dtype=wp.vec4),
    g: Geoms,
    margin: float,
    out: ContactSlots,
) -> int:
    """Write env ``w``'s contacts closer than ``margin`` into its slots; returns how many there were
    (more than the slots when the budget overflowed). The pairs from the tables in ``g``: the step
    has them written out for its model instead (``emit_pairs.py``)."""
    n = int(0)
    for p in range(g.pair.shape[0]):
        g1 = g.pair[p][0]
        g2 = g.pair[p][1]
        b1 = g.body[g1]
        b2 = g.body[g2]
        bq1 = xquat[w, b1]
        bq2 = xquat[w, b2]
        r1 = wp.quat(bq1[1], bq1[2], bq1[3], bq1[0])
        r2 = wp.quat(bq2[1], bq2[2], bq2[3], bq2[0])
        c1 = xpos[w, b1] + wp.quat_rotate(r1, g.pos[g1])  # geom centers and orientations, world
        c2 = xpos[w, b2] + wp.quat_rotate(r2, g.pos[g2])
        t1 = g.type[g1]
        t2 = g.type[g2]
        s1 = g.size[w, g1]
        s2 = g.size[w, g2]
        q1 = r1 * g.quat[g1]
        z1 = wp.quat_rotate(q1, wp.vec3(0.0, 0.0, 1.0))
        if not pair_apart(t1, t2, c1, z1, s1, c2, s2, margin):
            n = narrow_phase(n, w, t1, t2, c1, q1, z1, s1, c2, r2 * g.quat[g2], s2, g1, g2, margin, out)
    return n


@wp.kernel
def _collide_kernel(
    xpos: wp.array2d(dtype=wp.vec3),
    xquat: wp.array2d(dtype=wp.vec4),
    g: Geoms,
    margin: float,
    out: ContactSlots,
    count: wp.array(dtype=wp.int32),
    overflow: wp.array(dtype=wp.int32),
):
    w = wp.tid()
    n = collide_env(w, xpos, xquat, g, margin, out)
    count[w] = wp.min(n, out.pos.shape[1])
    overflow[w] = wp.max(n - out.pos.shape[1], 0)


def collide(
    plan: CollisionPlan, xpos: wp.array, xquat: wp.array, max_contacts: int, margin: float = 0.0
) -> Contacts:
    """Contacts of every env for body poses ``xpos``/``xquat`` ``(nworld, nbody)``."""
    nworld, device = xpos.shape[0], xpos.device
    slots = make_slots(nworld, max_contacts, device)
    count = wp.zeros(nworld, dtype=wp.int32, device=device)
    overflow = wp.zeros(nworld, dtype=wp.int32, device=device)
    wp.launch(
        _collide_kernel,
        dim=nworld,
        inputs=[xpos, xquat, plan.geoms, float(margin)],
        outputs=[slots, count, overflow],
        device=device,
    )
    t = wp.to_torch
    return Contacts(t(slots.pos), t(slots.normal), t(slots.dist), t(slots.geom), t(count), t(overflow))
