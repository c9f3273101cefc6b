"""The model's derived structure, computed once on the host and shared by every emitter: the dofs of
each body, each dof's ancestors and kinematic tree, the limited joints, the segments the dynamics is
emitted for and the static bodies' world poses."""

from __future__ import annotations

import numpy as np

from ..types import JointType, Model, dof_qposadr
from .quaternion import qmul_np, rotate_np
from .segments import build_segments

__all__ = ["Tree"]


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
