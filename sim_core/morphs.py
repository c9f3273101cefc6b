"""Morphs: what an entity is made of (a model file or a primitive), as in Genesis World.

>>> import sim_core as sc
>>> sc.morphs.MJCF(file="franka_panda").file.endswith("franka_panda.xml")
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import InvalidValueError

__all__ = [
    "Morph",
    "MJCF",
    "URDF",
    "Plane",
    "Box",
    "Sphere",
    "Capsule",
    "Primitive",
    "ASSETS_DIR",
    "resolve_file",
]

ASSETS_DIR = Path(__file__).resolve().parent / "assets"


def resolve_file(file: str | os.PathLike, suffix: str) -> str:
    """Return the path of ``file``: an existing path, or the name of a bundled asset."""
    path = Path(file).expanduser()
    if path.is_file():
        return str(path.resolve())
    bundled = ASSETS_DIR / (path.name if path.suffix else path.name + suffix)
    if bundled.is_file() and path.parent == Path("."):
        return str(bundled)
    names = sorted(p.stem for p in ASSETS_DIR.glob(f"*{suffix}"))
    raise FileNotFoundError(
        f"file={str(file)!r}: no such file, and not a bundled asset name (bundled: {names})"
    )


def _vec(name: str, value, n: int) -> tuple[float, ...]:
    vals = tuple(float(x) for x in value)
    if len(vals) != n:
        raise InvalidValueError(f"{name}: expected {n} numbers, got {len(vals)} ({value!r})")
    return vals


@dataclass(frozen=True)
class Morph:
    """Base: where the entity's root frame is placed in the world.

    Attributes:
        pos: (3,) position of the entity's root frame, m.
        quat: (4,) orientation (w, x, y, z) of the entity's root frame; normalized on load.
    """

    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    quat: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)

    def __post_init__(self):
        object.__setattr__(self, "pos", _vec("pos", self.pos, 3))
        quat = _vec("quat", self.quat, 4)
        if sum(x * x for x in quat) < 1e-12:
            raise InvalidValueError(f"quat: a rotation quaternion must have non-zero norm, got {quat}")
        object.__setattr__(self, "quat", quat)


@dataclass(frozen=True)
class _FileMorph(Morph):
    file: str = ""
    ignore_unsupported: bool = False  # warn instead of raising on elements that change physics

    _suffix = ".xml"

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "file", resolve_file(self.file, self._suffix))


@dataclass(frozen=True)
class MJCF(_FileMorph):
    """An MJCF file (a path or a bundled name such as ``"franka_panda"``), compiled by ``mujoco``.

    ``gravcomp``: if given, MuJoCo's ``gravcomp`` for every body of the file (1: gravity compensated,
    as a robot's controller does), overriding the file's. sim_core simulates gravcomp when all bodies
    of a kinematic tree share one value.
    """

    gravcomp: float | None = None

    def __post_init__(self):
        super().__post_init__()
        if self.gravcomp is not None and not 0.0 <= float(self.gravcomp) <= 1.0:
            raise InvalidValueError(f"gravcomp: expected a share in [0, 1], got {self.gravcomp!r}")


@dataclass(frozen=True)
class URDF(_FileMorph):
    """A URDF file compiled by ``mujoco``; ``fixed=False`` gives its root link a free joint."""

    fixed: bool = True
    _suffix = ".urdf"


@dataclass(frozen=True)
class Plane(Morph):
    """An infinite ground plane through ``pos`` with normal along the frame's z axis (static)."""


@dataclass(frozen=True)
class Primitive(Morph):
    """A single rigid shape: a free body (``fixed=False``, the default) or one welded to the world.

    Its mass follows from its volume and the material's density (``sc.materials.Rigid(rho=...)``),
    its sliding friction from the material (``friction``); it collides with the floor, the other
    primitives and the robot's collision geoms. ``color`` (RGBA in [0, 1]) is its colour in pictures
    and takes no part in the physics.
    """

    fixed: bool = False
    color: tuple[float, float, float, float] = (0.85, 0.45, 0.2, 1.0)

    def __post_init__(self):
        super().__post_init__()
        color = _vec("color", self.color, 4)
        if not all(0.0 <= c <= 1.0 for c in color):
            raise InvalidValueError(f"color: expected 4 numbers (RGBA) in [0, 1], got {self.color!r}")
        object.__setattr__(self, "color", color)

    def _check_positive(self, **values: float) -> None:
        for name, v in values.items():
            if not v > 0:
                raise InvalidValueError(f"{name}: expected a positive length in m, got {v!r}")


@dataclass(frozen=True)
class Box(Primitive):
    """A box with full edge lengths ``size = (sx, sy, sz)``, m."""

    size: tuple[float, float, float] = (0.05, 0.05, 0.05)

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "size", _vec("size", self.size, 3))
        self._check_positive(**{f"size[{i}]": v for i, v in enumerate(self.size)})


@dataclass(frozen=True)
class Sphere(Primitive):
    """A sphere of ``radius`` m."""

    radius: float = 0.025

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "radius", float(self.radius))
        self._check_positive(radius=self.radius)


@dataclass(frozen=True)
class Capsule(Primitive):
    """A capsule along the frame's z axis: ``radius`` and the ``length`` of its cylindrical part, m."""

    radius: float = 0.02
    length: float = 0.05

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "radius", float(self.radius))
        object.__setattr__(self, "length", float(self.length))
        self._check_positive(radius=self.radius, length=self.length)
