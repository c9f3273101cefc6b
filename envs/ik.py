"""Differential inverse kinematics by damped least squares (Wampler 1986; Buss 2004):
``dq = J^T (J J^T + damping^2 I)^-1 dx``.

``dls`` is the per-env form the action kernels call (a 6 x 7 Jacobian, Cholesky of the 6 x 6
system); ``dls_step`` the batched torch form, for host-side controllers and as its reference.
"""

from __future__ import annotations

import torch
import warp as wp

__all__ = ["dls", "dls_step", "vec6", "vec7", "mat67"]

vec6 = wp.types.vector(length=6, dtype=wp.float32)
vec7 = wp.types.vector(length=7, dtype=wp.float32)
mat66 = wp.types.matrix(shape=(6, 6), dtype=wp.float32)
mat67 = wp.types.matrix(shape=(6, 7), dtype=wp.float32)


@wp.func
def dls(jac: mat67, dx: vec6, damping: float) -> vec7:
    """Joint displacements ``(7,)`` moving the task coordinates by ``dx`` ``(6,)`` (linear then
    angular rows of ``jac``); ``damping``: lambda in the task's units. A position-only task leaves
    rows 3-5 of ``jac`` and ``dx`` zero: they then drop out exactly (the system is block diagonal),
    which is the 3-row problem."""
    a = jac * wp.transpose(jac)
    for i in range(6):
        a[i, i] = a[i, i] + damping * damping
    low = mat66()  # Cholesky factor: a = low low^T
    for i in range(6):
        for j in range(i + 1):
            s = a[i, j]
            for k in range(j):
                s -= low[i, k] * low[j, k]
            if i == j:
                low[i, i] = wp.sqrt(s)
            else:
                low[i, j] = s / low[j, j]
    z = vec6()  # low z = dx
    for i in range(6):
        s = dx[i]
        for k in range(i):
            s -= low[i, k] * z[k]
        z[i] = s / low[i, i]
    y = vec6()  # low^T y = z
    for ii in range(6):
        i = 5 - ii
        s = z[i]
        for k in range(i + 1, 6):
            s -= low[k, i] * y[k]
        y[i] = s / low[i, i]
    return wp.transpose(jac) * y


def dls_step(jac: torch.Tensor, dx: torch.Tensor, damping: float) -> torch.Tensor:
    """Batched ``dls``: ``jac`` ``(B, m, n)`` task Jacobians, ``dx`` ``(B, m)`` task displacements,
    ``damping`` lambda; returns ``(B, n)`` joint displacements."""
    jt = jac.transpose(1, 2)
    eye = torch.eye(jac.shape[1], device=jac.device, dtype=jac.dtype)
    return (jt @ torch.linalg.solve(jac @ jt + (damping**2) * eye, dx[..., None]))[..., 0]
