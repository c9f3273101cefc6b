"""The model as a tree of single-joint segments, the unit the local-frame dynamics is emitted for.

Each hinge or slide joint is one segment; a free joint is two (three world-axis translations, then a
rotation about the body's axes, MuJoCo's qvel convention); a body with several joints is a chain of
segments. Bodies without joints are welded into their parent's segment (their inertia added as a
constant) and bodies fixed to the world are constant frames. Everything here is host-side and
constant; quantities are in the segment's own frame (the body frame after its joint).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..types import JointType, Model
from .quaternion import quat_to_mat_np

__all__ = ["Segment", "build_segments", "inertial_slots"]


@dataclass
class Segment:
    """One joint's frame. ``kind``: "hinge", "slide", "free_t" (translation), "free_r" (rotation)."""

    parent: int  # parent segment, -1 for the world
    kind: str
    dofs: list[int]
    qadr: int  # first qpos coordinate of the joint
    qpos0: float = 0.0
    R_pre: np.ndarray = field(default_factory=lambda: np.eye(3))  # pre-joint frame in parent coords
    p_pre: np.ndarray = field(default_factory=lambda: np.zeros(3))
    axis: np.ndarray = field(default_factory=lambda: np.zeros(3))
    anchor: np.ndarray = field(default_factory=lambda: np.zeros(3))
    mass: float = 0.0  # inertia of the bodies riding on this segment, about its origin, its coords
    h: np.ndarray = field(default_factory=lambda: np.zeros(3))  # first moment m * com
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))
    S: list[np.ndarray] = field(default_factory=list)  # (6,) motion subspace (w, v) per dof
    children: list[int] = field(default_factory=list)
    subtree_mass: float = 0.0
    # per-env inertial (see ``inertial_slots``): slot of the free body riding on this segment (-1:
    # constant), the mass and first moment it was built with, its inertia about the segment origin as
    # one matrix per principal axis (scaled per env) plus the parallel-axis part (scaled with the mass)
    slot: int = -1
    gravity: float = 1.0  # a root segment's share of gravity: 1 - its tree's gravcomp
    principal: list[np.ndarray] = field(default_factory=list)
    parallel: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))


def build_segments(m: Model) -> list[Segment]:
    segs: list[Segment] = []
    seg_body: list[int] = []  # the body each segment was made for
    # each body's frame as (segment, rotation, origin) relative to that segment (-1: the world)
    frame: list[tuple[int, np.ndarray, np.ndarray]] = [(-1, np.eye(3), np.zeros(3))]
    for b in range(1, m.nbody):
        pseg, pR, pp = frame[m.body_parentid[b]]
        R = pR @ quat_to_mat_np(m.body_quat[b])
        p = pp + pR @ m.body_pos[b]
        cur = pseg
        for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]):
            jt = JointType(int(m.jnt_type[j]))
            d, a = int(m.jnt_dofadr[j]), int(m.jnt_qposadr[j])
            if jt == JointType.FREE:
                assert cur == -1, "MuJoCo allows free joints only on bodies of the world"
                eye = np.eye(3)
                segs.append(
                    Segment(
                        -1, "free_t", [d, d + 1, d + 2], a, S=[np.r_[np.zeros(3), eye[k]] for k in range(3)]
                    )
                )
                segs.append(
                    Segment(
                        len(segs) - 1,
                        "free_r",
                        [d + 3, d + 4, d + 5],
                        a,
                        S=[np.r_[eye[k], np.zeros(3)] for k in range(3)],
                    )
                )
            else:
                axis, anchor = m.jnt_axis[j].astype(np.float64), m.jnt_pos[j].astype(np.float64)
                kind = "hinge" if jt == JointType.HINGE else "slide"
                s = np.r_[axis, np.cross(anchor, axis)] if kind == "hinge" else np.r_[np.zeros(3), axis]
                segs.append(Segment(cur, kind, [d], a, float(m.qpos0[a]), R, p, axis, anchor, S=[s]))
            cur, R, p = len(segs) - 1, np.eye(3), np.zeros(3)
        for s in segs[len(seg_body) :]:
            seg_body.append(b)
            if s.parent < 0:  # a tree's root: its share of gravity (io checks the tree shares gravcomp)
                s.gravity = 1.0 - float(m.body_gravcomp[b])
        frame.append((cur, R, p))
        if cur >= 0 and m.body_mass[b] > 0:
            _add_inertia(segs[cur], m, b, R, p)
    for i, s in enumerate(segs):
        if s.parent >= 0:
            segs[s.parent].children.append(i)
    for k, b in enumerate(inertial_slots(m)):
        seg = next(s for s in segs if s.kind == "free_r" and m.dof_bodyid[s.dofs[0]] == b)
        Ri = quat_to_mat_np(m.body_iquat[b])
        c = np.asarray(m.body_ipos[b], np.float64)
        seg.slot = k
        seg.principal = [float(m.body_inertia[b][a]) * np.outer(Ri[:, a], Ri[:, a]) for a in range(3)]
        seg.parallel = float(m.body_mass[b]) * (c @ c * np.eye(3) - np.outer(c, c))
    for i in range(len(segs) - 1, -1, -1):
        segs[i].subtree_mass += segs[i].mass
        if segs[i].parent >= 0:
            segs[segs[i].parent].subtree_mass += segs[i].subtree_mass
    return segs


def inertial_slots(m: Model) -> list[int]:
    """Bodies whose mass and inertia are per-env parameters: each free body that carries no other
    body (an object such as a cube), in body order."""
    out = []
    for b in range(1, m.nbody):
        j = m.body_jntadr[b]
        if m.body_jntnum[b] == 1 and m.jnt_type[j] == JointType.FREE and m.body_mass[b] > 0:
            if not any(m.body_parentid[c] == b for c in range(1, m.nbody)):
                out.append(b)
    return out


def _add_inertia(seg: Segment, m: Model, b: int, R: np.ndarray, p: np.ndarray) -> None:
    """Add body b (its frame at (R, p) in the segment) to the segment's inertia about its origin."""
    mass = float(m.body_mass[b])
    Ri = R @ quat_to_mat_np(m.body_iquat[b])
    c = p + R @ m.body_ipos[b]
    seg.mass += mass
    seg.h = seg.h + mass * c
    seg.inertia = (
        seg.inertia + Ri @ np.diag(m.body_inertia[b]) @ Ri.T + mass * (c @ c * np.eye(3) - np.outer(c, c))
    )
