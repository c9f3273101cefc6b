"""Contacts: which geom pairs collide, their contacts, the rows the step builds for them, the solve.

Every substep of the generated step kernel (``sim_core/step.py``) runs this pipeline per env:

1. ``pairs``: the candidate pairs, chosen once at build time by MuJoCo's filter (host tables).
2. ``emit_pairs``: each pair written out for the model, calling ``narrow_phase.pair_apart`` and
   ``narrow_phase.narrow_phase`` (the contacts of two primitive geoms; box pairs in ``box_box``)
   into ``geometry.ContactSlots``.
3. ``rows``: per contact, the generated Jacobian rows, ``A^-1 J^T`` and the 3x3 block of ``W``.
4. ``solver``: the normal, friction and joint-limit impulses (``solve_contacts``, rebuilt for the
   model by ``specialize``), with the dense factor of the active normal rows in ``ldl``, MuJoCo's
   soft-constraint ``impedance`` and the ``warm_start``; its tables and per-env buffers are in
   ``buffers``.

Outside the step, ``frame`` gives the API the solver's contact frame (world-frame forces).

``rigid_solver.contacts.detected_*`` (``sim_core/state.py``) show what the detection found, which
``tests/test_collision.py`` checks against MuJoCo's ``mj_collision``.

Imports go one way: ``geometry`` <- ``box_box`` <- ``narrow_phase`` (which also reads ``pairs``);
``geometry`` <- ``buffers`` <- (``ldl``, ``impedance``, ``warm_start``) <- ``solver`` <- ``frame``,
``specialize``; ``pairs`` <- the emitters (``emit_pairs``, ``rows``); outside the package, only
``sim_core.engine`` (the emitter, the model's structure, the factor's layout) and ``sim_core.types``.
"""
