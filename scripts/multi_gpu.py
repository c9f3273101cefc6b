#!/usr/bin/env python
"""One training process per GPU, each pinned to its device before anything initializes CUDA.

Every worker is a fresh ``python -m warpgym.training train ...`` whose environment sets
``CUDA_VISIBLE_DEVICES`` (and ``EGL_DEVICE_ID``, for headless rendering) to its GPU, so the simulator,
Warp and torch in that process see exactly one device. Without GPUs the same workers run on the CPU
(``--workers N``), which is how this is tested on a CPU machine.

- default: independent runs (a seed sweep): worker ``i`` trains with ``seed + i`` into ``LOGDIR/worker_i``;
- ``--ddp``: the workers form one data-parallel job (torch.distributed env vars, rank ``i``, NCCL on
  GPUs, gloo on CPU); rank 0 logs and saves into ``LOGDIR``.

If a worker fails, the others are stopped and the launcher exits with that worker's status.

    python scripts/multi_gpu.py --logdir runs/sweep -- --max-iterations 200
    python scripts/multi_gpu.py --ddp --logdir runs/ddp -- --num-envs 4096 --max-time 10
    python scripts/multi_gpu.py --workers 2 --ddp --logdir /tmp/cpu_ddp -- --max-iterations 2   # no GPU
    python scripts/multi_gpu.py --cpu --workers 2 --ddp --logdir /tmp/cpu_ddp -- ...   # CPU beside GPUs
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def _gpus() -> list[int]:
    """GPU indices from ``nvidia-smi`` (not torch: the launcher must not initialize CUDA)."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [i for i, line in enumerate(out.stdout.splitlines()) if line.startswith("GPU ")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpus", default=None, help="comma-separated GPU indices (default: all)")
    p.add_argument("--workers", type=int, default=2, help="CPU workers when there is no GPU (or with --cpu)")
    p.add_argument("--cpu", action="store_true", help="CPU workers even where there are GPUs")
    p.add_argument("--ddp", action="store_true", help="one data-parallel job instead of independent runs")
    p.add_argument("--logdir", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("train_args", nargs=argparse.REMAINDER, help="-- then arguments for `warpgym train`")
    args = p.parse_args(argv)
    rest = args.train_args[1:] if args.train_args[:1] == ["--"] else args.train_args
    if args.cpu:
        gpus = []
    else:
        gpus = [int(g) for g in args.gpus.split(",")] if args.gpus else _gpus()
    slots = [str(g) for g in gpus] if gpus else [""] * args.workers
    device = "cuda" if gpus else "cpu"
    n, port = len(slots), _free_port()
    procs = []
    for i, visible in enumerate(slots):
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": visible}
        if visible:
            env["EGL_DEVICE_ID"] = visible
        cmd = [sys.executable, "-m", "warpgym.training", "train", "--device", device]
        if args.ddp:
            env.update(
                MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(n), RANK=str(i), LOCAL_RANK="0"
            )
            cmd += ["--seed", str(args.seed), "--logdir", args.logdir]
        else:
            cmd += ["--seed", str(args.seed + i), "--logdir", str(Path(args.logdir) / f"worker_{i}")]
        procs.append(subprocess.Popen([*cmd, *rest], env=env))
        print(f"worker {i}: {'GPU ' + visible if visible else 'CPU'} pid {procs[-1].pid}", flush=True)
    status = 0
    try:
        while True:
            codes = [proc.poll() for proc in procs]
            failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                i, status = failed[0]
                print(f"worker {i} exited with status {status}: stopping the others", file=sys.stderr)
                break
            if all(c is not None for c in codes):
                break
            time.sleep(0.5)
    except KeyboardInterrupt:
        status = 130
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT if status == 130 else signal.SIGTERM)
    for proc in procs:
        proc.wait()
    status = status or next((proc.returncode for proc in procs if proc.returncode), 0)
    print(f"all workers finished, status {status}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
