"""Adaptive substeps: the wrapper around the step kernel's substeps that redoes a too-deep step.

An env whose step ended deeper than ``RigidOptions.split_depth`` in a contact (or in which a free
body moved further than the contact margin) has the step redone from its start state in up to
``MAX_SPLIT`` finer substeps, and once more in ``ESCALATED`` substeps if a substep of that redo still
ends too deep. The step kernel's pass over env ``w`` is driven by three arguments:

- ``pass_arg``: -1, the step of every env (pass -1); ``INLINE_REDO``, the same, and each env it
  flags is redone at once by its thread (the CPU); ``REDO``, one thread per env of ``redo_envs``
  runs that env's redo (CUDA, a second launch).
- ``split_pass``: within a redo, which of its substeps this pass is (``emit_pass_start``).
- ``detect``: a detection pass (0: the envs whose state was set; 1 and 2: the start of the first
  and second redo, their start state restored) computes the contacts at the current state and
  nothing else (``emit_pass_start``, then the substep's end).

The emitters here write the loop over a thread's envs and redo items (``env_loop``), the start of
a pass (``emit_pass_start``) and its end (``emit_pass_end``); ``step.py`` puts the substeps between
them.
"""

from __future__ import annotations

import contextlib

from .contact import pairs
from .engine.codegen import Emitter
from .engine.tree import Tree
from .types import JointType

__all__ = [
    "MAX_SPLIT",
    "ESCALATED",
    "REDO",
    "INLINE_REDO",
    "REDO_ITEMS",
    "env_loop",
    "emit_pass_start",
    "emit_pass_end",
    "free_body_dofs",
]

MAX_SPLIT = 8  # most substeps the first redo of a flagged env's step takes
ESCALATED = 2 * MAX_SPLIT  # substeps of the second redo, of a step whose first redo still ended too deep
REDO = -2  # ``pass_arg`` of the redo launch: each thread runs one flagged env through its redo
INLINE_REDO = -3  # ``pass_arg`` of a first pass that redoes each env it flags at once, in the same thread
REDO_ITEMS = 2 + MAX_SPLIT + ESCALATED  # the first redo's detection and passes, then the second's


def free_body_dofs(t: Tree) -> list[int]:
    """Dof address of each free joint whose body has colliding geoms."""
    m = t.m
    colliding = pairs.colliding_bodies(m.mjmodel)
    return [
        int(m.jnt_dofadr[j])
        for j in range(m.njnt)
        if m.jnt_type[j] == JointType.FREE and int(m.jnt_bodyid[j]) in colliding
    ]


@contextlib.contextmanager
def env_loop(e: Emitter, contacts: bool):
    """The loop over the envs of one thread (``per_thread`` of them in turn), its body indented
    inside; with contacts, also over each flagged env's redo items (``_emit_redo_sequence``), and
    with ``INLINE_REDO`` an env its pass flags is redone before the thread's next env."""
    e("_i = int(0)")
    e("_nitems = per_thread")
    if contacts:
        e("_r = int(-1)  # the next redo item of env w (INLINE_REDO), -1: none")
        e("w = int(0)")
        e(f"if pass_arg == {REDO}:")
        e(f"    _nitems = {REDO_ITEMS}")
        e("while _i < _nitems or _r >= 0:")
        e.depth += 1
        _emit_redo_sequence(e)
    else:
        e("while _i < _nitems:")
        e.depth += 1
        e("w = _tid * per_thread + _i")
        e("_i += 1")
    e("if w >= qpos.shape[0]:")
    e("    break")
    yield
    if contacts:
        e(f"if pass_arg == {INLINE_REDO} and split_pass < 0 and split[w] > 1:")
        e("    _r = 0  # redo env w now")
    e.depth -= 1


def _emit_redo_sequence(e: Emitter) -> None:
    """Env ``w``, ``split_pass`` and ``detect`` of the loop's next iteration: the launch's own pass
    over env ``_i`` of the thread's, or an item of a redo: detection 1, the first redo's passes
    0..MAX_SPLIT-1, detection 2, the second redo's passes. In the redo launch (``pass_arg ==
    REDO``, on CUDA) item ``_i`` of the redo of env ``redo_envs[tid]``; in a first pass with
    ``INLINE_REDO`` (the CPU) item ``_r`` of the redo of the env it just stepped and flagged, before
    the thread's next env (its state still in cache, and no second launch, whose Python and
    argument overhead costs more than the redo itself at 1024 envs on the CPU). The envs are
    independent, so an env's redo gives the same result whichever launch runs it."""
    e("split_pass = wp.max(pass_arg, -1)")
    e("detect = detect_arg")
    e("_item = int(-1)")
    e("if _r >= 0:")
    with e.indent():
        e("_item = _r")
        e("_r += 1")
        e(f"if _r == {REDO_ITEMS}:")
        e("    _r = -1")
    e(f"elif pass_arg == {REDO}:")
    with e.indent():
        e("w = redo_envs[_tid]")
        e("_item = _i")
        e("_i += 1")
    e("else:")
    with e.indent():
        e("w = _tid * per_thread + _i")
        e("_i += 1")
    e("if _item >= 0:")
    with e.indent():
        e("split_pass = -1")
        e("detect = -1")
        e("if _item == 0:")
        e("    detect = 1")
        e(f"elif _item <= {MAX_SPLIT}:")
        e("    split_pass = _item - 1")
        e(f"elif _item == {MAX_SPLIT + 1}:")
        e("    detect = 2")
        e("else:")
        e("    split_pass = _item - 2")


def emit_pass_start(t: Tree, e: Emitter) -> None:
    """The start of a pass, after env ``w``'s state is loaded: a detection pass (``detect >= 0``)
    restores a redo's start state or skips an env that needs no detection; a redo pass skips an
    env it does not redo and sets its substep; pass -1 saves every env's start state."""
    e("if detect >= 0:")
    with e.indent():
        _emit_detect_start(t, e)
    e("else:")
    with e.indent():
        _emit_split_start(t, e)


def _emit_split_start(t: Tree, e: Emitter) -> None:
    """Pass -1 is the step of every env, saving its start state in ``qpos0``/``qvel0``; passes
    0..MAX_SPLIT-1 (the first redo) redo the step of the envs it flagged (``2 <= split[w] <=
    MAX_SPLIT``) from that state (which detection 1 restored, with its contacts), one substep of
    ``dt / split[w]`` each; passes MAX_SPLIT..MAX_SPLIT+ESCALATED-1 (the second redo) likewise for
    the envs whose first redo still ended too deep (``split[w] == ESCALATED``)."""
    m = t.m
    e("if split_pass >= 0:")
    with e.indent():
        e(f"if split_pass < {MAX_SPLIT}:")
        e(f"    if split[w] < 2 or split[w] > {MAX_SPLIT} or split_pass >= split[w]:")
        e("        continue")
        e(f"elif split[w] != {ESCALATED}:")
        e("    continue")
        e("dt = dt_step / float(split[w])")
    e("else:")
    with e.indent():
        for k in range(m.nq):
            e(f"qpos0[w, {k}] = q{k}")
        for i in range(m.nv):
            e(f"qvel0[w, {i}] = v{i}")


def _emit_detect_start(t: Tree, e: Emitter) -> None:
    """A detection pass (``detect >= 0``) of the step kernel computes the poses and contacts
    (``cd.nxt``, ``cd.nxt_wanted``) at the current state, for the envs a step cannot start from the
    contacts the last one ended with: ``detect`` 0, those whose state was set since (``cd.fresh[w]
    == 0``); 1, those the adaptive split redoes (``split[redo_envs[i]] >= 2``); 2, those it redoes
    a second time (``== ESCALATED``), their start state restored from ``qpos0``/``qvel0`` first.
    It skips the substep's dynamics and solve and runs the end of the substep (``step.py``): the
    same instructions as a step that ends in this state, so both find the same contacts to the
    last bit, whatever multiply-adds the compiler fuses."""
    m = t.m
    e("if detect >= 1:")
    with e.indent():
        e(f"if split[w] < 2 or (detect == 2 and split[w] != {ESCALATED}):")
        e("    continue")
        for k in range(m.nq):
            e(f"q{k} = qpos0[w, {k}]")
            e(f"qpos[w, {k}] = q{k}")
        for i in range(m.nv):
            e(f"v{i} = qvel0[w, {i}]")
            e(f"qvel[w, {i}] = v{i}")
    e("elif cd.fresh[w] == 1:")
    e("    continue")


def emit_pass_end(t: Tree, e: Emitter) -> None:
    """The end of a pass, after its substeps: a detection pass ends here (the env's contacts are
    fresh); a step records its dropped contacts and how many substeps it should have taken."""
    e("if detect >= 0:")
    e("    cd.fresh[w] = 1")
    e("    continue")
    e("cd.overflow[w] = _ovf")
    _emit_split_check(t, e)


def _emit_split_check(t: Tree, e: Emitter) -> None:
    """After pass -1, the substeps its step should have taken, ``split[w]``: a contact deeper than
    ``split_depth`` at the end asks for ``depth / max_penetration`` (what ends that deep got there in
    one step from beyond the contact margin, or turned a face no contact covered into its
    neighbour: a pad striking at speed, a cube flung spinning), and a free body that moved further
    than the contact margin (it could have passed through a thin geom unseen) for as many as
    margins it moved. The warm-start impulses scale to the substep. ``split_depth <= 0``: never.
    A substep of a first redo that ends deeper than ``split_depth`` (the finer substeps took
    another path: a cube that turned onto a corner, a pad that met the cube sooner) flags its env
    for the second redo, in ESCALATED substeps; the first redo's later substeps are skipped."""
    e(f"if split_pass >= 0 and split_pass < {MAX_SPLIT}:")
    with e.indent():
        e("if _deep > split_depth:")
        e(f"    scale_warm_start(cd, w, float(split[w]) / {float(ESCALATED)})")
        e(f"    split[w] = {ESCALATED}")
    e("if split_pass < 0:")
    with e.indent():
        e("_k = float(1.0)")
        e("if split_depth > 0.0:")
        with e.indent():
            for a in free_body_dofs(t):
                speed = f"wp.length(wp.vec3(v{a}, v{a + 1}, v{a + 2}))"
                e(f"_k = wp.max(_k, {speed} * dt / wp.max(margin, 1.0e-6))")
            e("if _deep > split_depth:")
            e("    _k = wp.max(_k, _deep / max_pen)")
        e(f"_nsplit = wp.min(int(wp.ceil(_k)), {MAX_SPLIT})")
        e("split[w] = _nsplit")
        e("if _nsplit > 1:")
        e("    scale_warm_start(cd, w, 1.0 / float(_nsplit))")
