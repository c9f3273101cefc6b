"""The scene: entities are added, then ``build(n_envs=...)`` compiles one model and allocates a batch.

>>> import sim_core as sc
>>> sc.init(backend=sc.cpu)
>>> scene = sc.Scene(profiling_options=sc.ProfilingOptions(show_FPS=False))
>>> plane = scene.add_entity(sc.morphs.Plane())
>>> franka = scene.add_entity(sc.morphs.MJCF(file="franka_panda"))
>>> scene.build(n_envs=2)
>>> franka.control_dofs_position(franka.get_dofs_position() + 0.1)
>>> scene.step()
>>> tuple(franka.get_dofs_position().shape)
(2, 9)
>>> sc.destroy()
"""

from __future__ import annotations

import torch

from . import io, runtime
from .entity import RigidEntity
from .errors import AlreadyBuiltError, InvalidValueError, NotBuiltError
from .fps import FPSMeter
from .materials import Rigid
from .morphs import Morph
from .options import ProfilingOptions, RigidOptions, SimOptions
from .solver import RigidSolver
from .types import Model

__all__ = ["Scene", "Simulator"]


class Simulator:
    """``scene.sim``: holds the solvers (one rigid solver)."""

    def __init__(self, rigid_solver: RigidSolver):
        self.rigid_solver = rigid_solver


class Scene:
    """A batch of identical worlds stepped together.

    Args:
        sim_options: time step, substeps, gravity.
        rigid_options: contacts (budget, solver sweeps, margin).
        profiling_options: FPS meter (on by default, as in Genesis).
    """

    def __init__(
        self,
        sim_options: SimOptions | None = None,
        rigid_options: RigidOptions | None = None,
        profiling_options: ProfilingOptions | None = None,
    ):
        runtime.current()  # raises before init()
        self.sim_options = sim_options or SimOptions()
        self.rigid_options = rigid_options or RigidOptions()
        self.profiling_options = profiling_options or ProfilingOptions()
        self.entities: list[RigidEntity] = []
        self.sim: Simulator | None = None
        self.n_envs = 0
        self.env_spacing = (0.0, 0.0)
        self.mjspec = None  # the mujoco.MjSpec the model was compiled from
        self.mjmodel = None
        self.model: Model | None = None
        self._fps: FPSMeter | None = None

    @property
    def is_built(self) -> bool:
        return self.sim is not None

    def add_entity(self, morph: Morph, material: Rigid | None = None) -> RigidEntity:
        """Add an entity made of ``morph`` (``sc.morphs.MJCF``, ``URDF``, ``Plane``, ``Box``, ``Sphere``,
        ``Capsule``) and ``material`` (``sc.materials.Rigid``: density of primitives, friction)."""
        if self.is_built:
            raise AlreadyBuiltError("add_entity: the scene is already built; add entities before build()")
        if not isinstance(morph, Morph):
            raise TypeError(f"morph: expected a sim_core.morphs morph, got {type(morph).__name__}")
        if material is not None and not isinstance(material, Rigid):
            raise TypeError(f"material: expected a sim_core.materials.Rigid, got {type(material).__name__}")
        entity = RigidEntity(self, len(self.entities), morph, material)
        self.entities.append(entity)
        return entity

    def build(self, n_envs: int = 0, env_spacing: tuple[float, float] = (0.0, 0.0)) -> None:
        """Compile the entities into one model and allocate ``n_envs`` copies (0: no batch dim).

        ``env_spacing`` (m) lays the envs out on a grid for viewing (``envs_offset``); it never
        changes simulated positions.
        """
        if self.is_built:
            raise AlreadyBuiltError("build: the scene is already built")
        if int(n_envs) != n_envs or n_envs < 0:
            raise InvalidValueError(f"n_envs: expected an integer >= 0, got {n_envs!r}")
        spacing = tuple(float(x) for x in env_spacing)
        if len(spacing) != 2:
            raise InvalidValueError(f"env_spacing: expected (dx, dy), got {env_spacing!r}")
        rt = runtime.current()
        o = self.sim_options
        mjm, ranges, spec = io.compile_scene(
            [e.morph for e in self.entities],
            timestep=o.substep_dt,
            gravity=o.gravity,
            entity_materials=[e.material for e in self.entities],
        )
        self.mjspec, self.mjmodel, self.model = spec, mjm, io.model_from_mj(mjm)
        solver = RigidSolver(self.model, int(n_envs), o, rt.device, rt.wp_device, self.rigid_options)
        for entity, rng in zip(self.entities, ranges, strict=True):
            entity._bind(solver, rng)
        self.n_envs, self.env_spacing = int(n_envs), spacing
        self.sim = Simulator(solver)
        self._fps = FPSMeter(self.n_envs, runtime.synchronize, self.profiling_options.FPS_interval)

    @property
    def envs_offset(self) -> torch.Tensor:
        """(max(n_envs, 1), 3) display offset of each env on a square grid, m (not simulated)."""
        n = max(self.n_envs, 1)
        side = int(torch.ceil(torch.sqrt(torch.tensor(float(n)))).item())
        i = torch.arange(n)
        x = (i // side - (side - 1) / 2) * self.env_spacing[0]
        y = (i % side - (side - 1) / 2) * self.env_spacing[1]
        return torch.stack([x, y, torch.zeros(n)], dim=1).to(runtime.current().device)

    def _solver(self) -> RigidSolver:
        if self.sim is None:
            raise NotBuiltError("this call needs a built scene: call scene.build() first")
        return self.sim.rigid_solver

    def step(self) -> None:
        """Advance every env by ``sim_options.dt``."""
        self._solver().step()
        if self.profiling_options.show_FPS:
            self._fps.interval = self.profiling_options.FPS_interval
            self._fps.tick(show=True)

    @property
    def fps(self) -> float | None:
        """Last FPS reading of the whole batch in env-steps/s (None until a window completes)."""
        return None if self._fps is None else self._fps.env_fps

    def reset(self, envs_idx=None) -> None:
        """Return the selected envs to the state they had after ``build()`` (controls included)."""
        self._solver().reset(envs_idx)
