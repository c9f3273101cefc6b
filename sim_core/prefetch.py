"""Software prefetch in the CPU step: env ``w + 1``'s rows are requested while env ``w`` is stepped.

On the CPU a launch thread steps its envs one after another, and each env reads and writes its row
of some 40 per-env arrays: the state, the ten per-dof control and gain arrays, the poses, the
contact slots, the warm start, the geoms' sizes. While a batch's rows fit in the caches, every
step finds them there. Beyond that (``MIN_BYTES``; 16384 envs with a cube are 85 MB) the stages
that touch the rows cost up to 3x more per env than at 1024 envs, while those that compute in
registers cost the same (``docs/performance.md``, "Where a step's time goes"): the hardware
prefetchers do not keep up with 40 streams that each advance by one row per env (this VM has no
hardware counters to count the misses). ``emit_prefetch`` requests the cache lines of the next
env's rows at the start of each env's step, so they arrive during the 0.8-2.6 us the current env
takes in bench_sim's scenes. The requests change no value, so results are the same bit for bit
with or without them.

The step kernel takes a ``prefetch`` flag (``launch.record_step`` sets it from ``wanted``): below
``MIN_BYTES`` the rows come from cache and the requests would only cost instructions. On CUDA the
native functions compile to nothing and the flag is 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from .contact.pairs import PLANE, candidate_pairs
from .engine import actuation
from .engine.codegen import Emitter
from .engine.tree import Tree

__all__ = ["MIN_BYTES", "prefetch_read", "prefetch_write", "emit_prefetch", "row_bytes", "wanted"]

# a batch whose per-env rows take at least this many bytes has them prefetched: on the 2-core
# EPYC VM of docs/performance.md (1 MB L2 per core, 32 MB L3) the requests cost up to 4% of the
# arm's step at 1024 envs (3 MB of rows) and gained 10-19% for the arm at 4096 and 16384 envs,
# 2-9% with a cube at 1024 envs (5 MB) and 24-30% at 4096 and 16384 (scripts/bench_prefetch.py)
MIN_BYTES = 4 << 20

_SNIPPET = """
#if !defined(__CUDA_ARCH__)
if (n > 0) {
    const char* p = (const char*)a.data + (size_t)w * a.strides[0] + first;
    for (int o = 0; o < n; o += 64)
        __builtin_prefetch(p + o, RW, 3);
    __builtin_prefetch(p + n - 1, RW, 3);
}
#endif
"""


@wp.func_native(_SNIPPET.replace("RW", "0"))
def prefetch_read(a: wp.array2d(dtype=Any), w: int, first: int, n: int):
    """Request the cache lines of bytes ``[first, first + n)`` of row ``w`` of ``a``, to be read."""
    ...


@wp.func_native(_SNIPPET.replace("RW", "1"))
def prefetch_write(a: wp.array2d(dtype=Any), w: int, first: int, n: int):
    """As ``prefetch_read``, for lines about to be written."""
    ...


def emit_prefetch(t: Tree, e: Emitter, contacts: bool) -> None:
    """Request the rows of env ``w + 1`` that its step reads or writes, if the kernel's ``prefetch``
    flag is set: every dof's state, controls and gains; with contacts also the poses, the sizes and
    friction of the geoms of candidate pairs, and the contact slots and warm-start rows of the
    contacts env ``w + 1`` starts from."""
    m = t.m
    nv, nq = 4 * m.nv, 4 * m.nq
    first_pass = " and _item < 0" if contacts else ""  # not again in each item of a redo
    e(f"if prefetch != 0{first_pass} and w + 1 < qpos.shape[0]:  # sim_core/prefetch.py")
    with e.indent():
        e("_pw = w + 1")
        e(f"prefetch_read(qpos, _pw, 0, {nq})")
        e(f"prefetch_read(qvel, _pw, 0, {nv})")
        for name in actuation.CONTROL_ARRAYS:
            e(f"prefetch_read({name}, _pw, 0, {nv})")
        nslot = 1 + max((s.slot for s in t.segments), default=-1)
        if nslot:
            e(f"prefetch_read(body_inertial, _pw, 0, {16 * nslot})")
        e(f"prefetch_write(qfrc_actuator_out, _pw, 0, {nv})")
        if not contacts:
            return
        e(f"prefetch_write(xpos_s, _pw, 0, {12 * m.nbody})")
        e(f"prefetch_write(xquat_s, _pw, 0, {16 * m.nbody})")
        pairs, _ = candidate_pairs(m.mjmodel)
        for g in np.unique(pairs):  # a geom's size and friction, each its own few bytes of the row
            if int(m.mjmodel.geom_type[g]) != PLANE:
                e(f"prefetch_read(geoms.size, _pw, {12 * g}, 12)")
            e(f"prefetch_read(cd.friction, _pw, {4 * g}, 4)")
        e("_pn = wp.min(cd.nxt_wanted[_pw], cd.slots.pos.shape[1])  # the contacts it starts from")
        for name, size in (("pos", 12), ("normal", 12), ("dist", 4), ("geom", 8)):
            e(f"prefetch_read(cd.nxt.{name}, _pw, 0, _pn * {size})")
            e(f"prefetch_write(cd.slots.{name}, _pw, 0, _pn * {size})")
        e("prefetch_write(cd.force, _pw, 0, _pn * 12)")
        # the warm start's rows: one per contact, and the end of the list after them
        e("_pr = wp.min(_pn + 1, cd.lam_geom.shape[1])")
        for name, size in (("lam_geom", 8), ("lam_pos", 12), ("lam_prev", 12), ("lam_state", 4)):
            e(f"prefetch_write(cd.{name}, _pw, 0, _pr * {size})")


def row_bytes(arrays, n: int) -> int:
    """Bytes of one env's rows in ``arrays`` (Warp arrays, and structs of them, searched
    recursively): those with ``n`` rows and a row stride (not the CPU's shared scratch, stride 0)."""
    total = 0
    for a in arrays:
        if isinstance(a, wp.array):
            if a.ndim >= 1 and a.shape[0] == n and a.strides[0] > 0:
                total += a.strides[0]
        elif hasattr(a, "_cls"):  # a Warp struct instance
            total += row_bytes([getattr(a, k) for k in a._cls.vars], n)
    return total


def wanted(arrays, n: int, device) -> bool:
    """Whether a CPU step over ``n`` envs of ``arrays`` should prefetch (``MIN_BYTES``)."""
    return wp.get_device(device).is_cpu and n * row_bytes(arrays, n) >= MIN_BYTES
