"""Scene options, named as in Genesis World."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidValueError

__all__ = ["SimOptions", "ProfilingOptions"]


@dataclass(frozen=True)
class SimOptions:
    """Simulation options.

    Attributes:
        dt: duration of one ``scene.step()``, s.
        substeps: integration substeps per step (each of ``dt / substeps`` s).
        gravity: (3,) gravitational acceleration, m/s^2.
        use_cuda_graph: on CUDA, capture the step in a CUDA graph and replay it.
    """

    dt: float = 0.01
    substeps: int = 1
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)
    use_cuda_graph: bool = True

    def __post_init__(self):
        if not (float(self.dt) > 0.0):
            raise InvalidValueError(f"dt: expected a positive time step in seconds, got {self.dt!r}")
        if int(self.substeps) != self.substeps or self.substeps < 1:
            raise InvalidValueError(f"substeps: expected an integer >= 1, got {self.substeps!r}")
        g = tuple(float(x) for x in self.gravity)
        if len(g) != 3:
            raise InvalidValueError(f"gravity: expected 3 numbers, got {self.gravity!r}")
        object.__setattr__(self, "gravity", g)
        object.__setattr__(self, "dt", float(self.dt))
        object.__setattr__(self, "substeps", int(self.substeps))

    @property
    def substep_dt(self) -> float:
        return self.dt / self.substeps


@dataclass
class ProfilingOptions:
    """Profiling options (mutable, as in Genesis: ``scene.profiling_options.show_FPS = False``).

    Attributes:
        show_FPS: print the FPS meter's reading once per ``FPS_interval`` seconds.
        FPS_interval: length of the meter's averaging window, s.
    """

    show_FPS: bool = True  # noqa: N815 (Genesis' spelling)
    FPS_interval: float = 1.0  # noqa: N815
