"""Model-specialized kernel source: a small emitter the stage modules write straight-line code into,
and the literals they write.

Each physical stage (``kinematics``, ``dynamics``, ``actuation``, ``integrator``) emits the lines of its
computation for one env, with the model's constants (frames, inertias, axes, tree structure, from
``tree.Tree``) folded in. ``sim_core/step.py`` composes the stages into kernels.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "Emitter",
    "lit",
    "vec3",
    "quat",
    "is_zero",
    "is_identity_quat",
]


def lit(x: float) -> str:
    """A float literal Warp parses as float32."""
    x = float(x)
    if not np.isfinite(x):
        raise ValueError(f"non-finite model constant {x}")
    return repr(x)


def is_zero(v) -> bool:
    return bool(np.all(np.asarray(v) == 0))


def is_identity_quat(q) -> bool:
    return bool(q[0] == 1 and np.all(np.asarray(q[1:]) == 0))


def vec3(v) -> str:
    return f"wp.vec3({lit(v[0])}, {lit(v[1])}, {lit(v[2])})"


def quat(q_wxyz) -> str:
    """A constant (w, x, y, z) quaternion as Warp's (x, y, z, w) ``wp.quat`` (normalized)."""
    q = np.asarray(q_wxyz, np.float64)
    q = q / np.linalg.norm(q)
    return f"wp.quat({lit(q[1])}, {lit(q[2])}, {lit(q[3])}, {lit(q[0])})"


class Emitter:
    """Collects indented source lines; ``stage`` marks where each stage's lines start."""

    def __init__(self):
        self.lines: list[str] = []
        self.depth = 0
        self.stages: list[tuple[int, str]] = []  # (first line number, 1-based; stage name)

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def indent(self) -> _Indent:
        return _Indent(self)

    def stage(self, name: str, emitter: str) -> None:
        """Start stage ``name``: a comment naming it and the function that emits it (``module.func``),
        and the mark ``handoff.check`` attributes the following lines by (``name`` has no colon)."""
        assert ":" not in name, name
        self(f"# ---- {name}: {emitter}")
        self.stages.append((len(self.lines), name))

    def source(self) -> str:
        return "\n".join(self.lines) + "\n"


class _Indent:
    def __init__(self, e: Emitter):
        self.e = e

    def __enter__(self):
        self.e.depth += 1

    def __exit__(self, *exc):
        self.e.depth -= 1
