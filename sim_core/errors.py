"""Exceptions raised for bad input; each is a subclass of the builtin a caller would expect."""

__all__ = [
    "SimCoreError",
    "ShapeError",
    "InvalidValueError",
    "EnvsIdxError",
    "DofsIdxError",
    "NotBuiltError",
    "AlreadyBuiltError",
    "UnsupportedModelError",
    "NotInitializedError",
]


class SimCoreError(Exception):
    """Base class of every sim_core error."""


class ShapeError(SimCoreError, ValueError):
    """An argument has the wrong shape."""


class InvalidValueError(SimCoreError, ValueError):
    """An argument holds a value outside what is accepted (NaN, inf, a zero quaternion, ...)."""


class EnvsIdxError(SimCoreError, IndexError):
    """``envs_idx`` is out of range, negative, duplicated, mis-sized or given to an unbatched scene."""


class DofsIdxError(SimCoreError, IndexError):
    """``dofs_idx_local`` or ``links_idx_local`` is out of range or duplicated."""


class NotBuiltError(SimCoreError, RuntimeError):
    """The scene must be built before this call."""


class AlreadyBuiltError(SimCoreError, RuntimeError):
    """The scene is already built; it cannot be changed structurally."""


class UnsupportedModelError(SimCoreError, ValueError):
    """The model uses an element that changes the physics and that sim_core does not simulate."""


class NotInitializedError(SimCoreError, RuntimeError):
    """``sim_core.init()`` has not been called."""
