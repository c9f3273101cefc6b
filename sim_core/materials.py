"""Materials: what an entity is made of physically, as in Genesis World (``sc.materials.Rigid``).

>>> import sim_core as sc
>>> sc.materials.Rigid(rho=500.0, friction=0.8).friction
0.8
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import InvalidValueError

__all__ = ["Rigid"]


@dataclass(frozen=True)
class Rigid:
    """A rigid material.

    Attributes:
        rho: density, kg/m^3; sets a primitive's mass from its volume (model files keep their own
            inertias).
        friction: Coulomb (sliding) friction coefficient of every geom of the entity.
    """

    rho: float = 1000.0
    friction: float = 0.5

    def __post_init__(self):
        for name in ("rho", "friction"):
            v = float(getattr(self, name))
            if not math.isfinite(v) or v < 0 or (name == "rho" and v == 0):
                raise InvalidValueError(
                    f"{name}: expected a {'positive' if name == 'rho' else 'non-negative'} number, got {v!r}"
                )
            object.__setattr__(self, name, v)
