"""Checkpoints: writing them atomically, loading them safely, restoring the policy they hold and
their random generators.

A checkpoint holds only tensors and plain data (dicts, lists, tuples, str, int, float, bool, None),
so it loads with ``torch.load(weights_only=True)``: its unpickling cannot run code, and a file that
would need more is refused.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import zipfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from warpgym.config import from_dict

from .config import TrainConfig
from .models import ActorCritic
from .normalizer import ObsNormalizer

__all__ = [
    "CheckpointError",
    "load_checkpoint",
    "save_atomic",
    "link_atomic",
    "check_shapes",
    "load_policy",
    "generator_state",
    "restore_generator",
]

_KEYS = ("iteration", "env_steps", "model", "normalizer", "optimizer", "lr", "sampler", "minibatch_rng", "spec")
_SPEC_KEYS = ("task", "config_file", "env_overrides", "train")


class CheckpointError(ValueError):
    """A file that is not a checkpoint this run can use: missing, unreadable, not a checkpoint,
    refused as unsafe, or made for other model shapes. The message is one line."""


def save_atomic(obj: Any, path: Path) -> None:
    """``torch.save`` to a temporary file in the same directory, then rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def link_atomic(src: Path, dst: Path) -> None:
    """Make ``dst`` name the same file as ``src`` (a hard link; a copy where links are not
    supported), replacing it atomically: the checkpoint is serialized and written once."""
    tmp = dst.with_name(f".{dst.name}.tmp{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """The checkpoint at ``path``, its tensors on the CPU; ``CheckpointError`` for a file that is
    missing or unreadable, is not a ``torch.save`` archive, holds anything but tensors and plain
    data (refused before any of it runs), or lacks a checkpoint's keys."""
    try:
        with open(path, "rb") as f:
            if not zipfile.is_zipfile(f):  # torch.save writes a zip archive; bare pickles are not read
                raise CheckpointError("not a checkpoint (not an archive written by torch.save)")
            f.seek(0)
            ckpt = torch.load(f, map_location="cpu", weights_only=True)
    except FileNotFoundError as e:
        raise CheckpointError("no such file") from e
    except OSError as e:
        raise CheckpointError(f"cannot read it: {e.strerror or e}") from e
    except pickle.UnpicklingError as e:
        raise CheckpointError(
            "refused: it holds objects other than tensors and plain data, and loading those could run code"
        ) from e
    except RuntimeError as e:  # torch's reader on an archive it cannot read
        raise CheckpointError(f"not a checkpoint ({str(e).splitlines()[0]})") from e
    if not isinstance(ckpt, dict) or any(k not in ckpt for k in _KEYS):
        raise CheckpointError(f"not a warpgym checkpoint (expected a dict with keys {list(_KEYS)})")
    if not isinstance(ckpt["spec"], dict) or any(k not in ckpt["spec"] for k in _SPEC_KEYS):
        raise CheckpointError(f"not a warpgym checkpoint (its 'spec' lacks one of {list(_SPEC_KEYS)})")
    return ckpt


def check_shapes(module: nn.Module, state: dict[str, torch.Tensor], what: str) -> None:
    """``CheckpointError`` naming the first entry of ``state`` that ``module`` lacks, or whose shape
    differs from the module's (a model made for other observation or action sizes)."""
    own = module.state_dict()
    if set(own) != set(state):
        diff = sorted(set(own) ^ set(state))
        raise CheckpointError(f"its {what} does not fit this run: entries differ ({diff[:4]})")
    for key, value in own.items():
        if tuple(state[key].shape) != tuple(value.shape):
            raise CheckpointError(
                f"its {what} does not fit this run: {key} has shape {tuple(state[key].shape)} in the "
                f"checkpoint and {tuple(value.shape)} here (made with other config overrides?)"
            )


def load_policy(
    ckpt: dict[str, Any], obs_dim: int, act_dim: int, device: torch.device | str = "cpu"
) -> tuple[ActorCritic, ObsNormalizer]:
    """The checkpoint's ``(ActorCritic, ObsNormalizer)`` on ``device``, built from its train config
    for ``obs_dim`` observations and ``act_dim`` actions. Raises ``CheckpointError`` where its model
    or normalizer has other shapes."""
    train = from_dict(TrainConfig, ckpt["spec"]["train"], "train")
    model = ActorCritic(obs_dim, act_dim, train.policy).to(device)
    normalizer = ObsNormalizer(obs_dim, enabled=train.ppo.normalize_obs).to(device)
    check_shapes(model, ckpt["model"], "model")
    check_shapes(normalizer, ckpt["normalizer"], "observation normalizer")
    model.load_state_dict(ckpt["model"])
    normalizer.load_state_dict(ckpt["normalizer"])
    return model, normalizer


def generator_state(generator: torch.Generator) -> dict[str, Any]:
    """A generator's state and the type of its device (the state's format depends on it: 5056
    bytes of Mersenne Twister on the CPU, a 16-byte seed and offset on CUDA)."""
    return {"device": generator.device.type, "state": generator.get_state()}


def restore_generator(
    generator: torch.Generator, saved: dict[str, Any] | torch.Tensor, salt: str, *, exact: bool = True
) -> bool:
    """Set ``generator`` to the state ``saved`` by ``generator_state`` and return True, when
    ``exact`` and the state was saved on the same type of device. Otherwise reseed ``generator``
    from a hash of the saved state and ``salt`` (deterministic: the same checkpoint and salt give
    the same stream) and return False: a state saved on another type of device cannot be set, and
    ``exact=False`` asks for a stream of its own (a DDP rank other than 0, whose state was not
    saved). A bare state tensor (checkpoints that stored no device) counts as saved on this
    generator's type of device when its size matches."""
    if isinstance(saved, torch.Tensor):
        saved = {"device": None, "state": saved}
    state = saved["state"]
    same = saved["device"] in (None, generator.device.type) and state.numel() == generator.get_state().numel()
    if exact and same:
        generator.set_state(state)
        return True
    digest = hashlib.sha256(state.numpy().tobytes() + salt.encode()).digest()
    generator.manual_seed(int.from_bytes(digest[:8], "little"))
    return False
