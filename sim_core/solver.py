"""The rigid solver: owns the Model, the per-env Data and the generated kernels (``scene.sim.rigid_solver``)."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import torch
import warp as wp

from . import _select, host_threads, io, launch, state, views
from .contact import buffers, geometry, pairs
from .contact.frame import contact_frame
from .engine import integrator
from .engine.tree import Tree
from .errors import InvalidValueError
from .options import RigidOptions, SimOptions
from .types import Data, Model

__all__ = ["RigidSolver"]


@wp.kernel(enable_backward=False)
def _error_rows(
    qpos: wp.array2d(dtype=wp.float32),
    qvel: wp.array2d(dtype=wp.float32),
    overflow: wp.array(dtype=wp.int32),
    bad: wp.array(dtype=wp.bool),
):
    """``bad[w]``: env ``w``'s state is not finite or its last step dropped contacts (``views.env_error``)."""
    w = wp.tid()
    bad[w] = views.env_error(qpos, qvel, overflow, w)


class RigidSolver:
    """Batched articulated-body solver over ``nworld = max(n_envs, 1)`` copies of one model.

    ``state``, ``params`` and ``contacts`` (None without contacts) are torch views of its per-env
    arrays (``sim_core.state``); ``state_view()`` and the other ``*_view()`` methods hand the same
    memory to Warp kernels (``sim_core.views``)."""

    def __init__(
        self,
        model: Model,
        n_envs: int,
        options: SimOptions,
        device: torch.device,
        wp_device: str,
        rigid_options: RigidOptions | None = None,
    ):
        self.model = model
        self.n_envs = n_envs
        self.nworld = max(n_envs, 1)
        self.options = options
        self.rigid_options = rigid_options or RigidOptions()
        self.device = device
        self.wp_device = wp_device
        self.tree = Tree(model)
        self._data: Data = io.make_data(model, self.nworld, wp_device)
        self._gravity = wp.vec3(*options.gravity)
        self._graph = None
        self._steps = 0
        # torch views of the Warp arrays (shared memory) by name; ``state`` and ``params`` hold them
        self._t = {name: wp.to_torch(getattr(self._data, name)) for name in Data.__dataclass_fields__}
        self._init = {name: self._t[name][:1].clone() for name in self._RESET_FIELDS}
        o = options
        contact_args = self._init_contacts()
        t = self._t
        self.state = state.RigidState(**{f.name: t[f.name] for f in fields(state.RigidState)})
        per_dof = ("dof_kp", "dof_kv", "dof_damping", "dof_force_lo", "dof_force_hi", "body_inertial")
        self.params = state.RigidParams(
            **{f: t[f] for f in per_dof}, geom_friction=self._geom_friction, geom_size=self._geom_size
        )
        self.kernels = launch.load_kernels(self.tree, options.substeps, contacts=contact_args is not None)
        split_args = None
        self._split = torch.ones(self.nworld, dtype=torch.int32, device=device)  # substeps per env
        if contact_args is not None:  # the adaptive split's state (step.py): start state, substeps per env
            depth = self.rigid_options.split_depth
            self._redo_envs = torch.arange(self.nworld, dtype=torch.int32, device=device)
            d = self._data
            start = [buffers.scratch(a.shape, wp.float32, self.wp_device) for a in (d.qpos, d.qvel)]
            flags = [wp.from_torch(self._split), wp.from_torch(self._redo_envs)]
            split_args = launch.SplitArgs(*start, *flags, float(depth) if depth is not None else 0.0)
        self.cpu_threads = o.cpu_threads or host_threads.default_threads()  # host threads of a CPU step
        threads = self.cpu_threads
        self._step_cmds = launch.record_step(
            self.kernels, self._data, self._gravity, o.substep_dt, o.substeps, contact_args, split_args, threads
        )
        if contact_args is not None:  # contacts at the current state where no step ended there
            self._detect_set = launch.record_detect(
                self.kernels, self._data, self._gravity, contact_args, split_args, threads
            )
            self._contacts_stale = True  # some env's state was set since the last step (host flag)
        self._poses_fresh = False  # False: some env's poses may be out of date (see _stale)
        self._views: dict[str, object] = {}  # the Warp views handed to user kernels, made once
        self._stale = torch.ones(self.nworld, dtype=torch.bool, device=device)  # per env, on the device
        self._fk_cmd = launch.record_fk(self.kernels, self._data, wp.from_torch(self._stale, dtype=wp.bool))
        self._bad = torch.empty(self.nworld, dtype=torch.bool, device=device)
        self._bad_cmd = host_threads.recorded(
            _error_rows,
            dim=self.nworld,
            inputs=[self._data.qpos, self._data.qvel, wp.from_torch(self._overflow)],
            outputs=[wp.from_torch(self._bad)],
            device=wp_device,
        )

    def _init_contacts(self) -> launch.ContactArgs | None:
        """Contact buffers and tables (``self._cd``, None without colliding pairs); returns the
        step's extra arguments."""
        mjm, ro = self.model.mjmodel, self.rigid_options
        self._cd = None
        self.contacts: state.ContactBuffers | None = None
        self._geom_friction = torch.zeros(self.nworld, 0, device=self.device)
        self._geom_size = torch.zeros(self.nworld, 0, 3, device=self.device)
        self.max_contacts = 0  # contact slots per env (0: no contacts in this scene)
        self._overflow = torch.zeros(self.nworld, dtype=torch.int32, device=self.device)
        if not ro.enable_collision:
            return None
        plan = pairs.CollisionPlan.build(mjm, self.wp_device, self.nworld)
        if len(plan.pairs) == 0:
            return None
        if ro.max_contacts is None:
            types = [(int(mjm.geom_type[a]), int(mjm.geom_type[b])) for a, b in plan.pairs]
            self.max_contacts = min(sum(pairs.MOST_CONTACTS[k] for k in types), 64)
        else:
            self.max_contacts = int(ro.max_contacts)
        slots = geometry.make_slots(self.nworld, self.max_contacts, self.wp_device)
        cd = buffers.make_contact_data(
            slots,
            geometry.make_slots(self.nworld, self.max_contacts, self.wp_device),
            self.nworld,
            self.max_contacts,
            len(self.tree.limited_dofs()),
            self.model.nv,
            integrator.factor_size(self.tree),
            mjm.geom_friction[:, 0],
            self.wp_device,
        )
        cm = buffers.build_contact_model(self.tree, self.wp_device)
        self._cd = cd
        self._overflow = wp.to_torch(cd.overflow)
        self._geom_friction, self._geom_size = wp.to_torch(cd.friction), wp.to_torch(plan.geoms.size)
        self.contacts = state.ContactBuffers(
            count=wp.to_torch(cd.count),
            geom=wp.to_torch(slots.geom),
            pos=wp.to_torch(slots.pos),
            normal=wp.to_torch(slots.normal),
            dist=wp.to_torch(slots.dist),
            force=wp.to_torch(cd.force),
            rounds=wp.to_torch(cd.rounds),
            warm_start_geom=wp.to_torch(cd.lam_geom),
            fresh=wp.to_torch(cd.fresh),
            detected_count=wp.to_torch(cd.nxt_wanted),
            detected_geom=wp.to_torch(cd.nxt.geom),
            detected_pos=wp.to_torch(cd.nxt.pos),
            detected_normal=wp.to_torch(cd.nxt.normal),
            detected_dist=wp.to_torch(cd.nxt.dist),
            overflow=self._overflow,
            jac=wp.to_torch(cd.jac),
            jac_trees=wp.to_torch(cd.trees),
        )
        self._contact_init = {k: getattr(self.contacts, k)[0].clone() for k in self._CONTACT_RESET}
        o = [ro.contact_margin, ro.iterations, ro.tolerance, ro.max_penetration]
        return launch.ContactArgs(plan.geoms, cm, cd, float(o[0]), int(o[1]), float(o[2]), float(o[3]))

    _CONTACT_RESET = ("count", "force", "warm_start_geom", "rounds")  # contact buffers a reset restores
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
        """Advance every env by ``dt`` (``substeps`` substeps); no host round trip. On CUDA the
        step is captured into a graph of its own at its second call and replayed from then on;
        while a caller's capture is open on Warp's current stream (a trainer recording its rollout,
        ``wp.ScopedCapture(external=True)``) it launches its kernels into that capture instead."""
        use_graph = self.options.use_cuda_graph and self.device.type == "cuda"
        if use_graph and self.wp_device.is_capturing:
            self._launch_step()
        elif use_graph and self._graph is not None:
            wp.capture_launch(self._graph)
        elif use_graph and self._steps > 0:  # the kernels are loaded by now: capture, then replay
            with wp.ScopedCapture(device=self.wp_device) as capture:
                self._launch_step()
            self._graph = capture.graph
            wp.capture_launch(self._graph)
        else:
            self._launch_step()
        self._steps += 1
        if self._cd is None:
            self.state_changed()
        elif not self._poses_fresh:  # a step with contacts ends with every env's poses (step.py)
            self._stale.fill_(False)
            self._poses_fresh = True

    def _launch_step(self) -> None:
        """With contacts: their detection where the state was set since the last step (else the
        step starts from the contacts it ended with), then the step: on the CPU one launch, which
        also redoes the envs it flags (adaptive split, ``step.py``); on CUDA the first pass, then
        the redo launch over all envs (each flagged env's first redo, and its second if that still
        ended too deep; the others return at once). No host read either way."""
        if self._cd is not None and (self.device.type == "cuda" or self._contacts_stale):
            self._detect_set.launch()
            self._contacts_stale = False
        for cmd in self._step_cmds:
            cmd.launch()

    def state_changed(self, sel: _select.EnvSel | None = None) -> None:
        """Mark the link poses and end-of-step contacts of the selected envs (default: all) out of
        date after a state change; the next ``poses()`` recomputes those envs' poses only, the next
        step their contacts."""
        flags = [(self._stale, True)]
        if self._cd is not None:
            flags.append((self.contacts.fresh, 0))
            self._contacts_stale = True
        for flag, value in flags:
            if sel is None or (sel.idx is None and sel.mask is None):
                flag.fill_(value)
            elif sel.mask is not None:
                flag.masked_fill_(sel.mask, value)
            else:
                flag[sel.idx] = value
        self._poses_fresh = False

    def poses(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Body positions ``(nworld, nbody, 3)`` and orientations (w, x, y, z) ``(nworld, nbody, 4)``
        for the current state, recomputed now in the envs whose state changed since the last call.

        In a scene with contacts whose changed envs' contacts are still to be detected, the step
        kernel's detection pass does it: it stores those envs' poses as it detects their contacts
        (the same instructions as the end of a step), so the next step needs no detection launch."""
        if not self._poses_fresh:
            if self._cd is not None and self._contacts_stale:
                self._detect_set.launch()
                self._contacts_stale = False
            else:
                self._fk_cmd.launch()
            self._stale.fill_(False)
            self._poses_fresh = True
        return self._t["xpos"], self._t["xquat"]

    def forward(self) -> dict[str, torch.Tensor]:
        """Evaluate every stage at the current state without stepping (for inspection and tests).

        Returns torch tensors ``qM`` (nworld, nv, nv) with armature, ``qfrc_bias`` (nworld, nv),
        ``qfrc_actuator`` (nworld, nv) and ``qacc`` (nworld, nv), the unconstrained acceleration
        (MuJoCo's ``qacc_smooth``).
        """
        out = launch.launch_forward(self.kernels, self._data, self._gravity)
        self._stale.fill_(False)
        self._poses_fresh = True
        return {k: wp.to_torch(v) for k, v in out.items()}

    def reset(self, envs_idx=None) -> None:
        """Restore the initial state and controls of the selected envs (gains are kept)."""
        sel = _select.select_envs(envs_idx, self.n_envs, self.device)
        for name in self._RESET_FIELDS:
            target = self._t[name]
            _select.write(target, slice(None), sel, self._init[name][0].to(target.dtype), False, self.n_envs)
        contact = self._CONTACT_RESET if self._cd is not None else ()
        buffers = [(getattr(self.contacts, k), self._contact_init[k]) for k in contact]
        for target, init in [(self._overflow, 0), *buffers]:
            flat = target.view(self.nworld, -1)  # one row per env
            value = torch.as_tensor(init, dtype=target.dtype, device=self.device).reshape(-1)
            _select.write(flat, slice(None), sel, value, False, self.n_envs)
        self.state_changed(sel)

    # ---- Warp views for user kernels (views.py) ------------------------------------------------
    def state_view(self) -> views.StateView:
        """Positions, velocities, body poses and position controls of every env, as Warp arrays
        (``views.StateView``; the solver's own memory). Poses are those of the last ``poses()`` or
        step: call ``poses()`` before a kernel reads them. A kernel that writes ``qpos``/``qvel``
        flags the envs it wrote with ``views.mark_changed`` (see ``state_changed_by_kernel``)."""
        if "state" not in self._views:
            v = views.StateView()
            d = self._data
            v.qpos, v.qvel, v.xpos, v.xquat = d.qpos, d.qvel, d.xpos, d.xquat
            v.ctrl_mode, v.ctrl_position = d.ctrl_mode, d.ctrl_position
            v.poses_stale = wp.from_torch(self._stale, dtype=wp.bool)
            none = wp.zeros(0, dtype=wp.int32, device=self.wp_device)
            v.contacts_fresh = self._cd.fresh if self._cd is not None else none
            self._views["state"] = v
        return self._views["state"]

    def params_view(self) -> views.ParamsView:
        """The per-env model parameters as Warp arrays (``views.ParamsView``), for domain
        randomization inside a kernel; geom friction and sizes exist in scenes with contacts."""
        if "params" not in self._views:
            v = views.ParamsView()
            d = self._data
            v.dof_kp, v.dof_kv, v.dof_damping = d.dof_kp, d.dof_kv, d.dof_damping
            v.body_inertial = d.body_inertial
            if self._cd is not None:
                v.geom_friction = self._cd.friction
                v.geom_size = wp.from_torch(self._geom_size, dtype=wp.vec3)
            else:
                v.geom_friction = wp.zeros((self.nworld, 0), dtype=wp.float32, device=self.wp_device)
                v.geom_size = wp.zeros((self.nworld, 0), dtype=wp.vec3, device=self.wp_device)
            self._views["params"] = v
        return self._views["params"]

    def contacts_view(self) -> views.ContactsView:
        """The last substep's contacts as Warp arrays (``views.ContactsView``); an empty view (no
        slots, zero counts) in a scene without contacts."""
        if "contacts" not in self._views:
            v = views.ContactsView()
            cd = self._cd
            if cd is not None:
                v.count, v.geom, v.normal, v.force = cd.count, cd.slots.geom, cd.slots.normal, cd.force
            else:
                n, dev = self.nworld, self.wp_device
                v.count = wp.zeros(n, dtype=wp.int32, device=dev)
                v.geom = wp.zeros((n, 0), dtype=wp.vec2i, device=dev)
                v.normal = wp.zeros((n, 0), dtype=wp.vec3, device=dev)
                v.force = wp.zeros((n, 0), dtype=wp.vec3, device=dev)
            v.overflow = wp.from_torch(self._overflow)
            self._views["contacts"] = v
        return self._views["contacts"]

    def reset_view(self) -> views.ResetView:
        """What ``views.reset_env`` restores, and to what (``views.ResetView``)."""
        if "reset" not in self._views:
            v = views.ResetView()
            v.state = self.state_view()
            for name in self._RESET_FIELDS:
                setattr(v, f"{name}_init", wp.from_torch(self._init[name][0]))
            d = self._data
            v.ctrl_velocity, v.ctrl_force = d.ctrl_velocity, d.ctrl_force
            v.qfrc_applied, v.qfrc_actuator = d.qfrc_applied, d.qfrc_actuator
            cd = self._cd
            if cd is not None:
                v.contact_count, v.contact_force, v.contact_rounds = cd.count, cd.force, cd.rounds
                v.warm_start_geom = cd.lam_geom
            else:
                z = lambda dtype, *shape: wp.zeros(shape, dtype=dtype, device=self.wp_device)  # noqa: E731
                v.contact_count, v.contact_rounds = z(wp.int32, 0), z(wp.int32, 0)
                v.contact_force, v.warm_start_geom = z(wp.vec3, 0, 0), z(wp.vec2i, 0, 0)
            v.overflow = wp.from_torch(self._overflow)
            self._views["reset"] = v
        return self._views["reset"]

    def state_changed_by_kernel(self) -> None:
        """A kernel wrote some envs' state and flagged them (``views.mark_changed``,
        ``views.reset_env``): the next ``poses()`` recomputes their poses and the next step their
        contacts. Sets host flags only; no device work, no sync."""
        self._poses_fresh = False
        if self._cd is not None:
            self._contacts_stale = True

    def get_error_envs_mask(self) -> torch.Tensor:
        """``([n_envs,])`` bool, True where an env's state is not finite (NaN or inf in qpos or qvel)
        or its last step dropped contacts for want of budget (``get_contact_overflow``).

        One small kernel on the device, no host read; an env stays flagged until its state is set
        or reset to finite values (overflow: until its next step or reset).
        """
        self._bad_cmd.launch()
        bad = self._bad.clone()
        return bad[0] if self.n_envs == 0 else bad

    def get_qpos(self, envs_idx=None) -> torch.Tensor:
        """Generalized positions, ``([n_envs,] n_qs)`` (a view when ``envs_idx`` is None)."""
        sel = _select.select_envs(envs_idx, self.n_envs, self.device)
        return _select.read(self._t["qpos"], slice(None), sel, self.n_envs)

    def get_qvel(self, envs_idx=None) -> torch.Tensor:
        """Generalized velocities, ``([n_envs,] n_dofs)`` (a view when ``envs_idx`` is None)."""
        sel = _select.select_envs(envs_idx, self.n_envs, self.device)
        return _select.read(self._t["qvel"], slice(None), sel, self.n_envs)

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
        _select.write(self._t["qpos"], slice(None), sel, vals, batched, self.n_envs)
        self.state_changed(sel)

    def set_qvel(self, qvel, envs_idx=None) -> None:
        """Set generalized velocities ``([n_envs,] n_dofs)``."""
        sel = _select.select_envs(envs_idx, self.n_envs, self.device)
        vals, batched = _select.to_values(qvel, "qvel", sel, self.n_envs, (self.n_dofs,), self.device)
        _select.write(self._t["qvel"], slice(None), sel, vals, batched, self.n_envs)

    def dof_qposadr(self) -> np.ndarray:
        """(nv,) qpos column of each hinge/slide dof, -1 for a free joint's dofs."""
        return self.tree.dof_qadr.copy()

    def get_contact_overflow(self) -> torch.Tensor:
        """``([n_envs,])`` int32: contacts each env had to drop in its last step because its budget
        (``max_contacts``) was full (the most in any substep); 0 everywhere without contacts."""
        return self._overflow[0] if self.n_envs == 0 else self._overflow

    def get_step_splits(self) -> torch.Tensor:
        """``([n_envs,])`` int32: into how many substeps each env's last step was split by the
        adaptive substeps (``RigidOptions.split_depth``; each of ``substeps`` substeps); 1: not
        redone, 2-8 redone once, 16 redone a second time; 1 everywhere without contacts."""
        return self._split[0] if self.n_envs == 0 else self._split

    def get_solver_rounds(self) -> torch.Tensor:
        """``([n_envs,])`` int32: rounds of friction and normal solves the contact solver took in each
        env's last substep (at most ``RigidOptions.iterations``; MuJoCo's ``solver_niter``); 0 for
        an env without contacts then or whose warm start already solved them (a body at rest), and
        everywhere in a scene without contacts."""
        r = self.contacts.rounds if self._cd is not None else torch.zeros_like(self._overflow)
        return r[0] if self.n_envs == 0 else r

    def get_contacts(self) -> dict[str, torch.Tensor]:
        """The contacts of the last substep of the last step, per env slot (Genesis' layout).

        Keys, each ``([n_envs,] max_contacts, ...)``: ``geom_a``, ``geom_b`` (geom ids; the normal
        points from a to b), ``link_a``, ``link_b`` (body ids), ``position`` (3, m, midway between
        the surfaces), ``normal`` (3), ``dist`` (signed gap, m; negative: penetration, positive:
        a speculative contact within the margin), ``force`` (3, N, world frame, on b; a receives
        the opposite), ``valid_mask`` (bool: slots beyond the env's contact count hold stale data,
        zeroed here). Positions are those at the start of the substep, before integration.
        """
        if self._cd is None:
            raise InvalidValueError("get_contacts: the scene has no colliding geom pairs (or collision is off)")
        c = self.contacts
        valid = torch.arange(self.max_contacts, device=self.device)[None, :] < c.count[:, None]
        normal = c.normal
        t1, t2 = contact_frame(normal)
        f = c.force
        force = normal * f[..., :1] + t1 * f[..., 1:2] + t2 * f[..., 2:3]
        geom = c.geom.long()
        body = torch.as_tensor(self.model.mjmodel.geom_bodyid, device=self.device)[geom]
        v3 = valid[..., None]
        out = {
            "geom_a": torch.where(valid, geom[..., 0], -1),
            "geom_b": torch.where(valid, geom[..., 1], -1),
            "link_a": torch.where(valid, body[..., 0], -1),
            "link_b": torch.where(valid, body[..., 1], -1),
            "position": torch.where(v3, c.pos, 0.0),
            "normal": torch.where(v3, normal, 0.0),
            "dist": torch.where(valid, c.dist, 0.0),
            "force": torch.where(v3, force, 0.0),
            "valid_mask": valid,
        }
        return {k: v[0] for k, v in out.items()} if self.n_envs == 0 else out
