"""Per-env physical parameters of an entity for domain randomization: friction, and the mass and size
of a free object, changed without a rebuild."""

from __future__ import annotations

import torch

from . import _select, morphs
from .engine.quaternion import quat_to_mat_np
from .engine.segments import inertial_slots
from .errors import InvalidValueError

__all__ = ["ParamsMixin"]


class ParamsMixin:
    """``RigidEntity``'s friction, mass and size getters and setters; shapes ``([n_envs,] ...)``."""

    # ---- contact parameters --------------------------------------------------------------------
    def _friction_field(self, name: str) -> torch.Tensor:
        s = self.solver
        if s.contacts is None:
            raise InvalidValueError(f"{name}: this scene has no colliding geom pairs (or collision is off)")
        return s.params.geom_friction

    def get_friction(self, envs_idx=None) -> torch.Tensor:
        """Sliding friction coefficient of each of the entity's geoms, ``([n_envs,] n_geoms)``. A
        contact uses the larger coefficient of its two geoms (MuJoCo's rule)."""
        field = self._friction_field("get_friction")
        sel = _select.select_envs(envs_idx, self.solver.n_envs, self.solver.device)
        return _select.read(field, self.geoms_idx, sel, self.solver.n_envs).clone()

    def set_friction(self, friction, envs_idx=None, *, unsafe=False) -> None:
        """Set the sliding friction coefficient (>= 0) of all the entity's geoms: a number for every
        selected env, or ``(n_envs,)`` / ``(len(envs_idx),)`` values, one per env (for domain
        randomization without rebuilding). ``unsafe`` skips the value checks (no device reads)."""
        s = self.solver
        field = self._friction_field("set_friction")
        sel = _select.select_envs(envs_idx, s.n_envs, s.device)
        vals, batched = _select.to_values(
            friction, "friction", sel, s.n_envs, (), s.device, check_finite=not unsafe
        )
        if not unsafe and bool((vals < 0).any()):
            raise InvalidValueError("friction: coefficients must be >= 0")
        cols = torch.as_tensor(self.geoms_idx, device=s.device)
        vals = vals[..., None].expand(vals.shape + (len(self.geoms_idx),))
        _select.write(field, cols, sel, vals, batched, s.n_envs)

    # ---- per-env mass and size of a free object ----------------------------------------------
    def _slot(self, what: str) -> int:
        """The per-env inertial slot (``segments.inertial_slots``) of the entity's base body."""
        slots = inertial_slots(self.solver.model)
        if self._free() is None or self.links[0].idx not in slots:
            raise InvalidValueError(
                f"{what}: the base of {self!r} is not a free body that carries no other body (fixed=False)"
            )
        return slots.index(self.links[0].idx)

    def get_mass(self, envs_idx=None) -> torch.Tensor:
        """Mass of the entity's free base body (one that carries no other body), ``([n_envs])``, kg."""
        s, k = self.solver, self._slot("get_mass")
        sel = _select.select_envs(envs_idx, s.n_envs, s.device)
        scale = _select.read(s.params.body_inertial[:, k], slice(0, 1), sel, s.n_envs)[..., 0]
        return scale * float(s.model.body_mass[self.links[0].idx])

    def set_mass(self, mass, envs_idx=None, *, unsafe=False) -> None:
        """Set the mass (> 0, kg) of the entity's free base body (one that carries no other body, such
        as an object) per env: a number, or ``(n_envs,)`` / ``(len(envs_idx),)`` values. Its inertia
        scales with it (same shape, another density). No rebuild: for domain randomization.
        ``unsafe`` skips the value checks (no device reads)."""
        s = self.solver
        self._slot("set_mass")
        sel = _select.select_envs(envs_idx, s.n_envs, s.device)
        vals, batched = _select.to_values(mass, "mass", sel, s.n_envs, (), s.device, check_finite=not unsafe)
        if not unsafe and not bool((vals > 0).all()):
            raise InvalidValueError("mass: expected masses > 0 kg")
        km = vals / float(s.model.body_mass[self.links[0].idx])

        def scaled(old: torch.Tensor) -> torch.Tensor:  # same shape: every moment scales with the mass
            k = km.expand(old.shape[:-1])
            return torch.cat([k[..., None], old[..., 1:] * (k / old[..., 0])[..., None]], dim=-1)

        self._update_inertial("set_mass", sel, batched, vals, scaled)

    def _update_inertial(self, what: str, sel, batched: bool, vals: torch.Tensor, fn) -> None:
        """``body_inertial`` rows of the selected envs = ``fn(their current rows)`` (rows: (k, 4))."""
        s, k = self.solver, self._slot(what)
        field = s.params.body_inertial[:, k]  # (nworld, 4): mass scale, principal moment scales
        full = batched and sel.mask is not None and vals.shape[0] == s.n_envs  # values for all rows
        new = fn(field if full else _select.read(field, slice(0, 4), sel, s.n_envs))
        _select.write(field, slice(0, 4), sel, new, new.ndim == 2, s.n_envs)

    def set_size(self, size, envs_idx=None, *, unsafe=False) -> None:
        """Set a free ``Box`` entity's full edge lengths ``([k,] 3)`` (> 0, m) per env, for domain
        randomization without a rebuild: its collision shape changes, its mass stays and its inertia
        follows the new shape. The renderer draws each env at its own size.
        ``unsafe`` skips the value checks (no device reads)."""
        s = self.solver
        self._slot("set_size")
        if not isinstance(self.morph, morphs.Box) or s.contacts is None:
            raise InvalidValueError("set_size: supported for Box entities in a scene with collisions")
        sel = _select.select_envs(envs_idx, s.n_envs, s.device)
        vals, batched = _select.to_values(size, "size", sel, s.n_envs, (3,), s.device, check_finite=not unsafe)
        if not unsafe and not bool((vals > 0).all()):
            raise InvalidValueError("size: expected edge lengths > 0 m")
        # a box's moment about its principal axis u_a (a column of the body's inertia frame) is
        # u_a^T diag(hy^2 + hz^2, hx^2 + hz^2, hx^2 + hy^2) u_a times m / 3 (half edges h)
        rot = quat_to_mat_np(s.model.mjmodel.body_iquat[self.links[0].idx])
        w = torch.as_tensor(rot.T**2, dtype=torch.float32, device=s.device)  # (principal, body axes)

        def moments(edges: torch.Tensor) -> torch.Tensor:
            h2 = (edges / 2) ** 2
            return (h2.sum(-1, keepdim=True) - h2) @ w.T

        built = torch.as_tensor(self.morph.size, dtype=torch.float32, device=s.device)
        shape = moments(vals) / moments(built)

        def reshaped(old: torch.Tensor) -> torch.Tensor:  # same mass, moments of the new shape
            return torch.cat([old[..., :1], old[..., :1] * shape.expand(old.shape[:-1] + (3,))], dim=-1)

        self._update_inertial("set_size", sel, batched, vals, reshaped)
        half = (vals / 2).unsqueeze(-2).expand(vals.shape[:-1] + (len(self.geoms_idx), 3))
        cols = torch.as_tensor(self.geoms_idx, device=s.device)
        _select.write(s.params.geom_size, cols, sel, half, batched, s.n_envs)
        s.state_changed(sel)  # the contacts the last step ended with are of the old shape

    def get_size(self, envs_idx=None) -> torch.Tensor:
        """Full edge lengths of a free ``Box`` entity, ``([n_envs,] 3)``, m."""
        s = self.solver
        if not isinstance(self.morph, morphs.Box) or s.contacts is None:
            raise InvalidValueError("get_size: supported for Box entities in a scene with collisions")
        sel = _select.select_envs(envs_idx, s.n_envs, s.device)
        return 2.0 * _select.read(s.params.geom_size[:, self.geoms_idx[0]], slice(0, 3), sel, s.n_envs)
