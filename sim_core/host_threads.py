"""CPU launches spread over host threads.

Warp runs a CPU launch's threads one after another on the calling thread. A kernel whose envs are
independent can instead be recorded as one launch per host thread, each over an interleaved share
of the launch's threads (launch thread ``tid0 + tid * stride`` for its ``tid``), and the shares run
at once: Warp releases the GIL while a CPU kernel runs. Each env is still computed by the same
instructions in the same order, so results do not depend on the number of host threads. On a GPU
there is one share, the whole launch.

A kernel written for this takes a ``Share`` and runs its envs from ``first_env(share, wp.tid())``
(``share.per_thread`` of them in turn, fewer at the end); ``record`` records its shares.

The shares other than the caller's run on worker threads kept for the process, each handed its job
through a pair of locks (``_Worker``). A hand-over costs a few tens of microseconds, less than a
``concurrent.futures`` submit and result, whose Python work under the GIL both threads wait on.
``run_jobs`` hands any independent jobs to the same threads (the trainer steps groups of envs,
each with its share of the policy, that way).

Every recorded CPU launch goes through ``PackedLaunch``: Warp's ``wp.Launch.launch()`` packs all
of a kernel's arguments into a new ctypes struct at each call on the CPU, which for the step's
twenty-odd arguments is tens of microseconds of Python under the GIL; a packed launch keeps one.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable, Sequence

import torch
import warp as wp

__all__ = [
    "PackedLaunch",
    "pack",
    "recorded",
    "ENVS_PER_THREAD",
    "LIGHT_ENVS_PER_SHARE",
    "Share",
    "first_env",
    "default_threads",
    "shares",
    "SharedLaunch",
    "run_jobs",
    "record",
    "record_envs",
]

ENVS_PER_THREAD = 64  # envs a launch thread of the step and the task kernels runs in turn on the CPU
# A kernel that spends tens of nanoseconds per env (an arm's action, the detection pass that skips
# all but the reset envs) shares its envs only from this many per host thread on: below, handing a
# share to another thread costs more than the share (docs/performance.md, "Where a step's time goes").
LIGHT_ENVS_PER_SHARE = 2048


@wp.struct
class Share:
    """Which envs the threads of one host thread's launch run."""

    per_thread: int  # envs each launch thread runs in turn
    tid0: int  # the launch thread this share's thread 0 stands for
    stride: int  # launch threads from one of this share's threads to its next


@wp.func
def first_env(s: Share, tid: int) -> int:
    """The first env of launch thread ``tid`` of share ``s``."""
    return (s.tid0 + tid * s.stride) * s.per_thread


def default_threads() -> int:
    """Host threads a CPU scene steps on by default: torch's intra-op thread count (which follows
    ``OMP_NUM_THREADS``; ``torchrun`` sets it to 1 per process), at most the cores this process
    may run on."""
    return max(1, min(torch.get_num_threads(), len(os.sched_getaffinity(0))))


def shares(n_threads: int, threads: int) -> list[tuple[int, int, int]]:
    """``(tid0, stride, dim)`` of each host thread's share of a launch of ``n_threads`` threads over
    ``threads`` host threads (fewer when the launch has fewer threads): share ``k`` runs launch
    threads ``k, k + stride, k + 2 stride, ...``."""
    stride = max(1, min(threads, n_threads))
    return [(k, stride, -(-(n_threads - k) // stride)) for k in range(stride)]


class PackedLaunch:
    """A recorded CPU launch (``wp.Launch``) whose ctypes struct of kernel arguments is packed once
    and then handed to the kernel's entry point at every ``launch()``, as Warp's own CPU launch
    does after packing a new struct each time. ``set_param_at_index`` sets the recorded launch's
    argument and the struct's field. Use ``pack``, which keeps the ``wp.Launch`` where this does
    not apply."""

    def __init__(self, cmd: wp.Launch):
        self.cmd = cmd
        names = [a.label for a in cmd.kernel.adj.args]
        fields = [(name, type(cmd.params[1 + i])) for i, name in enumerate(names)]  # params[0]: the bounds
        self._args = type("PackedArgs", (ctypes.Structure,), {"_fields_": fields})()
        for i, name in enumerate(names):
            setattr(self._args, name, cmd.params[1 + i])
        self._names = names
        self._layouts: dict[int, tuple] = {}  # set_array_data: the tensor layouts already checked
        self._call = (cmd.hooks.forward, ctypes.byref(cmd.params[0]), ctypes.byref(self._args))

    def launch(self) -> None:
        forward, bounds, args = self._call
        forward(bounds, args)

    def set_param_at_index(self, index: int, value) -> None:
        self.cmd.set_param_at_index(index, value)
        setattr(self._args, self._names[index], self.cmd.params[1 + index])

    def set_array_data(self, index: int, tensor: torch.Tensor) -> None:
        """Point array argument ``index`` at ``tensor``'s memory, in the packed struct and the
        recorded launch alike: ``tensor`` must have the recorded array's shape and strides (in
        bytes, so an element of another size is refused too), else ``ValueError``; checked in full
        once per shape, strides and dtype. The packed array keeps no dtype: one of the same size
        (int32 for float32) is the caller's to avoid."""
        arg = getattr(self._args, self._names[index])
        layout = (tensor.shape, tensor.stride(), tensor.dtype)
        if self._layouts.get(index) != layout:
            n, strides = tensor.dim(), tuple(s * tensor.element_size() for s in tensor.stride())
            same = arg.ndim == n and tuple(tensor.shape) == tuple(arg.shape[:n])
            if not same or strides != tuple(arg.strides[:n]):
                raise ValueError(
                    f"{self._names[index]}: expected a tensor of shape {tuple(arg.shape[: arg.ndim])} and "
                    f"byte strides {tuple(arg.strides[: arg.ndim])}, got {tuple(tensor.shape)} and {strides}"
                )
            self._layouts[index] = layout
        arg.data = tensor.data_ptr()
        self.cmd.params[1 + index].data = arg.data


def pack(cmd: wp.Launch) -> wp.Launch | PackedLaunch:
    """``cmd`` as a ``PackedLaunch`` where Warp's CPU launch would just pack and call (a forward
    launch of one thread per block on the CPU); ``cmd`` itself elsewhere (CUDA packs once already)."""
    if isinstance(cmd, wp.Launch) and cmd.device.is_cpu and cmd.block_dim == 1 and not cmd.adjoint:
        return PackedLaunch(cmd)
    return cmd


def recorded(kernel: wp.Kernel, **launch_args) -> wp.Launch | PackedLaunch:
    """``wp.launch(kernel, record_cmd=True, **launch_args)``, packed (``pack``)."""
    return pack(wp.launch(kernel, record_cmd=True, **launch_args))


class SharedLaunch:
    """Recorded launches (``wp.Launch``, packed: ``pack``) that run together: the first on the
    calling thread, the others on worker threads; ``launch()`` returns once all have finished and
    re-raises the first error."""

    def __init__(self, launches: Sequence[wp.Launch]):
        self.launches = [pack(cmd) for cmd in launches]

    def set_param_at_index(self, index: int, value) -> None:
        """Set argument ``index`` of every share's launch (``wp.Launch.set_param_at_index``)."""
        for cmd in self.launches:
            cmd.set_param_at_index(index, value)

    def set_tensor(self, index: int, tensor: torch.Tensor) -> None:
        """Set array argument ``index`` of every share's launch to ``tensor``, which has the recorded
        array's shape, strides and dtype (a fresh tensor like it, every step; ``set_array_data``
        checks the shape and strides): on the CPU only the data pointer changes, where
        ``wp.from_torch`` and ``set_param_at_index`` would build a ``wp.array`` and pack it anew
        for every share (tens of microseconds a call)."""
        if all(isinstance(cmd, PackedLaunch) for cmd in self.launches):
            for cmd in self.launches:
                cmd.set_array_data(index, tensor)
        else:
            self.set_param_at_index(index, wp.from_torch(tensor))

    def launch(self) -> None:
        if len(self.launches) == 1:
            self.launches[0].launch()
        else:
            run_jobs([cmd.launch for cmd in self.launches])


def run_jobs(jobs: Sequence[Callable[[], None]]) -> None:
    """Run ``jobs`` at once, the first on the calling thread and the others on the process's worker
    threads; return once all have finished, re-raising the first error. Jobs that run jobs (a shared
    launch inside one) run theirs one after another on their own thread: the workers are taken.

    Under Warp's debug build (``wp.config.mode == "debug"``) the jobs run one after another on the
    calling thread: there a CPU kernel's exit checks its tile storage through a pointer that Warp
    keeps in one static variable per module (on x86-64), which a kernel launched at the same time
    on another thread overwrites. The release build only writes that pointer."""
    if len(jobs) == 1 or getattr(_state, "in_job", False) or wp.config.mode == "debug":
        errors = []
        for job in jobs:
            try:
                job()
            except BaseException as e:  # the others still run, as they would on the workers
                errors.append(e)
    else:
        with _launching:  # the workers run one set of jobs at a time, whichever thread calls
            while len(_workers) < len(jobs) - 1:
                _workers.append(_Worker(f"sim_core_cpu_{len(_workers)}"))
            workers = _workers[: len(jobs) - 1]
            for worker, job in zip(workers, jobs[1:], strict=True):
                worker.start(job)
            errors = []
            _state.in_job = True
            try:
                jobs[0]()
            except BaseException as e:  # wait for the workers before raising
                errors.append(e)
            finally:
                _state.in_job = False
            errors += [e for e in (w.wait() for w in workers) if e is not None]
    if errors:
        raise errors[0]


def record(
    make: Callable[[int, int, int], wp.Launch],
    n_threads: int,
    threads: int,
    device: str | None = None,
    min_per_share: int = 1,
) -> SharedLaunch:
    """The shares (``shares``) of a launch of ``n_threads`` threads over ``threads`` host threads,
    each recorded by ``make(tid0, stride, dim)``, each share at least ``min_per_share`` launch
    threads (fewer host threads otherwise); on a GPU ``device`` one share, the whole launch."""
    if device is not None and not wp.get_device(device).is_cpu:
        threads = 1
    threads = max(1, min(threads, n_threads // min_per_share))
    return SharedLaunch([make(*s) for s in shares(n_threads, threads)])


def record_envs(
    kernel: wp.Kernel,
    n_envs: int,
    inputs: Callable[[Share], list],
    device: str,
    threads: int,
    min_envs_per_share: int = ENVS_PER_THREAD,
) -> SharedLaunch:
    """The shares of a launch of ``kernel`` over ``n_envs`` envs that takes a ``Share`` (``inputs``
    returns a share's inputs): on the CPU ``ENVS_PER_THREAD`` envs per launch thread, over
    ``threads`` host threads, each share at least ``min_envs_per_share`` envs
    (``LIGHT_ENVS_PER_SHARE`` for a light kernel); on a GPU one env per thread, one launch."""
    per_thread = ENVS_PER_THREAD if wp.get_device(device).is_cpu else 1

    def make(tid0: int, stride: int, dim: int) -> wp.Launch:
        s = Share()
        s.per_thread, s.tid0, s.stride = per_thread, tid0, stride
        # SharedLaunch packs the recorded launch's arguments
        return wp.launch(kernel, dim=dim, inputs=inputs(s), device=device, record_cmd=True)

    return record(make, -(-n_envs // per_thread), threads, device, max(1, min_envs_per_share // per_thread))


class _Worker:
    """A daemon thread that runs one job at a time: ``start(job)`` hands it over, ``wait()`` returns
    once it has run, with the exception it raised or None. Each hand-over is one release and one
    acquire of a lock in each direction."""

    def __init__(self, name: str):
        self._go, self._done = threading.Lock(), threading.Lock()
        self._go.acquire()
        self._done.acquire()
        self._job: Callable[[], None] | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def _run(self) -> None:
        _state.in_job = True
        while True:
            self._go.acquire()
            try:
                self._job()
            except BaseException as e:  # handed to the caller by wait()
                self._error = e
            self._done.release()

    def start(self, job: Callable[[], None]) -> None:
        self._job = job
        self._go.release()

    def wait(self) -> BaseException | None:
        self._done.acquire()
        error, self._error, self._job = self._error, None, None
        return error


_workers: list[_Worker] = []  # shared by every run_jobs, started on first use
_launching = threading.Lock()
_state = threading.local()  # in_job: this thread runs a job of run_jobs


def _forget_workers() -> None:
    """In a forked child: the parent's threads did not come along; new ones start on first use."""
    global _launching
    _workers.clear()
    _launching = threading.Lock()


os.register_at_fork(after_in_child=_forget_workers)
