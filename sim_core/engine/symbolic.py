"""Scalar expressions with constant folding, for emitting model-specialized straight-line code.

A value is a Python ``float`` (a model constant, folded at generation time) or a ``str`` (a variable
or a parenthesized expression in the emitted code). Products with 0, 1 or -1 and sums with 0 vanish,
so a rotation by 90 degrees about x costs no arithmetic and a hinge about z costs four products.
Vectors are lists of 3 values, matrices lists of 3 rows.
"""

from __future__ import annotations

from .codegen import Emitter, lit

__all__ = [
    "Val",
    "snap",
    "mul",
    "add",
    "neg",
    "sub",
    "dot",
    "cross",
    "matvec",
    "transpose",
    "matmul",
    "materialize",
]

Val = float | str

_EPS = 1e-12


def snap(x: float) -> float:
    """Round model constants that are 0 or +-1 up to float noise (e.g. cos(pi/2)) to exactly that."""
    x = float(x)
    for c in (0.0, 1.0, -1.0):
        if abs(x - c) < _EPS:
            return c
    return x


def _s(x: Val) -> str:
    return lit(x) if isinstance(x, float) else x


def neg(a: Val) -> Val:
    if isinstance(a, float):
        return -a if a != 0.0 else 0.0
    return f"(-{a})"


def mul(a: Val, b: Val) -> Val:
    if isinstance(a, float) and isinstance(b, float):
        return a * b
    if isinstance(a, float):
        a, b = b, a
    if isinstance(b, float):
        if b == 0.0:
            return 0.0
        if b == 1.0:
            return a
        if b == -1.0:
            return neg(a)
    return f"({_s(a)} * {_s(b)})"


def add(*terms: Val) -> Val:
    const = sum(t for t in terms if isinstance(t, float))
    names = [t for t in terms if isinstance(t, str)]
    if not names:
        return float(const)
    parts = names + ([lit(const)] if const != 0.0 else [])
    return parts[0] if len(parts) == 1 else "(" + " + ".join(parts) + ")"


def sub(a: Val, b: Val) -> Val:
    return add(a, neg(b))


def dot(a: list[Val], b: list[Val]) -> Val:
    return add(*(mul(x, y) for x, y in zip(a, b, strict=True)))


def cross(a: list[Val], b: list[Val]) -> list[Val]:
    return [
        sub(mul(a[1], b[2]), mul(a[2], b[1])),
        sub(mul(a[2], b[0]), mul(a[0], b[2])),
        sub(mul(a[0], b[1]), mul(a[1], b[0])),
    ]


def matvec(m: list[list[Val]], v: list[Val]) -> list[Val]:
    return [dot(row, v) for row in m]


def transpose(m: list[list[Val]]) -> list[list[Val]]:
    return [[m[j][i] for j in range(3)] for i in range(3)]


def matmul(a: list[list[Val]], b: list[list[Val]]) -> list[list[Val]]:
    bt = transpose(b)
    return [[dot(row, col) for col in bt] for row in a]


def materialize(e: Emitter, prefix: str, values):
    """Emit every non-trivial expression in ``values`` (nested lists) as a variable named
    ``{prefix}_{k}`` and return the same structure holding constants and names only."""
    counter = [0]

    def rec(v):
        if isinstance(v, list):
            return [rec(x) for x in v]
        if isinstance(v, float) or v.isidentifier():
            return v
        name = f"{prefix}_{counter[0]}"
        counter[0] += 1
        e(f"{name} = {v}")
        return name

    return rec(values)
