"""Per-dof actuation, emitted: PD position servo, velocity servo or force, clamped to the force range.

Reads the per-env control arrays loaded at the top of the kernel (``mode{i}``, ``cp{i}``, ``cvt{i}``,
``cf{i}``, ``kp{i}``, ``kv{i}``, ``lo{i}``, ``hi{i}``) and the state ``q{k}``, ``v{i}``; emits the actuator
force ``fa{i}`` and ``kd{i}``, the actuator's velocity gain that the implicit integrator treats
implicitly: ``kv`` while the force is strictly inside its range, 0 when it is clamped (then the
force no longer depends on the velocity), exactly as MuJoCo's ``implicitfast`` does.
"""

from __future__ import annotations

from ..types import CtrlMode
from .codegen import Emitter
from .tree import Tree

__all__ = ["CONTROL_ARRAYS", "emit_load_controls", "emit_actuation"]

# kernel argument -> per-dof local name prefix
CONTROL_ARRAYS = {
    "ctrl_mode": "mode",
    "ctrl_position": "cp",
    "ctrl_velocity": "cvt",
    "ctrl_force": "cf_cmd",
    "dof_kp": "kp",
    "dof_kv": "kv",
    "dof_force_lo": "lo",
    "dof_force_hi": "hi",
    "qfrc_applied": "qa",
    "dof_damping": "damp",
}


def emit_load_controls(t: Tree, e: Emitter) -> None:
    for i in range(t.m.nv):
        for arr, name in CONTROL_ARRAYS.items():
            e(f"{name}{i} = {arr}[w, {i}]")


def emit_actuation(t: Tree, e: Emitter) -> None:
    """Written with selects, not branches: random commands saturate the force range at random,
    and branches would mispredict and cut the dynamics around them into separate blocks the
    compiler cannot schedule across."""
    pos, vel = int(CtrlMode.POSITION), int(CtrlMode.VELOCITY)
    for i in range(t.m.nv):
        e(f"fa{i} = wp.where(mode{i} == {vel}, kv{i} * (cvt{i} - v{i}), cf_cmd{i})")
        e(f"kd{i} = wp.where(mode{i} == {vel}, kv{i}, 0.0)")
        if t.dof_qadr[i] >= 0:  # position servo only for hinge/slide dofs
            e(f"fa{i} = wp.where(mode{i} == {pos}, kp{i} * (cp{i} - q{t.dof_qadr[i]}) - kv{i} * v{i}, fa{i})")
            e(f"kd{i} = wp.where(mode{i} == {pos}, kv{i}, kd{i})")
        e(f"kd{i} = wp.where(fa{i} <= lo{i}, 0.0, kd{i})")
        e(f"fa{i} = wp.where(fa{i} <= lo{i}, lo{i}, fa{i})")
        e(f"kd{i} = wp.where(fa{i} >= hi{i}, 0.0, kd{i})")
        e(f"fa{i} = wp.where(fa{i} >= hi{i}, hi{i}, fa{i})")
