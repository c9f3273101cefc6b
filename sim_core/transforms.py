"""Batched rotations in torch for the host-side API (quaternions are (w, x, y, z), as in MuJoCo)."""

from __future__ import annotations

import torch

__all__ = ["quat_to_mat", "quat_rotate", "quat_mul", "quat_conj"]


def quat_to_mat(q: torch.Tensor) -> torch.Tensor:
    """Rotation matrices ``(..., 3, 3)`` of unit quaternions ``(..., 4)``."""
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        [
            1 - 2 * (y * y + z * z),
            2 * (x * y - w * z),
            2 * (x * z + w * y),
            2 * (x * y + w * z),
            1 - 2 * (x * x + z * z),
            2 * (y * z - w * x),
            2 * (x * z - w * y),
            2 * (y * z + w * x),
            1 - 2 * (x * x + y * y),
        ],
        dim=-1,
    ).reshape(q.shape[:-1] + (3, 3))


def quat_rotate(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate vectors ``v (..., 3)`` by unit quaternions ``q (..., 4)`` (broadcasting):
    ``v + w t + u x t`` with ``u`` the vector part and ``t = 2 u x v``."""
    u, v = torch.broadcast_tensors(q[..., 1:], v)
    t = 2.0 * torch.linalg.cross(u, v, dim=-1)
    return v + q[..., :1] * t + torch.linalg.cross(u, t, dim=-1)


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton products ``a b`` of quaternions ``(..., 4)`` (the rotation ``b``, then ``a``)."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        -1,
    )


def quat_conj(q: torch.Tensor) -> torch.Tensor:
    """Conjugates (inverses of unit quaternions) ``(..., 4)``."""
    return q * q.new_tensor([1.0, -1.0, -1.0, -1.0])
