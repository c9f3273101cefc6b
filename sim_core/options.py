"""Scene options, named as in Genesis World."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidValueError

__all__ = ["SimOptions", "RigidOptions", "ProfilingOptions"]


@dataclass(frozen=True)
class SimOptions:
    """Simulation options.

    Attributes:
        dt: duration of one ``scene.step()``, s.
        substeps: integration substeps per step (each of ``dt / substeps`` s).
        gravity: (3,) gravitational acceleration, m/s^2.
        use_cuda_graph: on CUDA, capture the step in a CUDA graph and replay it.
        cpu_threads: on the CPU, host threads the step's envs are shared among (results do not
            depend on it); None: torch's intra-op thread count (``torch.get_num_threads()``, which
            follows ``OMP_NUM_THREADS``), at most the cores the process may run on.
    """

    dt: float = 0.01
    substeps: int = 1
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)
    use_cuda_graph: bool = True
    cpu_threads: int | None = None

    def __post_init__(self):
        if not (float(self.dt) > 0.0):
            raise InvalidValueError(f"dt: expected a positive time step in seconds, got {self.dt!r}")
        if int(self.substeps) != self.substeps or self.substeps < 1:
            raise InvalidValueError(f"substeps: expected an integer >= 1, got {self.substeps!r}")
        n = self.cpu_threads
        if n is not None and (isinstance(n, bool) or not isinstance(n, int | float) or int(n) != n or n < 1):
            raise InvalidValueError(f"cpu_threads: expected None or an integer >= 1, got {n!r}")
        object.__setattr__(self, "cpu_threads", None if n is None else int(n))
        g = tuple(float(x) for x in self.gravity)
        if len(g) != 3:
            raise InvalidValueError(f"gravity: expected 3 numbers, got {self.gravity!r}")
        object.__setattr__(self, "gravity", g)
        object.__setattr__(self, "dt", float(self.dt))
        object.__setattr__(self, "substeps", int(self.substeps))

    @property
    def substep_dt(self) -> float:
        return self.dt / self.substeps


@dataclass(frozen=True)
class RigidOptions:
    """Contact options (named after Genesis World's ``RigidOptions``).

    Attributes:
        enable_collision: detect and solve contacts. A model without colliding geom pairs steps
            without any contact code either way.
        max_contacts: contact budget of each env; None sizes it from the model's candidate pairs
            (the most contacts each pair type produces), capped at 64. Contacts beyond it are
            dropped and counted (``get_contact_overflow``, ``get_error_envs_mask``).
        iterations: most rounds of friction and normal solves per substep.
        tolerance: rounds stop early once no row changes its velocity by this much (m/s), or at
            the first round that does not halve the largest change (the alternation of friction
            and normal solves has stalled). The default, 0.1 mm/s, is 1 um of position per 10 ms
            step.
        contact_margin: pairs closer than this (m) become contacts; those not yet touching are
            speculative, so fast bodies stop at the surface instead of passing into it.
        max_penetration: depth (m) no contact is allowed to exceed after a step: the soft contact
            model holds light objects softly against strong pushes, so beyond this it is rigid.
        split_depth: adaptive substeps. A step that ends with a contact deeper than this (m) is
            redone from its start in ``depth / max_penetration`` substeps (at most 8), as is one in
            which a free body moved further than ``contact_margin`` (one substep per margin):
            what sinks that deep in one step came from beyond the margin or turned a face no
            contact covered into its neighbour (a pad striking at speed, a cube flung spinning).
            A redo that still ends deeper than this is redone once more, in 16 substeps. None: never.
    """

    enable_collision: bool = True
    max_contacts: int | None = None
    iterations: int = 20
    tolerance: float = 1e-4
    contact_margin: float = 0.01
    max_penetration: float = 0.002
    split_depth: float | None = 0.004

    def __post_init__(self):
        n = self.max_contacts
        if n is not None and (int(n) != n or n < 1):
            raise InvalidValueError(f"max_contacts: expected None or an integer >= 1, got {n!r}")
        if int(self.iterations) != self.iterations or self.iterations < 1:
            raise InvalidValueError(f"iterations: expected an integer >= 1, got {self.iterations!r}")
        if not (float(self.tolerance) >= 0.0):
            raise InvalidValueError(f"tolerance: expected a velocity >= 0 in m/s, got {self.tolerance!r}")
        if not (float(self.max_penetration) > 0.0):
            raise InvalidValueError(f"max_penetration: expected a depth > 0 in m, got {self.max_penetration!r}")
        if self.split_depth is not None and not (float(self.split_depth) > 0.0):
            raise InvalidValueError(f"split_depth: expected None or a depth > 0 m, got {self.split_depth!r}")
        if not (float(self.contact_margin) >= 0.0):
            raise InvalidValueError(f"contact_margin: expected a distance >= 0 m, got {self.contact_margin!r}")


@dataclass
class ProfilingOptions:
    """Profiling options (mutable, as in Genesis: ``scene.profiling_options.show_FPS = False``).

    Attributes:
        show_FPS: print the FPS meter's reading once per ``FPS_interval`` seconds.
        FPS_interval: length of the meter's averaging window, s.
    """

    show_FPS: bool = True  # noqa: N815 (Genesis' spelling)
    FPS_interval: float = 1.0  # noqa: N815
