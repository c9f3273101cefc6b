"""The contact solver's Warp functions made for one model, in the generated step's module.

``solver.py`` writes its loops over a row's dofs through placeholders (``solver.DOF_HELPERS``); the
generated step emits those helpers for its model (``rows.emit_dof_helpers``) and, at import, calls
``specialize`` to rebuild the solver's functions around them.
"""

from __future__ import annotations

import types
from typing import Any

import warp as wp

from . import solver

__all__ = ["specialize"]


def specialize(helpers: dict[str, Any], module_name: str) -> dict[str, Any]:
    """``solver.py``'s Warp functions, made for one model: with ``helpers`` (each of ``DOF_HELPERS``,
    generated for the model by ``rows.emit_dof_helpers``: unrolled over each kinematic tree a row
    can touch; a cube's floor contact touches 6 of the arm + cube scene's 15 dofs). Each function
    is rebuilt from the same code with a copy of the solver module's globals in which the helpers
    and the rebuilt functions replace the placeholders and originals, and is registered in the Warp
    module ``module_name`` (the generated step's). Returns the rebuilt functions by name."""
    scope = dict(vars(solver))
    scope["__name__"] = module_name
    scope.update({name: helpers[name] for name in solver.DOF_HELPERS})
    out = {}
    for name, f in vars(solver).items():
        if (
            isinstance(f, wp.Function)
            and name not in solver.DOF_HELPERS
            and f.func.__module__ == solver.__name__
        ):
            py = types.FunctionType(f.func.__code__, scope, name, f.func.__defaults__, f.func.__closure__)
            py.__annotations__ = dict(f.func.__annotations__)
            py.__doc__ = f.func.__doc__
            out[name] = scope[name] = wp.func(py)
    return out
