"""The generated kernels, loaded and launched: ``load_kernels`` writes the source ``step.py``
generates to ``$WARPGYM_CACHE`` (default ``~/.cache/warpgym``) under a name made from its hash and
imports it (Warp then caches the compiled binary by that hash too); the ``record_*`` functions
record each launch once with its arguments packed, so ``.launch()`` costs no per-step argument
handling."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from types import ModuleType

import warp as wp

from . import adaptive_split, host_threads, prefetch
from .adaptive_split import INLINE_REDO
from .contact import buffers
from .engine import actuation
from .engine.tree import Tree
from .step import generate_source
from .types import Data

__all__ = [
    "ContactArgs",
    "SplitArgs",
    "Kernels",
    "load_kernels",
    "record_step",
    "record_detect",
    "record_fk",
    "launch_forward",
]


@dataclass(frozen=True)
class ContactArgs:
    """The contact arguments of a step generated with contacts (after the poses)."""

    geoms: object  # contact.pairs.Geoms
    model: object  # contact.buffers.ContactModel
    data: object  # contact.buffers.ContactData
    margin: float  # RigidOptions.contact_margin, m
    iterations: int  # RigidOptions.iterations
    tolerance: float  # RigidOptions.tolerance, m/s
    max_penetration: float  # RigidOptions.max_penetration, m

    def inputs(self) -> list:
        return [getattr(self, f.name) for f in fields(self)]  # in the kernel's order


@dataclass(frozen=True)
class SplitArgs:
    """The adaptive split's state (``adaptive_split.py``): each env's start state and substep count."""

    qpos0: wp.array  # (nworld, nq) the step's start state, for a redo (``buffers.scratch``)
    qvel0: wp.array  # (nworld, nv)
    split: wp.array  # (nworld,) int32 substeps each env's last step was split into
    redo_envs: wp.array  # (nworld,) int32 the envs of the redo launch, one per thread
    depth: float  # RigidOptions.split_depth, m; 0: never split

    def inputs(self, split_pass: int, detect: int) -> list:
        return [self.qpos0, self.qvel0, self.split, self.redo_envs, split_pass, self.depth, detect]

    def with_own_scratch(self) -> SplitArgs:
        """The same, with a start state of its own (``contact.buffers.scratch``: on the CPU one env's
        worth), for another host thread."""
        own = lambda a: buffers.scratch(a.shape, a.dtype, str(a.device))  # noqa: E731
        return dataclasses.replace(self, qpos0=own(self.qpos0), qvel0=own(self.qvel0))


def _cache_dir() -> Path:
    return Path(os.environ.get("WARPGYM_CACHE", Path.home() / ".cache" / "warpgym")) / "kernels"


class Kernels:
    """The kernels of one model (attributes ``fk``, ``forward``, ``step``) and their module."""

    def __init__(self, module: ModuleType):
        self.module = module
        self.fk = module.fk
        self.forward = module.forward
        self.step = module.step


def load_kernels(t: Tree, substeps: int = 1, contacts: bool = False) -> Kernels:
    """Generate (or reuse) the model's kernel module and import it. A source not in the cache yet is
    generated again with the stages' handoff check (``handoff.py``) before it is written."""
    source = generate_source(t, substeps, contacts, check=False)
    name = "sim_core_gen_" + hashlib.sha256(source.encode()).hexdigest()[:16]
    if name in sys.modules:
        return Kernels(sys.modules[name])
    path = _cache_dir() / f"{name}.py"
    if not path.is_file() or path.read_text() != source:
        generate_source(t, substeps, contacts, check=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        os.replace(tmp, path)  # atomic: concurrent builds never import a half-written file
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return Kernels(module)


def _control_inputs(d: Data) -> list:
    return [getattr(d, name) for name in actuation.CONTROL_ARRAYS] + [d.body_inertial]


def _record(
    k: Kernels,
    d: Data,
    gravity: wp.vec3,
    dt: float,
    nsub: int,
    contact_args: ContactArgs | None,
    split_args: SplitArgs | None,
    threads: int,
    *,
    split_pass=-1,
    detect=-1,
) -> host_threads.SharedLaunch:
    """One recorded launch of the step kernel: the step's first pass (``split_pass`` -1, or
    ``INLINE_REDO`` with its redo; ``detect`` -1), the redo (``split_pass == REDO``) or a detection
    pass. The first pass and detection pass 0 step ``host_threads.ENVS_PER_THREAD`` envs per thread on the CPU,
    whose threads are shared among ``threads`` host threads (``host_threads.py``)."""
    split = split_args.inputs(split_pass, detect) if contact_args else []
    n = d.qpos.shape[0]
    per_thread = host_threads.ENVS_PER_THREAD if d.qpos.device.is_cpu and split_pass in (-1, INLINE_REDO) else 1

    state = [d.qpos, d.qvel, *_control_inputs(d)]
    contact_rows = [d.xpos, d.xquat, *contact_args.inputs()] if contact_args else []
    rows = [*state, d.qfrc_actuator, *contact_rows, *split]
    pf = int(detect < 0 and prefetch.wanted(rows, n, d.qpos.device))  # the step's pass, on the CPU

    def share(tid0: int, stride: int, dim: int) -> wp.Launch:
        ca, sa = contact_args, split_args
        if ca and tid0 > 0:  # another host thread: solver scratch and a start state of its own
            ca = dataclasses.replace(ca, data=buffers.with_own_scratch(ca.data))
            sa = sa.with_own_scratch()
        extra = [d.xpos, d.xquat, *ca.inputs(), *sa.inputs(split_pass, detect)] if ca else []
        return wp.launch(
            k.step,
            dim=dim,
            inputs=[*state, gravity, dt, nsub, per_thread, tid0, stride, pf],
            outputs=[d.qfrc_actuator, *extra],
            device=d.qpos.device,
            record_cmd=True,
        )

    # the detection pass skips all but the envs whose state was set: a light kernel
    min_per_share = host_threads.LIGHT_ENVS_PER_SHARE // per_thread if detect >= 0 else 1
    return host_threads.record(share, -(-n // per_thread), threads, str(d.qpos.device), min_per_share)


def record_step(
    k: Kernels,
    d: Data,
    gravity: wp.vec3,
    dt: float,
    nsub: int,
    contact_args: ContactArgs | None = None,
    split_args: SplitArgs | None = None,
    threads: int = 1,
) -> list[host_threads.SharedLaunch]:
    """The launches advancing every env by ``nsub`` substeps of ``dt`` seconds (in place), recorded
    once with their arguments packed, so ``.launch()`` costs no per-step argument handling. A step
    generated with contacts takes ``contact_args`` and ``split_args``; with a split depth > 0 the
    first pass redoes the envs it flags: on the CPU in the same launch (``INLINE_REDO``), on CUDA in
    a redo launch that follows it (over all envs: those with nothing to do return at once, and no
    host read). On the CPU each launch's threads are shared among ``threads`` host threads."""
    passes = [-1]
    if contact_args and split_args.depth > 0:
        passes = [INLINE_REDO] if d.qpos.device.is_cpu else [-1, adaptive_split.REDO]
    return [_record(k, d, gravity, dt, nsub, contact_args, split_args, threads, split_pass=p) for p in passes]


def record_detect(
    k: Kernels, d: Data, gravity: wp.vec3, contact_args: ContactArgs, split_args: SplitArgs, threads: int = 1
) -> host_threads.SharedLaunch:
    """The step kernel's detection pass 0 (the envs whose state was set; ``_emit_detect_start``)
    with the step's ``contact_args``, ``split_args`` and ``threads`` (``record_step``), recorded once."""
    return _record(k, d, gravity, 0.0, 1, contact_args, split_args, threads, detect=0)


def record_fk(k: Kernels, d: Data, stale: wp.array) -> wp.Launch | host_threads.PackedLaunch:
    """The launch recomputing ``xpos``/``xquat`` from ``qpos`` in the envs where ``stale`` (nworld,)
    bool is set, recorded once (``.launch()`` per use)."""
    n, inputs, outputs = d.qpos.shape[0], [d.qpos, stale], [d.xpos, d.xquat]
    return host_threads.recorded(k.fk, dim=n, inputs=inputs, outputs=outputs, device=d.qpos.device)


def launch_forward(k: Kernels, d: Data, gravity: wp.vec3) -> dict[str, wp.array]:
    """Evaluate every stage at the current state; returns ``qM``, ``qfrc_bias``,
    ``qfrc_actuator``, ``qacc`` (explicit, no implicit term) and updates the poses."""
    n, nv, dev = d.qpos.shape[0], d.qvel.shape[1], d.qpos.device
    out = {
        "qM": wp.zeros((n, nv, nv), dtype=wp.float32, device=dev),
        "qfrc_bias": wp.zeros((n, nv), dtype=wp.float32, device=dev),
        "qfrc_actuator": wp.zeros((n, nv), dtype=wp.float32, device=dev),
        "qacc": wp.zeros((n, nv), dtype=wp.float32, device=dev),
    }
    wp.launch(
        k.forward,
        dim=n,
        inputs=[d.qpos, d.qvel, *_control_inputs(d), gravity],
        outputs=[d.xpos, d.xquat, *out.values()],
        device=dev,
    )
    return out
