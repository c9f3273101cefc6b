"""Geometric Jacobians of points fixed to links, batched over envs with torch (for differential IK).

For a point ``p`` on link ``b``, ``J`` maps the dof velocities ``qvel`` to the point's world linear
velocity (rows 0-2) and the link's world angular velocity (rows 3-5), as MuJoCo's ``mj_jac`` does.
A dof moves ``b`` only if its body is ``b`` or an ancestor of ``b``; its column is

- hinge with world axis ``a`` through anchor ``c``: ``(a x (p - c), a)``,
- slide with world axis ``a``: ``(a, 0)``,
- free joint: the three translational dofs are world axes ``(e_k, 0)``; the three rotational dofs
  turn about the body's own axes ``R e_k`` through the body origin.
"""

from __future__ import annotations

import numpy as np
import torch

from .transforms import quat_to_mat
from .types import JointType, Model

__all__ = ["JacobianPlan"]


class JacobianPlan:
    """Per-dof constants for the Jacobian of one link over a block of dofs ``[dof_start, dof_end)``.

    Built once per (link, dof block) on the host; ``__call__`` is pure batched torch on the device.
    """

    def __init__(self, model: Model, body: int, dof_start: int, dof_end: int, device: torch.device):
        chain, b = set(), body
        while b > 0:
            chain.add(b)
            b = int(model.body_parentid[b])
        dofs = np.arange(dof_start, dof_end)
        jnt = model.dof_jntid[dofs]
        jtype = model.jnt_type[jnt]
        k = dofs - model.jnt_dofadr[jnt]  # index of the dof within its joint
        axis = model.jnt_axis[jnt].copy()
        free = jtype == JointType.FREE
        axis[free] = np.eye(3)[k[free] % 3]
        as_t = lambda a, dt=torch.float32: torch.as_tensor(np.asarray(a), dtype=dt, device=device)  # noqa: E731
        self.body = body
        self.dof_body = as_t(model.dof_bodyid[dofs], torch.int64)  # (n,)
        self.axis_local = as_t(axis)  # (n, 3) in the dof's body frame (free translation: world)
        self.anchor_local = as_t(model.jnt_pos[jnt])  # (n, 3) in the dof's body frame
        self.active = as_t([int(model.dof_bodyid[d]) in chain for d in dofs])  # (n,) 1 if it moves the link
        self.world_axis = as_t(free & (k < 3))  # free translation: axis already in the world frame
        self.rotational = as_t((jtype == JointType.HINGE) | (free & (k >= 3)))  # (n,) 1 for turning dofs

    def __call__(self, xpos: torch.Tensor, xquat: torch.Tensor, local_point: torch.Tensor) -> torch.Tensor:
        """``(B, 6, n)`` Jacobian from body poses ``xpos (B, nbody, 3)``, ``xquat (B, nbody, 4)`` and the
        point ``local_point (3,)`` or ``(B, 3)`` in the link frame."""
        rot = quat_to_mat(xquat[:, self.dof_body])  # (B, n, 3, 3)
        axis_world = (rot @ self.axis_local[..., None])[..., 0]
        axis = torch.where(self.world_axis[:, None] > 0, self.axis_local, axis_world)  # (B, n, 3)
        anchor = xpos[:, self.dof_body] + (rot @ self.anchor_local[..., None])[..., 0]
        link_rot = quat_to_mat(xquat[:, self.body])  # (B, 3, 3)
        point = xpos[:, self.body] + (link_rot @ local_point.reshape(-1, 3, 1))[..., 0]  # (B, 3)
        r = self.rotational[:, None]
        lin = torch.where(r > 0, torch.linalg.cross(axis, point[:, None, :] - anchor, dim=-1), axis)
        ang = axis * r
        jac = torch.cat([lin, ang], dim=-1) * self.active[:, None]  # (B, n, 6)
        return jac.transpose(1, 2)
