"""Rigid entities (an articulated model or a primitive), their links and joints: the per-dof API.

Every getter/setter/controller takes ``dofs_idx_local=None`` (or ``links_idx_local``) and
``envs_idx=None``; shapes are ``([n_envs,] ...)``. See ``_select`` for the accepted forms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import mujoco
import torch

from . import _select
from .entity_base import BaseMixin
from .entity_params import ParamsMixin
from .errors import InvalidValueError, NotBuiltError
from .io import EntityRange
from .jacobian import JacobianPlan
from .materials import Rigid
from .morphs import Morph
from .types import CtrlMode, JointType

_MODE_VALUES = {mode: torch.tensor(int(mode), dtype=torch.int32) for mode in CtrlMode}

if TYPE_CHECKING:
    from .scene import Scene
    from .solver import RigidSolver

__all__ = ["RigidEntity", "RigidLink", "RigidJoint"]


class RigidLink:
    """One body of an entity."""

    def __init__(self, entity: RigidEntity, idx: int, name: str):
        self.entity, self.idx, self.name = entity, idx, name
        self.idx_local = idx - entity._range.body_start

    def get_pos(self, envs_idx=None) -> torch.Tensor:
        """World position of the link frame, ``([n_envs,] 3)``, m."""
        return self.entity.get_links_pos([self.idx_local], envs_idx=envs_idx)[..., 0, :]

    def get_quat(self, envs_idx=None) -> torch.Tensor:
        """World orientation of the link frame (w, x, y, z), ``([n_envs,] 4)``."""
        return self.entity.get_links_quat([self.idx_local], envs_idx=envs_idx)[..., 0, :]

    def __repr__(self) -> str:
        return f"RigidLink({self.name!r}, idx_local={self.idx_local})"


class RigidJoint:
    """One joint of an entity; ``dofs_idx_local`` are its dofs within the entity."""

    def __init__(
        self,
        entity: RigidEntity,
        idx: int,
        name: str,
        jtype: JointType,
        dofs_idx: list[int],
        qs_idx: list[int],
    ):
        self.entity, self.idx, self.name, self.type = entity, idx, name, jtype
        self.dofs_idx = dofs_idx
        self.qs_idx = qs_idx
        self.dofs_idx_local = [d - entity._dof_start for d in dofs_idx]
        self.qs_idx_local = [q - entity._q_start for q in qs_idx]

    def __repr__(self) -> str:
        return f"RigidJoint({self.name!r}, {self.type.name}, dofs_idx_local={self.dofs_idx_local})"


class RigidEntity(BaseMixin, ParamsMixin):
    """An entity added to a scene. Usable (getters, setters, controllers) after ``scene.build()``."""

    def __init__(self, scene: Scene, idx: int, morph: Morph, material: Rigid | None = None):
        self.scene, self.idx, self.morph, self.material = scene, idx, morph, material
        self._solver: RigidSolver | None = None

    # ---- set up by Scene.build -------------------------------------------------------------
    def _bind(self, solver: RigidSolver, rng: EntityRange) -> None:
        m = solver.model
        self._solver, self._range = solver, rng
        prefix = f"e{self.idx}/"
        strip = lambda n: n[len(prefix) :] if n.startswith(prefix) else n  # noqa: E731
        self.links = [
            RigidLink(self, b, strip(m.body_names[b]))
            for b in range(rng.body_start, rng.body_start + rng.nbody)
        ]
        joints = range(rng.jnt_start, rng.jnt_start + rng.njnt)
        self._dof_start = int(m.jnt_dofadr[rng.jnt_start]) if rng.njnt else 0
        self._q_start = int(m.jnt_qposadr[rng.jnt_start]) if rng.njnt else 0
        self.joints = []
        for j in joints:
            jt = JointType(int(m.jnt_type[j]))
            nd, nq = (6, 7) if jt == JointType.FREE else (1, 1)
            d0, q0 = int(m.jnt_dofadr[j]), int(m.jnt_qposadr[j])
            self.joints.append(
                RigidJoint(
                    self,
                    j,
                    strip(m.jnt_names[j]),
                    jt,
                    list(range(d0, d0 + nd)),
                    list(range(q0, q0 + nq)),
                )
            )
        self.n_dofs = sum(len(j.dofs_idx) for j in self.joints)
        self.n_qs = sum(len(j.qs_idx) for j in self.joints)
        self._dof_qadr = torch.as_tensor(solver.dof_qposadr()[self._dof_start : self._dof_start + self.n_dofs])
        mjm = m.mjmodel
        bodies = range(rng.body_start, rng.body_start + rng.nbody)
        name = lambda g: mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_GEOM, g)  # noqa: E731
        self.geoms_idx = [  # the entity's geoms (a plane is a geom of the world body)
            g for g in range(mjm.ngeom) if int(mjm.geom_bodyid[g]) in bodies or name(g) == f"{prefix}plane"
        ]
        self._qcols_all = None  # qpos columns of all dofs, cached: the common call pays nothing
        self._jac_plans: dict[int, JacobianPlan] = {}
        self._qcols_ranges: dict[tuple[int, int, int], slice | torch.Tensor] = {}
        if self.n_dofs and bool((self._dof_qadr >= 0).all()):
            self._qcols_all = self._qcols(None)

    @property
    def n_links(self) -> int:
        return len(self.links)

    @property
    def dof_start(self) -> int:
        """Column of the entity's first dof in the solver's per-dof arrays (``qvel``, controls, gains);
        its dofs are the ``n_dofs`` columns from there."""
        self.solver  # noqa: B018 (raises NotBuiltError before build)
        return self._dof_start

    @property
    def q_start(self) -> int:
        """Column of the entity's first position coordinate in ``qpos``; its ``n_qs`` follow."""
        self.solver  # noqa: B018
        return self._q_start

    @property
    def inertial_slot(self) -> int:
        """Column of the entity's base body in the per-env mass and inertia scales
        (``views.ParamsView.body_inertial``); only a free base that carries no other body has one."""
        return self._slot("inertial_slot")

    def get_link(self, name: str) -> RigidLink:
        for link in self.links:
            if link.name == name:
                return link
        raise KeyError(f"name: no link {name!r}; links: {[lk.name for lk in self.links]}")

    def get_joint(self, name: str) -> RigidJoint:
        for joint in self.joints:
            if joint.name == name:
                return joint
        raise KeyError(f"name: no joint {name!r}; joints: {[j.name for j in self.joints]}")

    # ---- helpers ---------------------------------------------------------------------------
    @property
    def solver(self) -> RigidSolver:
        if self._solver is None:
            raise NotBuiltError("this call needs a built scene: call scene.build() first")
        return self._solver

    def _sel(self, dofs_idx_local, envs_idx):
        s = self.solver
        cols = _select.select_cols(dofs_idx_local, self.n_dofs, self._dof_start, "dofs_idx_local")
        return cols, _select.select_envs(envs_idx, s.n_envs, s.device)

    def _qcols(self, dofs_idx_local):
        """qpos columns of the selected dofs; free-joint dofs have no single coordinate."""
        self.solver  # noqa: B018 (raises NotBuiltError before build)
        if dofs_idx_local is None and self._qcols_all is not None:
            return self._qcols_all
        if isinstance(dofs_idx_local, range):  # cached: a range is immutable
            key = (dofs_idx_local.start, dofs_idx_local.stop, dofs_idx_local.step)
            if key not in self._qcols_ranges:
                self._qcols_ranges[key] = self._qcols(list(dofs_idx_local))
            return self._qcols_ranges[key]
        cols = _select.select_cols(dofs_idx_local, self.n_dofs, 0, "dofs_idx_local")
        adr = self._dof_qadr[cols]
        if bool((adr < 0).any()):
            raise InvalidValueError(
                "dofs_idx_local: a free joint's dofs have no joint position; use the link pose "
                "(get_links_pos/get_links_quat) or scene.sim.rigid_solver.get_qpos()"
            )
        lo = int(adr[0])
        if torch.equal(adr, torch.arange(lo, lo + adr.numel())):
            return slice(lo, lo + adr.numel())
        return adr

    def _get(self, field: str, dofs_idx_local, envs_idx) -> torch.Tensor:
        cols, sel = self._sel(dofs_idx_local, envs_idx)
        return _select.read(self.solver._t[field], cols, sel, self.solver.n_envs)

    def _set(self, pairs, value, name, dofs_idx_local, envs_idx, *, check=None, unsafe=False):
        """Validate ``value`` once, then write it to every ``(field, cols)`` in ``pairs``.

        ``unsafe`` skips the value checks that read device memory (NaN/inf), as Genesis's ``unsafe``.
        """
        s = self.solver
        cols, sel = self._sel(dofs_idx_local, envs_idx)
        n = (_select.ncols(cols),)
        vals, batched = _select.to_values(value, name, sel, s.n_envs, n, s.device, check_finite=not unsafe)
        if check is not None:
            check(vals)
        for field, target_cols, v in pairs(cols, vals):
            _select.write(s._t[field], target_cols, sel, v, batched and v.dim() > 0, s.n_envs)
        return sel

    def _control(self, field: str, mode: CtrlMode, value, name, dofs_idx_local, envs_idx, unsafe):
        def pairs(cols, vals):
            return [
                (field, cols, vals),
                ("ctrl_mode", cols, _MODE_VALUES[mode]),  # a scalar, written to every selected dof
            ]

        self._set(pairs, value, name, dofs_idx_local, envs_idx, unsafe=unsafe)

    # ---- getters ---------------------------------------------------------------------------
    def get_dofs_position(self, dofs_idx_local=None, envs_idx=None) -> torch.Tensor:
        """Joint positions, ``([n_envs,] n_selected_dofs)``, rad or m (hinge/slide dofs)."""
        qcols = self._qcols(dofs_idx_local)
        sel = _select.select_envs(envs_idx, self.solver.n_envs, self.solver.device)
        return _select.read(self.solver.state.qpos, qcols, sel, self.solver.n_envs)

    def get_dofs_velocity(self, dofs_idx_local=None, envs_idx=None) -> torch.Tensor:
        """Dof velocities, ``([n_envs,] n_selected_dofs)``, rad/s or m/s."""
        return self._get("qvel", dofs_idx_local, envs_idx)

    def get_dofs_force(self, dofs_idx_local=None, envs_idx=None) -> torch.Tensor:
        """Actuator force of the last substep (after clamping), ``([n_envs,] n_dofs)``, N m or N."""
        return self._get("qfrc_actuator", dofs_idx_local, envs_idx)

    def get_dofs_kp(self, dofs_idx_local=None, envs_idx=None) -> torch.Tensor:
        return self._get("dof_kp", dofs_idx_local, envs_idx)

    def get_dofs_kv(self, dofs_idx_local=None, envs_idx=None) -> torch.Tensor:
        return self._get("dof_kv", dofs_idx_local, envs_idx)

    def get_dofs_force_range(self, dofs_idx_local=None, envs_idx=None):
        """(lower, upper) actuator force limits, each ``([n_envs,] n_dofs)``."""
        return (
            self._get("dof_force_lo", dofs_idx_local, envs_idx),
            self._get("dof_force_hi", dofs_idx_local, envs_idx),
        )

    def get_links_pos(self, links_idx_local=None, envs_idx=None) -> torch.Tensor:
        """Link frame positions, ``([n_envs,] n_links, 3)``, m."""
        return self._links(0, links_idx_local, envs_idx)

    def get_links_quat(self, links_idx_local=None, envs_idx=None) -> torch.Tensor:
        """Link frame orientations (w, x, y, z), ``([n_envs,] n_links, 4)``."""
        return self._links(1, links_idx_local, envs_idx)

    def _links(self, which: int, links_idx_local, envs_idx) -> torch.Tensor:
        s = self.solver
        cols = _select.select_cols(links_idx_local, self.n_links, self._range.body_start, "links_idx_local")
        sel = _select.select_envs(envs_idx, s.n_envs, s.device)
        return _select.read(s.poses()[which], cols, sel, s.n_envs)

    def get_jacobian(self, link: RigidLink, local_point=None) -> torch.Tensor:
        """Geometric Jacobian of a point fixed to ``link``, ``([n_envs,] 6, n_dofs)``.

        Rows 0-2 map this entity's dof velocities to the point's world linear velocity (m/s), rows 3-5
        to the link's world angular velocity (rad/s), as MuJoCo's ``mj_jac``. ``local_point`` is in the
        link frame, ``(3,)`` or ``(n_envs, 3)`` (default: the link origin).
        """
        s = self.solver
        if not isinstance(link, RigidLink) or link.entity is not self:
            raise InvalidValueError(f"link: expected a RigidLink of this entity, got {link!r}")
        plan = self._jac_plans.get(link.idx)
        if plan is None:
            plan = JacobianPlan(s.model, link.idx, self._dof_start, self._dof_start + self.n_dofs, s.device)
            self._jac_plans[link.idx] = plan
        if local_point is None:
            point = torch.zeros(3, device=s.device)
        else:
            all_envs = _select.select_envs(None, s.n_envs, s.device)
            point, _ = _select.to_values(local_point, "local_point", all_envs, s.n_envs, (3,), s.device)
        xpos, xquat = s.poses()
        jac = plan(xpos, xquat, point)
        return jac[0] if s.n_envs == 0 else jac

    # ---- setters ---------------------------------------------------------------------------
    def set_dofs_position(
        self, position, dofs_idx_local=None, zero_velocity=True, envs_idx=None, *, unsafe=False
    ):
        """Set joint positions (hinge/slide dofs) of the selected envs and update the link poses.

        ``zero_velocity`` also zeroes the velocity of all of this entity's dofs in those envs.
        ``unsafe=True`` skips the NaN/inf check (a device read on CUDA); shapes are still checked.
        """
        qcols = self._qcols(dofs_idx_local)
        all_dofs = slice(self._dof_start, self._dof_start + self.n_dofs)

        def pairs(cols, vals):
            out = [("qpos", qcols, vals)]
            if zero_velocity:
                out.append(
                    (
                        "qvel",
                        all_dofs,
                        torch.zeros(vals.shape[:-1] + (self.n_dofs,), device=vals.device),
                    )
                )
            return out

        sel = self._set(pairs, position, "position", dofs_idx_local, envs_idx, unsafe=unsafe)
        self.solver.state_changed(sel)

    def set_dofs_velocity(self, velocity, dofs_idx_local=None, envs_idx=None, *, unsafe=False):
        """Set dof velocities, ``([n_envs,] n_selected_dofs)``."""
        pairs = lambda c, v: [("qvel", c, v)]  # noqa: E731
        self._set(pairs, velocity, "velocity", dofs_idx_local, envs_idx, unsafe=unsafe)

    def set_dofs_kp(self, kp, dofs_idx_local=None, envs_idx=None, *, unsafe=False):
        """Position gains (>= 0), per env when ``kp`` is batched."""
        self._set_gain("dof_kp", kp, "kp", dofs_idx_local, envs_idx, unsafe)

    def set_dofs_kv(self, kv, dofs_idx_local=None, envs_idx=None, *, unsafe=False):
        """Velocity gains (>= 0), per env when ``kv`` is batched."""
        self._set_gain("dof_kv", kv, "kv", dofs_idx_local, envs_idx, unsafe)

    def set_dofs_damping(self, damping, dofs_idx_local=None, envs_idx=None, *, unsafe=False):
        """Joint damping (>= 0; N m s/rad or N s/m), per env when ``damping`` is batched."""
        self._set_gain("dof_damping", damping, "damping", dofs_idx_local, envs_idx, unsafe)

    def get_dofs_damping(self, dofs_idx_local=None, envs_idx=None) -> torch.Tensor:
        """Joint damping, ``([n_envs,] n_selected_dofs)``."""
        return self._get("dof_damping", dofs_idx_local, envs_idx)

    def _set_gain(self, field, value, name, dofs_idx_local, envs_idx, unsafe=False):
        def check(v: torch.Tensor) -> None:
            if bool((v < 0).any()):
                raise InvalidValueError(f"{name}: values must be >= 0")

        pairs = lambda c, v: [(field, c, v)]  # noqa: E731
        self._set(pairs, value, name, dofs_idx_local, envs_idx, check=None if unsafe else check, unsafe=unsafe)

    def set_dofs_force_range(self, lower, upper, dofs_idx_local=None, envs_idx=None, *, unsafe=False):
        """Actuator force limits; ``lower <= upper`` elementwise (``unsafe`` skips the value checks,
        which read the values on the host)."""
        s = self.solver
        cols, sel = self._sel(dofs_idx_local, envs_idx)
        n = (_select.ncols(cols),)
        lo, b1 = _select.to_values(lower, "lower", sel, s.n_envs, n, s.device, check_finite=not unsafe)
        hi, b2 = _select.to_values(upper, "upper", sel, s.n_envs, n, s.device, check_finite=not unsafe)
        if b1 != b2 or lo.shape != hi.shape:
            raise _select.ShapeError(f"lower/upper: shapes differ: {tuple(lo.shape)} vs {tuple(hi.shape)}")
        if not unsafe and bool((lo > hi).any()):
            raise InvalidValueError("lower/upper: lower must not exceed upper")
        _select.write(s.params.dof_force_lo, cols, sel, lo, b1, s.n_envs)
        _select.write(s.params.dof_force_hi, cols, sel, hi, b1, s.n_envs)

    # ---- controllers -------------------------------------------------------------------------
    def control_dofs_position(self, position, dofs_idx_local=None, envs_idx=None, *, unsafe=False):
        """PD position targets: ``f = kp (position - q) - kv qd``, clamped to the force range."""
        self._qcols(dofs_idx_local)  # rejects free-joint dofs
        self._control(
            "ctrl_position", CtrlMode.POSITION, position, "position", dofs_idx_local, envs_idx, unsafe
        )

    def control_dofs_velocity(self, velocity, dofs_idx_local=None, envs_idx=None, *, unsafe=False):
        """Velocity targets: ``f = kv (velocity - qd)``, clamped to the force range."""
        self._control(
            "ctrl_velocity", CtrlMode.VELOCITY, velocity, "velocity", dofs_idx_local, envs_idx, unsafe
        )

    def control_dofs_force(self, force, dofs_idx_local=None, envs_idx=None, *, unsafe=False):
        """Force commands, N m or N, clamped to the force range."""
        self._control("ctrl_force", CtrlMode.FORCE, force, "force", dofs_idx_local, envs_idx, unsafe)

    def __repr__(self) -> str:
        return f"RigidEntity({type(self.morph).__name__}, idx={self.idx})"
