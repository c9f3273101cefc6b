"""Model-specialized kernel source: a small emitter the stage modules write straight-line code into.

Each physical stage (``kinematics``, ``dynamics``, ``actuation``, ``integrator``) emits the lines of its
computation for one env, with the model's constants (frames, inertias, axes, tree structure) folded
in. ``step.py`` composes the stages into kernels, writes the module to a cache folder named by its
hash and imports it, so Warp compiles each model once and loads it from its kernel cache afterwards.
"""

from __future__ import annotations

import numpy as np

from ..types import JointType, Model, dof_qposadr
from .quaternion import qmul_np, rotate_np
from .segments import build_segments

__all__ = [
    "Emitter",
    "lit",
    "vec3",
    "quat",
    "is_zero",
    "is_identity_quat",
    "Tree",
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


class Tree:
    """Derived structure of a Model used by the emitters (all host-side, computed once)."""

    def __init__(self, m: Model):
        self.m = m
        nb = m.nbody
        ndof_path = np.zeros(nb, int)  # dofs on the path from the world to the body (inclusive)
        self.body_dofs: list[list[int]] = [[] for _ in range(nb)]
        for i in range(m.nv):
            self.body_dofs[m.dof_bodyid[i]].append(i)
        for b in range(1, nb):
            ndof_path[b] = ndof_path[m.body_parentid[b]] + len(self.body_dofs[b])
        self.dynamic = ndof_path > 0  # bodies that move
        self.dof_qadr = dof_qposadr(m)  # hinge/slide dof -> its qpos coordinate, -1 for free dofs
        self.segments = build_segments(m)  # the tree the dynamics is emitted for
        self.factor_rows: dict[int, list[int]] | None = None  # set by dynamics.factor_pattern
        # each dof's kinematic tree as a dof range [start, end): MuJoCo numbers a tree's dofs
        # contiguously, and the mass matrix and its factor are block-diagonal by tree
        root = []
        for d in range(m.nv):
            root.append(d if m.dof_parentid[d] < 0 else root[m.dof_parentid[d]])
        self.dof_tree: list[tuple[int, int]] = []
        for d in range(m.nv):
            members = [i for i in range(m.nv) if root[i] == root[d]]
            assert len(members) == members[-1] + 1 - members[0], "a tree's dofs are not contiguous"
            self.dof_tree.append((members[0], members[-1] + 1))
        # static bodies' world poses, folded to constants
        self.static_pos = np.zeros((nb, 3))
        self.static_quat = np.tile([1.0, 0, 0, 0], (nb, 1))
        for b in range(1, nb):
            if self.dynamic[b]:
                continue
            p = m.body_parentid[b]
            self.static_pos[b] = self.static_pos[p] + rotate_np(self.static_quat[p], m.body_pos[b])
            self.static_quat[b] = qmul_np(self.static_quat[p], m.body_quat[b])

    def deepest_dof(self, b: int) -> int:
        """The last dof on the path from the world to body ``b``, -1 if none moves it."""
        while b > 0:
            if self.body_dofs[b]:
                return self.body_dofs[b][-1]
            b = int(self.m.body_parentid[b])
        return -1

    def ancestors(self, i: int) -> list[int]:
        """Dofs above dof i in the tree, nearest first."""
        out, j = [], self.m.dof_parentid[i]
        while j >= 0:
            out.append(int(j))
            j = self.m.dof_parentid[j]
        return out

    def free_qposadr(self) -> list[int]:
        """qpos address of every free joint."""
        m = self.m
        return [int(m.jnt_qposadr[j]) for j in range(m.njnt) if m.jnt_type[j] == JointType.FREE]

    def limited_dofs(self) -> list[tuple[int, int, float, float]]:
        """(dof, qpos address, lower, upper) of every limited hinge/slide joint."""
        m = self.m
        return [
            (
                int(m.jnt_dofadr[j]),
                int(m.jnt_qposadr[j]),
                float(m.jnt_range[j, 0]),
                float(m.jnt_range[j, 1]),
            )
            for j in range(m.njnt)
            if m.jnt_limited[j]
        ]
