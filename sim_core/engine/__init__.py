"""The smooth dynamics of the generated step: each stage emits its code for one env, with the
model's constants folded in (``sim_core/step.py`` composes them).

- ``codegen``: the ``Emitter`` the stages write into; ``tree``: ``Tree``, the model's derived
  structure they share (dofs per body, ancestors, kinematic trees, limited joints); ``symbolic``:
  expressions with constant folding; ``segments``: the model as single-joint segments;
  ``quaternion``: quaternion helpers.
- ``kinematics``: body poses, segment transforms and velocities.
- ``dynamics``: bias forces, the mass matrix and its sparse factor and solve.
- ``actuation``: PD position, velocity or force actuation per dof.
- ``integrator``: the implicit velocity update, joint limits, positions, the factor's layout.

Imports: these modules import each other and ``sim_core.types``, never the solver, the scene, the
model import (``io``) or ``contact``.
"""
