"""Checked access to per-env arrays: env selection (``envs_idx``), column selection, values.

Everything is validated before anything is written, so a bad call leaves the scene unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .errors import DofsIdxError, EnvsIdxError, InvalidValueError, ShapeError

__all__ = ["EnvSel", "select_envs", "select_cols", "ncols", "to_values", "read", "write"]


@dataclass(frozen=True)
class EnvSel:
    """Selected envs: all (``idx`` and ``mask`` None), an index tensor, or a boolean mask."""

    idx: torch.Tensor | None = None  # (k,) int64 on the device
    mask: torch.Tensor | None = None  # (n_envs,) bool on the device
    count: int | None = None  # number selected, when known without a device sync


def select_envs(envs_idx, n_envs: int, device: torch.device) -> EnvSel:
    """Validate ``envs_idx`` (None, list, NumPy array, torch tensor of ints, or bool mask)."""
    if envs_idx is None:
        return EnvSel(count=max(n_envs, 1))
    if n_envs == 0:
        raise EnvsIdxError("envs_idx: the scene was built with n_envs=0 (no batch); pass envs_idx=None")
    t = envs_idx if isinstance(envs_idx, torch.Tensor) else torch.as_tensor(np.asarray(envs_idx))
    if t.dtype == torch.bool:
        if t.shape != (n_envs,):
            raise EnvsIdxError(f"envs_idx: a boolean mask must have shape ({n_envs},), got {tuple(t.shape)}")
        count = int(t.sum()) if t.device.type == "cpu" else None
        return EnvSel(mask=t.to(device), count=count)
    if t.dtype.is_floating_point or t.dtype.is_complex:
        raise EnvsIdxError(f"envs_idx: expected integer indices or a bool mask, got dtype {t.dtype}")
    if t.ndim == 0:
        t = t.reshape(1)
    if t.ndim != 1:
        raise EnvsIdxError(f"envs_idx: expected a 1-D index array, got shape {tuple(t.shape)}")
    host = t.detach().cpu()
    if host.numel() and (int(host.min()) < 0 or int(host.max()) >= n_envs):
        raise EnvsIdxError(
            f"envs_idx: indices must lie in [0, {n_envs - 1}], got min {int(host.min())}, max {int(host.max())}"
        )
    if torch.unique(host).numel() != host.numel():
        raise EnvsIdxError(f"envs_idx: duplicated indices in {host.tolist()}")
    return EnvSel(idx=t.to(device=device, dtype=torch.int64), count=host.numel())


def select_cols(idx_local, n: int, start: int, name: str) -> slice | torch.Tensor:
    """Global columns for local indices ``idx_local`` in ``[0, n)`` of a block starting at ``start``.

    Returns a slice when the selection is contiguous (so reads are views); a ``range`` with step 1
    is the cheapest way to ask for one.
    """
    if idx_local is None:
        return slice(start, start + n)
    # a contiguous range needs no checks on tensors
    if isinstance(idx_local, range) and idx_local.step == 1 and len(idx_local):
        if idx_local.start < 0 or idx_local.stop > n:
            raise DofsIdxError(f"{name}: indices must lie in [0, {n - 1}], got {idx_local}")
        return slice(start + idx_local.start, start + idx_local.stop)
    host = (
        idx_local.detach().cpu()
        if isinstance(idx_local, torch.Tensor)
        else torch.as_tensor(np.asarray(idx_local))
    )
    if host.dtype.is_floating_point or host.dtype == torch.bool:
        raise DofsIdxError(f"{name}: expected integer indices, got dtype {host.dtype}")
    host = host.reshape(-1).to(torch.int64)
    if host.numel() == 0:
        raise DofsIdxError(f"{name}: empty selection")
    if int(host.min()) < 0 or int(host.max()) >= n:
        raise DofsIdxError(f"{name}: indices must lie in [0, {n - 1}], got {host.tolist()}")
    if torch.unique(host).numel() != host.numel():
        raise DofsIdxError(f"{name}: duplicated indices in {host.tolist()}")
    lo = int(host[0])
    if torch.equal(host, torch.arange(lo, lo + host.numel())):
        return slice(start + lo, start + lo + host.numel())
    return host + start


def ncols(cols: slice | torch.Tensor) -> int:
    return cols.stop - cols.start if isinstance(cols, slice) else cols.numel()


def to_values(
    values,
    name: str,
    sel: EnvSel,
    n_envs: int,
    trailing: tuple[int, ...],
    device: torch.device,
    *,
    check_finite: bool = True,
) -> tuple[torch.Tensor, bool]:
    """Convert ``values`` to float32 on ``device`` and check its shape.

    Accepted shapes: ``trailing`` (broadcast to every selected env), or ``(k, *trailing)`` with ``k``
    the number of selected envs; with a mask, ``(n_envs, *trailing)`` too (rows picked by the mask,
    no device sync). Returns the tensor and whether it has a batch dimension.
    """
    t = values if isinstance(values, torch.Tensor) else torch.as_tensor(np.asarray(values))
    if not (
        t.dtype.is_floating_point or t.dtype in (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8)
    ):
        raise InvalidValueError(f"{name}: expected real numbers, got dtype {t.dtype}")
    t = t.to(device=device, dtype=torch.float32)
    shape = tuple(t.shape)
    if n_envs == 0 or shape == trailing:
        if shape != trailing:
            raise ShapeError(f"{name}: expected shape {trailing} (n_envs=0), got {shape}")
        batched = False
    else:
        allowed = {n_envs} if sel.mask is not None else {sel.count}
        if sel.mask is not None and shape and shape[0] != n_envs:
            allowed.add(sel.count if sel.count is not None else int(sel.mask.sum()))
        if len(shape) != len(trailing) + 1 or shape[1:] != trailing or shape[0] not in allowed:
            k = " or ".join(str(a) for a in sorted(allowed))
            raise ShapeError(
                f"{name}: expected shape ({k}, {', '.join(map(str, trailing))}) for the selected envs"
                f" or {trailing} to broadcast, got {shape}"
            )
        batched = True
    # the sum first: one reduction; only a non-finite sum (inf/NaN, or an overflow) takes the full check
    if check_finite and not math.isfinite(t.sum().item()) and not bool(torch.isfinite(t).all()):
        raise InvalidValueError(f"{name}: contains NaN or inf")
    return t, batched


def write(target: torch.Tensor, cols, sel: EnvSel, values: torch.Tensor, batched: bool, n_envs: int) -> None:
    """``target[selected envs, cols] = values`` in place (``target`` is (nworld, ...)).

    A mask with full-batch values is applied with ``torch.where`` on a GPU (no sync) and through the
    selected rows on the CPU (no transfer to avoid there, and the cost follows the rows written).
    """
    full_rows = sel.mask is not None and (not batched or values.shape[0] == n_envs)
    if full_rows and target.device.type != "cpu":
        view = target[:, cols]
        m = sel.mask.reshape((-1,) + (1,) * (view.ndim - 1))
        target[:, cols] = torch.where(m, values.to(view.dtype), view)  # no sync
        return
    if sel.mask is not None:
        idx = torch.nonzero(sel.mask).reshape(-1)  # compact rows for a mask
        if full_rows and batched:
            values = values[idx]
    elif sel.idx is None:
        target[:, cols] = values
        return
    else:
        idx = sel.idx
    if isinstance(cols, slice):
        target[idx, cols] = values
    else:
        target[idx[:, None], cols[None, :]] = values


def read(source: torch.Tensor, cols, sel: EnvSel, n_envs: int) -> torch.Tensor:
    """``source[selected envs, cols]`` with the batch dimension dropped when ``n_envs == 0``.

    A view of the simulator's memory when all envs and a contiguous column range are selected.
    """
    out = source[:, cols]
    if sel.idx is not None:
        out = out[sel.idx]
    elif sel.mask is not None:
        out = out[sel.mask]
    return out[0] if n_envs == 0 else out
