"""MuJoCo's soft-constraint impedance (MuJoCo documentation, "Computation: soft constraints")."""

from __future__ import annotations

import warp as wp

from .buffers import vec5

wp.set_module_options({"enable_backward": False, "optimization_level": 3})

__all__ = ["impedance"]


@wp.func
def power(a: float, p: float) -> float:
    """``a ** p``, exact and without a call to ``powf`` for MuJoCo's default ``p = 2`` (and ``p = 1``)."""
    if p == 2.0:
        return a * a
    if p == 1.0:
        return a
    return wp.pow(a, p)


@wp.func
def impedance(solimp: vec5, depth: float) -> float:
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
        y = power(x, p) / power(mid, p - 1.0)
    else:
        y = 1.0 - power(1.0 - x, p) / power(1.0 - mid, p - 1.0)
    return dmin + y * (dmax - dmin)
