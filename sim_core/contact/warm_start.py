"""The warm start: each row starts from the last substep's impulses of the same pair's row whose
contact point was nearest (``ContactData.lam_prev``, ``lam_geom``, ``lam_pos``)."""

from __future__ import annotations

import warp as wp

from .buffers import ContactData

wp.set_module_options({"enable_backward": False, "optimization_level": 3})

__all__ = ["warm_slot", "scale_warm_start", "forget_contacts"]


@wp.func
def warm_slot(cd: ContactData, w: int, key: wp.vec2i, p: wp.vec3) -> int:
    """The last substep's row to warm-start a row of pair ``key`` at ``p`` from: among its rows of
    the same pair not taken yet, the one whose contact point was nearest (the slots of a pair
    reorder as its contact points come and go: a box's corners, a pad's). Marks it taken; -1: none."""
    best = int(-1)
    best_d = float(1.0e30)
    j = int(0)
    while j < cd.lam_geom.shape[1]:
        kj = cd.lam_geom[w, j]
        if kj[0] == -1:
            break
        if kj[0] == key[0] and kj[1] == key[1]:
            dj = wp.length_sq(cd.lam_pos[w, j] - p)
            if dj < best_d:
                best = j
                best_d = dj
        j += 1
    if best >= 0:
        cd.lam_geom[w, best] = wp.vec2i(-3, -3)  # taken
    return best


@wp.func
def scale_warm_start(cd: ContactData, w: int, s: float):
    """Scale env ``w``'s warm-start impulses by ``s`` (for a step redone in substeps ``s`` times as long)."""
    c = int(0)
    while c < cd.lam_prev.shape[1]:
        cd.lam_prev[w, c] = cd.lam_prev[w, c] * s
        c += 1


@wp.func
def forget_contacts(cd: ContactData, w: int, start: int):
    """Drop the warm-start impulses of env ``w``'s slots from ``start`` on."""
    c = int(start)
    while c < cd.lam_geom.shape[1]:
        if cd.lam_geom[w, c][0] == -1:
            break  # the rest were forgotten already
        cd.lam_geom[w, c] = wp.vec2i(-1, -1)
        c += 1
