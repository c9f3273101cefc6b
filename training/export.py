"""A checkpoint's deterministic policy as one standalone file, for deployment without warpgym.

``export_policy`` writes the observation normalizer, the actor's mean and the env's action clip as
one graph: raw observations ``(B, obs_dim)`` float32, as the env returns them, in; the actions
``(B, act_dim)`` in ``[-1, 1]`` the env would apply, out (what ``warpgym play`` runs). The batch
size is free. Two formats, chosen by the file's suffix:

- ``.pt2``: a ``torch.export`` program. ``torch.export.load(path).module()(obs)``.
- ``.onnx``: ONNX (opset 18), through torch's dynamo exporter (torch >= 2.5, and the ``onnx`` and
  ``onnxscript`` packages: ``pip install -e ".[export]"``), for ONNX Runtime, TensorRT and the like.

Both carry the task, the dimensions and the checkpoint's iteration as metadata (``warpgym.json``
in the ``.pt2`` archive's extra files, ``metadata_props`` in the ONNX model).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import warnings
from pathlib import Path

import torch
from torch import nn

from .checkpoint import load_checkpoint, load_policy
from .models import Tanh
from .normalizer import ObsNormalizer

__all__ = ["DeployedPolicy", "export_policy", "onnx_unavailable", "FORMATS"]

FORMATS = (".pt2", ".onnx")
ONNX_OPSET = 18


def onnx_unavailable() -> str | None:
    """Why this environment cannot write ONNX (a missing package, an old torch), or None."""
    missing = [m for m in ("onnx", "onnxscript") if importlib.util.find_spec(m) is None]
    if missing:
        return f"ONNX export needs the packages onnx and onnxscript ({', '.join(missing)} missing): " + (
            'pip install -e ".[export]"'
        )
    if torch.__version__ < "2.5":  # the dynamo exporter came with torch 2.5
        return f"ONNX export needs torch >= 2.5, this is {torch.__version__}"
    return None


class DeployedPolicy(nn.Module):
    """``forward(obs (B, obs_dim)) -> actions (B, act_dim)``: normalize (as ``ObsNormalizer``, its
    statistics frozen), the actor's mean, clip to the action space ``[-1, 1]``. Plain torch ops
    only (the trainer's CPU fast paths for tanh become ``nn.Tanh``), so any exporter reads it."""

    def __init__(self, actor: nn.Sequential, normalizer: ObsNormalizer):
        super().__init__()
        self.actor = nn.Sequential(*(nn.Tanh() if isinstance(m, Tanh) else m for m in actor))
        self.normalize, self.clip = normalizer.enabled, normalizer.clip
        mean, scale = normalizer.affine()
        self.register_buffer("mean", mean)
        self.register_buffer("scale", scale)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = ((obs - self.mean) * self.scale).clamp(-self.clip, self.clip) if self.normalize else obs
        return self.actor(x).clamp(-1.0, 1.0)


def _policy(ckpt: dict) -> tuple[DeployedPolicy, dict]:
    """The checkpoint's policy on the CPU, in eval mode, and its metadata."""
    obs_dim = ckpt["normalizer"]["mean"].shape[0]
    act_dim = ckpt["model"]["log_std"].shape[0]
    model, normalizer = load_policy(ckpt, obs_dim, act_dim)
    meta = {
        "task": ckpt["spec"]["task"],
        "obs_dim": obs_dim,
        "act_dim": act_dim,
        "iteration": ckpt["iteration"],
        "env_steps": ckpt["env_steps"],
        "env_overrides": ckpt["spec"]["env_overrides"],
    }
    return DeployedPolicy(model.actor, normalizer).eval(), meta


def export_policy(checkpoint: str | os.PathLike, path: str | os.PathLike) -> dict:
    """Write ``checkpoint``'s deterministic policy to ``path`` (``.pt2`` or ``.onnx``, see the module
    docstring); returns its metadata with ``path`` and ``format``. Raises ``CheckpointError`` for a
    file that is not a checkpoint, ``ValueError`` for another suffix or an ONNX file this environment
    cannot write (``onnx_unavailable``)."""
    path = Path(path)
    if path.suffix not in FORMATS:
        raise ValueError(f"path: expected a file name ending in .pt2 or .onnx, got {str(path)!r}")
    if path.suffix == ".onnx" and (why := onnx_unavailable()):
        raise ValueError(f"path: {why}")
    policy, meta = _policy(load_checkpoint(checkpoint))
    example = (torch.zeros(2, meta["obs_dim"]),)
    batch = {0: torch.export.Dim("batch")}
    path.parent.mkdir(parents=True, exist_ok=True)
    # torch's ONNX exporter logs the optional ops it skips (torchvision's) and warns of its own
    # deprecations: none of it concerns an MLP
    onnx_log = logging.getLogger("torch.onnx")
    level = onnx_log.level
    onnx_log.setLevel(logging.ERROR)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            if path.suffix == ".pt2":
                program = torch.export.export(policy, example, dynamic_shapes=(batch,))
                torch.export.save(program, path, extra_files={"warpgym.json": json.dumps(meta)})
            else:
                onnx = torch.onnx.export(
                    policy,
                    example,
                    dynamo=True,
                    opset_version=ONNX_OPSET,
                    input_names=["obs"],
                    output_names=["actions"],
                    dynamic_shapes=(batch,),
                    verbose=False,
                )
                onnx.model.metadata_props.update({"warpgym": json.dumps(meta)})
                onnx.save(path)
    finally:
        onnx_log.setLevel(level)
    return {**meta, "path": str(path), "format": path.suffix[1:]}
