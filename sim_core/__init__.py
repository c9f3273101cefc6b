"""sim_core: a batched rigid-body simulator in NVIDIA Warp with Genesis World's batched API.

Importing works before ``init()``; ``sc.device`` and ``sc.backend`` are None until then.
"""

from . import gl_backend  # noqa: F401, I001 (first: picks MuJoCo's headless GL backend before mujoco loads)
from . import openmp_spin  # noqa: F401, I001 (before torch loads: short OpenMP busy-wait, see the module)
from . import materials, morphs
from .errors import (
    AlreadyBuiltError,
    DofsIdxError,
    EnvsIdxError,
    InvalidValueError,
    NotBuiltError,
    NotInitializedError,
    ShapeError,
    SimCoreError,
    UnsupportedModelError,
)
from .options import ProfilingOptions, RigidOptions, SimOptions
from .runtime import Backend, cpu, destroy, gpu, init, is_initialized, synchronize
from .scene import Scene

__all__ = [
    "morphs",
    "materials",
    "init",
    "destroy",
    "is_initialized",
    "synchronize",
    "cpu",
    "gpu",
    "Backend",
    "Scene",
    "SimOptions",
    "RigidOptions",
    "ProfilingOptions",
    "SimCoreError",
    "ShapeError",
    "InvalidValueError",
    "EnvsIdxError",
    "DofsIdxError",
    "NotBuiltError",
    "AlreadyBuiltError",
    "UnsupportedModelError",
    "NotInitializedError",
    "device",
    "backend",
]


def __getattr__(name: str):
    if name in ("device", "backend"):
        from . import runtime

        return getattr(runtime.current(), name) if runtime.is_initialized() else None
    raise AttributeError(f"module 'sim_core' has no attribute {name!r}")
