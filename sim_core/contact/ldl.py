"""Dense ``L D L^T`` factor and solve of a small symmetric positive definite system per env, in
place in a ``(nworld, k, k)`` array: the active normal rows' system of the contact solver."""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False, "optimization_level": 3})

__all__ = ["ldl_factor", "ldl_solve", "PIVOT_MIN"]

PIVOT_MIN = 1.0e-6  # relative to its row's diagonal: a pivot this small drops the row (its unknown is 0)


@wp.func
def ldl_factor(m: wp.array3d(dtype=wp.float32), w: int, k: int):
    """The lower triangle of the symmetric positive definite ``m[w, :k, :k]`` = its ``L D L^T``
    factor in place (Cholesky without square roots; no pivoting: an SPD matrix needs none, and a
    diagonal scaling of the system would not change it): the unit lower triangle's multipliers
    below the diagonal, ``1 / d`` on it. A pivot below ``PIVOT_MIN`` of its diagonal (a row that
    round-off made dependent on the earlier ones) drops its row: its multipliers and ``1 / d`` are
    0, so its unknown is 0 and no other row sees it."""
    j = int(0)
    while j < k:
        a = m[w, j, j]
        d = a
        p = int(0)
        while p < j:  # m[p, j] above the diagonal: L_jp d_p
            d -= m[w, j, p] * m[w, p, j]
            p += 1
        ok = d > PIVOT_MIN * a
        dinv = wp.where(ok, 1.0 / d, 0.0)
        i = int(j + 1)
        while i < k:
            x = m[w, i, j]
            p = int(0)
            while p < j:
                x -= m[w, i, p] * m[w, p, j]
                p += 1
            m[w, j, i] = x  # L_ij d_j, kept above the diagonal for the rows below
            m[w, i, j] = x * dinv
            i += 1
        m[w, j, j] = dinv
        j += 1


@wp.func
def ldl_solve(m: wp.array3d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), w: int, k: int):
    """``b[w, :k]`` = the solution of the system ``ldl_factor`` factored, for right-hand side ``b``."""
    r = int(0)
    while r < k:
        x = b[w, r]
        c = int(0)
        while c < r:
            x -= m[w, r, c] * b[w, c]
            c += 1
        b[w, r] = x
        r += 1
    r = int(0)
    while r < k:
        b[w, r] = b[w, r] * m[w, r, r]
        r += 1
    rr = int(0)
    while rr < k:
        r = k - 1 - rr
        x = b[w, r]
        q = int(r + 1)
        while q < k:
            x -= m[w, q, r] * b[w, q]
            q += 1
        b[w, r] = x
        rr += 1
