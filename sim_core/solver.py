"""The rigid solver: owns the Model, the per-env Data and the generated kernels (``scene.sim.rigid_solver``)."""

from __future__ import annotations

import numpy as np
import torch
import warp as wp

from . import _select, io, step
from .codegen import Tree
from .errors import InvalidValueError
from .options import SimOptions
from .types import Data, Model

__all__ = ["RigidSolver"]


@wp.kernel(enable_backward=False)
def _nonfinite_rows(
    qpos: wp.array2d(dtype=wp.float32), qvel: wp.array2d(dtype=wp.float32), bad: wp.array(dtype=wp.bool)
):
    """``bad[w]``: some coordinate of env ``w`` is NaN or inf (a sum is non-finite iff a term is, or it
    overflows, which a sane state never does)."""
    w = wp.tid()
    total = float(0.0)
    for i in range(qpos.shape[1]):
        total += qpos[w, i]
    for i in range(qvel.shape[1]):
        total += qvel[w, i]
    bad[w] = not wp.isfinite(total)


class RigidSolver:
    """Batched articulated-body solver over ``nworld = max(n_envs, 1)`` copies of one model."""

    def __init__(self, model: Model, n_envs: int, options: SimOptions, device: torch.device, wp_device: str):
        self.model = model
        self.n_envs = n_envs
        self.nworld = max(n_envs, 1)
        self.options = options
        self.device = device
        self.wp_device = wp_device
        self.tree = Tree(model)
        self.kernels = step.load_kernels(self.tree, options.substeps)
        self.data: Data = io.make_data(model, self.nworld, wp_device)
        self._gravity = wp.vec3(*options.gravity)
        self._graph = None
        self._steps = 0
        # torch views of the Warp arrays (shared memory): the API reads and writes through these
        self.t = {name: wp.to_torch(getattr(self.data, name)) for name in Data.__dataclass_fields__}
        self._init = {name: self.t[name][:1].clone() for name in self._RESET_FIELDS}
        o = options
        self._step_cmd = step.record_step(self.kernels, self.data, self._gravity, o.substep_dt, o.substeps)
        self._poses_fresh = False  # False: some env's poses may be out of date (see _stale)
        self._stale = torch.ones(self.nworld, dtype=torch.bool, device=device)  # per env, on the device
        self._fk_cmd = step.record_fk(self.kernels, self.data, wp.from_torch(self._stale, dtype=wp.bool))
        self._bad = torch.empty(self.nworld, dtype=torch.bool, device=device)
        self._bad_cmd = wp.launch(
            _nonfinite_rows,
            dim=self.nworld,
            inputs=[self.data.qpos, self.data.qvel],
            outputs=[wp.from_torch(self._bad)],
            device=wp_device,
            record_cmd=True,
        )

    _RESET_FIELDS = (
        "qpos",
        "qvel",
        "ctrl_mode",
        "ctrl_position",
        "ctrl_velocity",
        "ctrl_force",
        "qfrc_applied",
        "qfrc_actuator",
    )

    @property
    def n_qs(self) -> int:
        return self.model.nq

    @property
    def n_dofs(self) -> int:
        return self.model.nv

    def step(self) -> None:
        """Advance every env by ``dt`` (``substeps`` substeps); no host round trip."""
        use_graph = self.options.use_cuda_graph and self.device.type == "cuda"
        if use_graph and self._graph is not None:
            wp.capture_launch(self._graph)
        elif use_graph and self._steps > 0:  # the kernels are loaded by now: capture, then replay
            with wp.ScopedCapture(device=self.wp_device) as capture:
                self._step_cmd.launch()
            self._graph = capture.graph
            wp.capture_launch(self._graph)
        else:
            self._step_cmd.launch()
        self._steps += 1
        self.state_changed()

    def state_changed(self, sel: _select.EnvSel | None = None) -> None:
        """Mark the link poses of the selected envs (default: all) out of date after a state change;
        the next ``poses()`` recomputes those envs only."""
        if sel is None or (sel.idx is None and sel.mask is None):
            self._stale.fill_(True)
        elif sel.mask is not None:
            self._stale |= sel.mask
        else:
            self._stale[sel.idx] = True
        self._poses_fresh = False

    def poses(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Body positions ``(nworld, nbody, 3)`` and orientations (w, x, y, z) ``(nworld, nbody, 4)``
        for the current state, recomputed now in the envs whose state changed since the last call."""
        if not self._poses_fresh:
            self._fk_cmd.launch()
            self._stale.fill_(False)
            self._poses_fresh = True
        return self.t["xpos"], self.t["xquat"]

    def forward(self) -> dict[str, torch.Tensor]:
        """Evaluate every stage at the current state without stepping (for inspection and tests).

        Returns torch tensors ``qM`` (nworld, nv, nv) with armature, ``qfrc_bias`` (nworld, nv),
        ``qfrc_actuator`` (nworld, nv) and ``qacc`` (nworld, nv), the unconstrained acceleration
        (MuJoCo's ``qacc_smooth``).
        """
        out = step.launch_forward(self.kernels, self.data, self._gravity)
        self._stale.fill_(False)
        self._poses_fresh = True
        return {k: wp.to_torch(v) for k, v in out.items()}

    def reset(self, envs_idx=None) -> None:
        """Restore the initial state and controls of the selected envs (gains are kept)."""
        sel = _select.select_envs(envs_idx, self.n_envs, self.device)
        for name in self._RESET_FIELDS:
            target = self.t[name]
            _select.write(target, slice(None), sel, self._init[name][0].to(target.dtype), False, self.n_envs)
        self.state_changed(sel)

    def get_error_envs_mask(self) -> torch.Tensor:
        """``([n_envs,])`` bool, True where an env's state is not finite (NaN or inf in qpos or qvel).

        One small kernel on the device, no host read; an env stays flagged until its state is set
        or reset to finite values.
        """
        self._bad_cmd.launch()
        bad = self._bad.clone()
        return bad[0] if self.n_envs == 0 else bad

    def get_qpos(self, envs_idx=None) -> torch.Tensor:
        """Generalized positions, ``([n_envs,] n_qs)`` (a view when ``envs_idx`` is None)."""
        sel = _select.select_envs(envs_idx, self.n_envs, self.device)
        return _select.read(self.t["qpos"], slice(None), sel, self.n_envs)

    def get_qvel(self, envs_idx=None) -> torch.Tensor:
        """Generalized velocities, ``([n_envs,] n_dofs)`` (a view when ``envs_idx`` is None)."""
        sel = _select.select_envs(envs_idx, self.n_envs, self.device)
        return _select.read(self.t["qvel"], slice(None), sel, self.n_envs)

    def set_qpos(self, qpos, envs_idx=None) -> None:
        """Set generalized positions ``([n_envs,] n_qs)`` and update the link poses.

        Free joints' quaternions must have non-zero norm; they are normalized when stored.
        """
        sel = _select.select_envs(envs_idx, self.n_envs, self.device)
        vals, batched = _select.to_values(qpos, "qpos", sel, self.n_envs, (self.n_qs,), self.device)
        quat_cols = [a + k for a in self.tree.free_qposadr() for k in range(3, 7)]
        if quat_cols:
            quats = vals[..., quat_cols].reshape(vals.shape[:-1] + (-1, 4))
            norms = quats.norm(dim=-1, keepdim=True)
            if bool((norms < 1e-9).any()):
                raise InvalidValueError("qpos: a free joint's quaternion has zero norm")
            vals = vals.clone()
            vals[..., quat_cols] = (quats / norms).reshape(vals.shape[:-1] + (-1,))
        _select.write(self.t["qpos"], slice(None), sel, vals, batched, self.n_envs)
        self.state_changed(sel)

    def set_qvel(self, qvel, envs_idx=None) -> None:
        """Set generalized velocities ``([n_envs,] n_dofs)``."""
        sel = _select.select_envs(envs_idx, self.n_envs, self.device)
        vals, batched = _select.to_values(qvel, "qvel", sel, self.n_envs, (self.n_dofs,), self.device)
        _select.write(self.t["qvel"], slice(None), sel, vals, batched, self.n_envs)

    def dof_qposadr(self) -> np.ndarray:
        """(nv,) qpos column of each hinge/slide dof, -1 for a free joint's dofs."""
        return self.tree.dof_qadr.copy()
