#!/usr/bin/env python
"""Seconds per PPO update of a task's default config, in float32 and in bfloat16, side by side.

Builds the trainer of the task (its config file plus ``key=value`` overrides), collects one real
rollout, then times ``PPO.update`` on it in rounds that alternate float32 and bfloat16 autocast
(``train.ppo.bf16``); prints each one's best and median and the ratio. bfloat16 is timed only on a
CPU with native bfloat16 matrix products (elsewhere it is emulated, many times slower) or with
``--bf16-anyway``. Each update trains the model further; its cost does not depend on the weights.

    python scripts/bench_update.py --task WarpGym/FrankaLift-v0
    python scripts/bench_update.py --task WarpGym/FrankaPush-v0 --rounds 7 train.ppo.num_epochs=4
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

import warpgym  # noqa: F401  (registers the tasks)
from warpgym.training import distributed
from warpgym.training.config import load_run_spec, parse_overrides
from warpgym.training.ppo import uses_bf16
from warpgym.training.runner import Runner


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="WarpGym/FrankaLift-v0")
    p.add_argument("--device", default="cpu")
    p.add_argument("--rounds", type=int, default=5, help="timed updates of each precision")
    p.add_argument("--bf16-anyway", action="store_true", help="time bfloat16 on a CPU that emulates it")
    p.add_argument("overrides", nargs="*", help="key=value config overrides")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    spec = load_run_spec(args.task, overrides=parse_overrides(args.overrides))
    ctx = distributed.setup(args.device)
    runner = Runner(spec, ctx, None)
    runner.collect()
    ppo = runner.ppo
    modes = {"float32": False}
    if ctx.device.type != "cpu" or uses_bf16("auto", ctx.device) or args.bf16_anyway:
        modes["bfloat16"] = True
    cfg = spec.train
    print(
        f"{spec.task} on {ctx.device}: {cfg.num_envs} envs x {cfg.ppo.num_steps} steps, "
        f"{cfg.ppo.num_epochs} epochs of {cfg.ppo.num_minibatches} minibatches, "
        f"actor {list(cfg.policy.actor_hidden)}, critic {list(cfg.policy.critic_hidden)}, "
        f"{torch.get_num_threads()} torch threads"
    )
    times: dict[str, list[float]] = {name: [] for name in modes}
    for r in range(args.rounds + 1):  # the first round warms up
        for name, bf16 in modes.items():
            ppo.bf16 = bf16
            if ctx.device.type == "cuda":
                torch.cuda.synchronize(ctx.device)
            t0 = time.perf_counter()
            losses = ppo.update(runner.storage)
            torch.stack(list(losses.values())).sum().item()  # waits for the device
            if r > 0:
                times[name].append(time.perf_counter() - t0)
    for name, ts in times.items():
        print(f"{name:>9}: best {min(ts):.3f} s, median {statistics.median(ts):.3f} s per update")
    if "bfloat16" in times:
        ratio = min(times["float32"]) / min(times["bfloat16"])
        print(f"bfloat16 runs the update {ratio:.2f}x as fast as float32 (best of {args.rounds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
