"""The contact frame outside the step: the tangents ``t1``, ``t2`` the solver's rows use
(``solver.contact_tangent``) for torch tensors of normals, so the frame has one definition; the API
turns the solver's impulses into world-frame forces with it (``RigidSolver.get_contacts``)."""

from __future__ import annotations

import torch
import warp as wp

from .solver import contact_tangent

__all__ = ["contact_frame"]


@wp.kernel(enable_backward=False)
def _frames(normal: wp.array(dtype=wp.vec3), t1: wp.array(dtype=wp.vec3), t2: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    n = normal[i]
    t = contact_tangent(n)
    t1[i] = t
    t2[i] = wp.cross(n, t)


def contact_frame(normal: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Tangents ``t1, t2 (..., 3)`` float32 completing unit normals ``(..., 3)`` to the right-handed
    frame ``(n, t1, t2)`` of the solver's rows (``t1 = n x e_x``, or ``n x e_y`` when
    ``|n_x| > 0.5``; ``t2 = n x t1``), on the normals' device."""
    n = normal.detach().reshape(-1, 3).to(torch.float32).contiguous()
    t1, t2 = torch.empty_like(n), torch.empty_like(n)
    if n.shape[0]:
        vec = lambda x: wp.from_torch(x, dtype=wp.vec3)  # noqa: E731
        wp.launch(
            _frames,
            dim=n.shape[0],
            inputs=[vec(n)],
            outputs=[vec(t1), vec(t2)],
            device=wp.device_from_torch(n.device),
        )
    return t1.reshape(normal.shape), t2.reshape(normal.shape)
