"""Contact slots and the geometry the pair functions share (``narrow_phase``, ``box_box``).

``ContactSlots`` holds every env's fixed budget of contact slots; ``emit`` writes one contact (or
counts it as overflow once the budget is full), in MuJoCo's conventions (``narrow_phase.py``).
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False, "optimization_level": 3})

__all__ = [
    "ContactSlots",
    "emit",
    "closest_on_segment",
    "segments_closest_t",
    "deepest",
    "copy_contacts",
    "make_slots",
]


@wp.struct
class ContactSlots:
    """The contact slots of every env (one argument instead of four)."""

    pos: wp.array2d(dtype=wp.vec3)
    normal: wp.array2d(dtype=wp.vec3)
    dist: wp.array2d(dtype=wp.float32)
    geom: wp.array2d(dtype=wp.vec2i)


@wp.func
def emit(
    n: int,
    w: int,
    pos: wp.vec3,
    normal: wp.vec3,
    dist: float,
    g1: int,
    g2: int,
    margin: float,
    out: ContactSlots,
) -> int:
    """Write a contact into slot ``n`` if it is close enough and the budget has room; return the new
    number of contacts wanted (which may exceed the budget: the excess is the overflow)."""
    if dist >= margin:
        return n
    if n < out.pos.shape[1]:
        out.pos[w, n] = pos
        out.normal[w, n] = normal
        out.dist[w, n] = dist
        out.geom[w, n] = wp.vec2i(g1, g2)
    return n + 1


@wp.func
def closest_on_segment(a: wp.vec3, b: wp.vec3, p: wp.vec3) -> wp.vec3:
    ab = b - a
    t = wp.clamp(wp.dot(p - a, ab) / wp.max(wp.dot(ab, ab), 1.0e-20), 0.0, 1.0)
    return a + ab * t


@wp.func
def segments_closest_t(a0: wp.vec3, a1: wp.vec3, b0: wp.vec3, b1: wp.vec3) -> wp.vec2:
    """Parameters (s, t) in [0, 1] of the closest points of segments a and b (Ericson, RTCD 5.1.9)."""
    d1 = a1 - a0
    d2 = b1 - b0
    r = a0 - b0
    aa = wp.dot(d1, d1)
    ee = wp.dot(d2, d2)
    f = wp.dot(d2, r)
    c = wp.dot(d1, r)
    bb = wp.dot(d1, d2)
    denom = aa * ee - bb * bb
    s = float(0.0)
    if denom > 1.0e-12:
        s = wp.clamp((bb * f - c * ee) / denom, 0.0, 1.0)
    t = (bb * s + f) / wp.max(ee, 1.0e-20)
    if t < 0.0:
        t = 0.0
        s = wp.clamp(-c / wp.max(aa, 1.0e-20), 0.0, 1.0)
    elif t > 1.0:
        t = 1.0
        s = wp.clamp((bb - c) / wp.max(aa, 1.0e-20), 0.0, 1.0)
    return wp.vec2(s, t)


@wp.func
def deepest(w: int, n: int, out: ContactSlots) -> float:
    """The most negative ``dist`` of env ``w``'s first ``n`` contacts (as many as fit), 0 if none."""
    d = float(0.0)
    for c in range(wp.min(n, out.pos.shape[1])):
        d = wp.min(d, out.dist[w, c])
    return d


@wp.func
def copy_contacts(w: int, src: ContactSlots, dst: ContactSlots, n: int):
    """Env ``w``'s first ``n`` contacts of ``src`` into ``dst``."""
    for c in range(n):
        dst.pos[w, c] = src.pos[w, c]
        dst.normal[w, c] = src.normal[w, c]
        dst.dist[w, c] = src.dist[w, c]
        dst.geom[w, c] = src.geom[w, c]


def make_slots(nworld: int, max_contacts: int, device) -> ContactSlots:
    """Zeroed contact slots for ``nworld`` envs of ``max_contacts`` each."""
    slots = ContactSlots()
    slots.pos = wp.zeros((nworld, max_contacts), dtype=wp.vec3, device=device)
    slots.normal = wp.zeros((nworld, max_contacts), dtype=wp.vec3, device=device)
    slots.dist = wp.zeros((nworld, max_contacts), dtype=wp.float32, device=device)
    slots.geom = wp.zeros((nworld, max_contacts), dtype=wp.vec2i, device=device)
    return slots
