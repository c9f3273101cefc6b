"""The names the generated kernels' stages hand to each other, declared once, and their check.

The stage emitters write straight-line code for one env in which each stage leaves its results in
local variables named by index (``q3``, ``M4_2``, ...) for the stages after it. ``HANDOFFS`` is the
table of those names: what each holds and which stages may assign it. ``check`` runs on every
new generated source (``step.generate_source``, ``launch.load_kernels``): every name a kernel reads
must have been assigned earlier in it (or be an argument, a module global or a builtin), and a name
of the table may only be assigned by the stages the table gives it. A typo in an emitter therefore
fails in Python when the source is generated, with the stage and line, rather than in Warp's
compiler.
"""

from __future__ import annotations

import ast
import builtins
import functools
import re
from dataclasses import dataclass

__all__ = ["Handoff", "HANDOFFS", "GenerationError", "check", "specialized_globals"]


class GenerationError(ValueError):
    """A generated kernel reads a name no stage defined, or a stage assigns another stage's name."""


@dataclass(frozen=True)
class Handoff:
    pattern: str  # the names, a regular expression over the whole name
    holds: str  # what they hold, with units
    stages: tuple[str, ...]  # the stages that may assign them (``Emitter.stage`` names)


_STATE = ("load state", "adaptive split start")
HANDOFFS = (
    Handoff(
        r"q\d+",
        "position coordinate k of env w (rad or m; a free joint: position, quaternion)",
        (*_STATE, "positions"),
    ),
    Handoff(
        r"v\d+",
        "velocity of dof i (rad/s or m/s)",
        (*_STATE, "velocity update", "joint limits", "contacts", "positions"),
    ),
    Handoff(r"v0_\d+", "velocity of dof i at the start of the substep", ("substep start",)),
    Handoff(r"xp\d+", "world position of body b (m)", ("kinematics", "contacts", "collision")),
    Handoff(r"xq\d+", "world orientation of body b (wp.quat)", ("kinematics", "contacts", "collision")),
    Handoff(r"bias\d+", "bias force of dof i: Coriolis, centrifugal, gravity (N m or N)", ("dynamics",)),
    Handoff(
        r"M\d+_\d+", "mass matrix entry (i, j), j = i or an ancestor of i, armature included", ("dynamics",)
    ),
    Handoff(r"fa\d+", "actuator force of dof i, clamped (N m or N)", ("step outputs", "actuation")),
    Handoff(r"kd\d+", "velocity gain of dof i the integrator treats implicitly", ("actuation",)),
    Handoff(r"acc\d+", "acceleration of dof i (rad/s^2 or m/s^2)", ("velocity update",)),
    Handoff(r"a\d+_\d+", "L entry (i, j) of the factor of A = M + dt diag(damping + kd)", ("velocity update",)),
    Handoff(r"dinv\d+", "1 / D_i of that factor (the contact solver reads both)", ("velocity update",)),
    Handoff(r"side\d+", "limit of dof i active: +1 lower, -1 upper, 0 none", ("joint limits",)),
    Handoff(r"tgt\d+", "velocity of dof i that lands it on its active limit", ("joint limits",)),
    Handoff(r"_any", "some joint limit is active", ("joint limits",)),
    Handoff(r"_deep", "deepest penetration at the substep's end (m, >= 0)", ("step outputs", "collision")),
    Handoff(r"_ovf", "contacts dropped in this step for want of slots", ("step outputs", "contacts")),
)
_COMPILED = [(re.compile(h.pattern), h) for h in HANDOFFS]


def specialized_globals() -> tuple[str, ...]:
    """The contact solver's functions that ``specialize`` adds to a generated module at import."""
    import warp as wp

    from .contact import solver

    return tuple(n for n, f in vars(solver).items() if isinstance(f, wp.Function))


def check(source: str, stages: list[tuple[int, str]], extra_globals=()) -> None:
    """Raise ``GenerationError`` if a function of ``source`` reads a name before it is assigned (and
    it is no argument, module global or builtin) or a stage of a kernel assigns a name of
    ``HANDOFFS`` that the table does not give it (helper functions have names of their own).
    ``stages``: ``(first line, stage)`` marks (``Emitter.stages``); lines before a function's first
    mark belong to the stage ``"step"``."""
    tree = ast.parse(source)
    known = set(dir(builtins)) | set(extra_globals)
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            known.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            known.add(node.name)
        elif isinstance(node, ast.Assign):
            known.update(t.id for t in node.targets if isinstance(t, ast.Name))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            _Checker(node, known, stages, kernel=any(_is_kernel(d) for d in node.decorator_list)).run()


def _is_kernel(decorator: ast.expr) -> bool:
    return isinstance(decorator, ast.Attribute) and decorator.attr == "kernel"


class _Checker:
    def __init__(self, fn: ast.FunctionDef, known: set[str], stages: list[tuple[int, str]], kernel: bool):
        self.fn, self.kernel = fn, kernel
        self.defined = set(known) | {a.arg for a in fn.args.args}
        self.marks = [(line, name) for line, name in stages if fn.lineno <= line <= fn.end_lineno]

    def stage(self, line: int) -> str:
        name = "step"
        for first, stage in self.marks:
            if first > line:
                break
            name = stage
        return name

    def run(self) -> None:
        self.block(self.fn.body)

    def block(self, body: list[ast.stmt]) -> None:
        for s in body:
            self.statement(s)

    def statement(self, s: ast.stmt) -> None:
        if isinstance(s, ast.Assign):
            self.reads(s.value)
            for target in s.targets:
                self.assign(target)
        elif isinstance(s, ast.AugAssign):
            self.reads(s.target)
            self.reads(s.value)
            self.assign(s.target)
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.reads(s.value)
            self.assign(s.target)
        elif isinstance(s, ast.For):
            self.reads(s.iter)
            self.assign(s.target)
            self.block(s.body)
            self.block(s.orelse)
        elif isinstance(s, (ast.While, ast.If)):
            self.reads(s.test)
            self.block(s.body)
            self.block(s.orelse)
        else:  # expressions, return, break, continue, pass
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.expr):
                    self.reads(child)

    def reads(self, expr: ast.expr) -> None:
        for node in ast.walk(expr):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in self.defined:
                owner = _owner(node.id)
                declared = f" (the table gives it to {', '.join(owner.stages)})" if owner else ""
                raise GenerationError(
                    f"generated {self.fn.name}, stage {self.stage(node.lineno)!r}, line {node.lineno}: "
                    f"reads {node.id!r} before any stage assigns it{declared}"
                )

    def assign(self, target: ast.expr) -> None:
        if isinstance(target, ast.Name):
            owner = _owner(target.id) if self.kernel else None
            stage = self.stage(target.lineno) if owner is not None else ""
            if owner is not None and stage not in owner.stages:
                raise GenerationError(
                    f"generated {self.fn.name}, stage {stage!r}, line {target.lineno}: assigns "
                    f"{target.id!r} ({owner.holds}), which the table gives to {', '.join(owner.stages)}"
                )
            self.defined.add(target.id)
        elif isinstance(target, ast.Tuple):
            for t in target.elts:
                self.assign(t)
        else:  # a subscript or attribute: what it indexes is read
            self.reads(target)


@functools.cache
def _owner(name: str) -> Handoff | None:
    """The table's entry for ``name``, None for a stage's own name."""
    return next((h for rx, h in _COMPILED if rx.fullmatch(name)), None)
