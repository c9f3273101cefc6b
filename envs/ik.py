"""Batched differential inverse kinematics."""

from __future__ import annotations

import torch

__all__ = ["dls_step"]


def dls_step(jac: torch.Tensor, dx: torch.Tensor, damping: float) -> torch.Tensor:
    """Damped least squares (Wampler 1986; Buss 2004): ``dq = J^T (J J^T + damping^2 I)^-1 dx``.

    Args:
        jac: ``(B, m, n)`` task Jacobians.
        dx: ``(B, m)`` task-space displacements.
        damping: ``lambda`` in the task's units; trades accuracy for bounded ``dq`` near singularities.

    Returns:
        ``(B, n)`` joint displacements.
    """
    jt = jac.transpose(1, 2)
    eye = torch.eye(jac.shape[1], device=jac.device, dtype=jac.dtype)
    return (jt @ torch.linalg.solve(jac @ jt + (damping**2) * eye, dx[..., None]))[..., 0]
