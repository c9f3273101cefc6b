"""An entity's base: the pose and velocity of a free body's root (``fixed=False``) or a fixed base's."""

from __future__ import annotations

import torch

from . import _select
from .errors import InvalidValueError
from .transforms import quat_rotate
from .types import JointType

__all__ = ["BaseMixin"]


class BaseMixin:
    """``RigidEntity``'s base getters and setters; shapes ``([n_envs,] ...)``, units SI."""

    def _free(self) -> tuple[int, int] | None:
        """(qpos address, dof address) of the base's free joint, or None for a fixed base."""
        if self.joints and self.joints[0].type == JointType.FREE:
            return self.joints[0].qs_idx[0], self.joints[0].dofs_idx[0]
        return None

    def _base_state(self, field: str, start: int, n: int, envs_idx) -> torch.Tensor:
        s = self.solver
        sel = _select.select_envs(envs_idx, s.n_envs, s.device)
        return _select.read(s._t[field], slice(start, start + n), sel, s.n_envs)

    def get_pos(self, envs_idx=None) -> torch.Tensor:
        """Base position in the world, ``([n_envs,] 3)``, m."""
        self.solver  # noqa: B018 (raises NotBuiltError before build)
        free = self._free()
        if free is None:
            return self.links[0].get_pos(envs_idx)
        return self._base_state("qpos", free[0], 3, envs_idx)

    def get_quat(self, envs_idx=None) -> torch.Tensor:
        """Base orientation (w, x, y, z), ``([n_envs,] 4)``."""
        self.solver  # noqa: B018
        free = self._free()
        if free is None:
            return self.links[0].get_quat(envs_idx)
        return self._base_state("qpos", free[0] + 3, 4, envs_idx)

    def get_vel(self, envs_idx=None) -> torch.Tensor:
        """Linear velocity of the base origin in the world, ``([n_envs,] 3)``, m/s (zero if fixed)."""
        self.solver  # noqa: B018
        free = self._free()
        if free is None:
            return torch.zeros_like(self.get_pos(envs_idx))
        return self._base_state("qvel", free[1], 3, envs_idx)

    def get_ang(self, envs_idx=None) -> torch.Tensor:
        """Angular velocity of the base in the world frame, ``([n_envs,] 3)``, rad/s (zero if fixed)."""
        self.solver  # noqa: B018
        free = self._free()
        if free is None:
            return torch.zeros_like(self.get_pos(envs_idx))
        local = self._base_state("qvel", free[1] + 3, 3, envs_idx)  # MuJoCo keeps it in the body frame
        return quat_rotate(self.get_quat(envs_idx), local)

    def _need_free(self, what: str) -> tuple[int, int]:
        self.solver  # noqa: B018
        free = self._free()
        if free is None:
            raise InvalidValueError(f"{what}: {self!r} has a fixed base; only free bodies (fixed=False) move")
        return free

    def set_pos(self, pos, envs_idx=None, zero_velocity=True, *, unsafe=False) -> None:
        """Move a free base to ``pos`` ``([n_envs,] 3)``, m; ``zero_velocity`` stops the body too."""
        q, d = self._need_free("set_pos")
        self._set_base(slice(q, q + 3), pos, "pos", 3, envs_idx, zero_velocity, d, unsafe)

    def set_quat(self, quat, envs_idx=None, zero_velocity=True, *, unsafe=False) -> None:
        """Turn a free base to ``quat`` (w, x, y, z) ``([n_envs,] 4)``, normalized; it must not be zero."""
        q, d = self._need_free("set_quat")

        def normalize(v: torch.Tensor) -> torch.Tensor:
            norm = v.norm(dim=-1, keepdim=True)
            if not unsafe and bool((norm < 1e-9).any()):
                raise InvalidValueError("quat: a rotation quaternion must have non-zero norm")
            return v / norm

        self._set_base(slice(q + 3, q + 7), quat, "quat", 4, envs_idx, zero_velocity, d, unsafe, normalize)

    def _set_base(self, cols, value, name, n, envs_idx, zero_velocity, dof, unsafe, transform=None) -> None:
        s = self.solver
        sel = _select.select_envs(envs_idx, s.n_envs, s.device)
        vals, batched = _select.to_values(value, name, sel, s.n_envs, (n,), s.device, check_finite=not unsafe)
        if transform is not None:
            vals = transform(vals)
        _select.write(s.state.qpos, cols, sel, vals, batched, s.n_envs)
        if zero_velocity:
            _select.write(
                s.state.qvel, slice(dof, dof + 6), sel, torch.zeros(6, device=s.device), False, s.n_envs
            )
        s.state_changed(sel)
