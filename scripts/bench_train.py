#!/usr/bin/env python
"""Train a task from scratch with our PPO and print deterministic success against wall-clock time.

Training runs in this process with the task's default config (``configs/<task>.toml``, overridable
with ``key=value``). Every ``--eval-every`` seconds of training, the deterministic policy (the
Gaussian's mean) runs ``--episodes`` fresh episodes (one per env, autoreset disabled, seeds never
used in training); the evaluation's own time is not counted as training time. The run stops at
``--max-time`` minutes of training or ``--max-env-steps`` (then evaluated once more) or, with
``--stop-at-target`` (default), after two evaluations at or above ``--target``. It prints a table
(training seconds, env-steps, success, mean return), the time the target was first reached, the
env-steps/s of the training rollouts next to the same env stepped bare with random actions (one
vector env of ``train.num_envs`` envs on the scene's default host threads, a rollout's worth of
env-steps after each training iteration, warm and with its actions drawn before the clock starts, so
both sides are timed at the same moments of a machine whose speed drifts; and, on the CPU, the share
of the rollouts' time spent in the envs' ``step``), and saves the curve as a PNG if matplotlib is
installed.

``--matching`` switches to the set-up panda-gym's PandaReach-v3 uses (end-effector control, 5 cm
success threshold), for the comparison with Stable-Baselines3 PPO on it.

    python scripts/bench_train.py                        # FrankaReach, joint_delta, 2 cm
    python scripts/bench_train.py --matching --png reach_matching.png
    python scripts/bench_train.py --device cuda train.num_envs=4096
    python scripts/bench_train.py --task WarpGym/FrankaPush-v0 --max-time 30 --target 0.8 --eval-every 60
    python scripts/bench_train.py --task WarpGym/FrankaLift-v0 --max-time 30 --target 0.8 --eval-every 60
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from gymnasium.vector import AutoresetMode

from warpgym.training import distributed
from warpgym.training.config import load_run_spec, parse_overrides
from warpgym.training.cpu_threads import cpu_threads
from warpgym.training.evaluate import evaluate
from warpgym.training.runner import Runner, make_env

MATCHING = ["env.control_mode=ee_delta", "env.success_threshold=0.05"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="WarpGym/FrankaReach-v0")
    p.add_argument("--device", default=None)
    p.add_argument("--max-time", type=float, default=3.0, help="minutes of training")
    p.add_argument("--max-env-steps", type=float, default=None, help="stop after this many env-steps")
    p.add_argument("--eval-every", type=float, default=10.0, help="seconds of training between evaluations")
    p.add_argument("--episodes", type=int, default=1000)
    p.add_argument("--target", type=float, default=0.95)
    p.add_argument("--no-stop-at-target", dest="stop_at_target", action="store_false")
    p.add_argument("--matching", action="store_true", help="ee_delta control and a 5 cm threshold")
    p.add_argument("--png", default="bench_train.png", help="plot file ('' for none)")
    p.add_argument("--json", default=None)
    p.add_argument("overrides", nargs="*")
    args = p.parse_args(argv)
    overrides = parse_overrides((MATCHING if args.matching else []) + args.overrides)
    spec = load_run_spec(args.task, overrides=overrides)
    ctx = distributed.setup(args.device)
    logdir = Path(tempfile.mkdtemp(prefix="bench_train_"))
    runner = Runner(spec, ctx, logdir)
    env_seconds = _time_env_steps(runner) if ctx.device.type == "cpu" else None
    bare = _BareEnv(spec, ctx.device)
    eval_env = make_env(spec, args.episodes, ctx.device, seed=10_000, autoreset_mode=AutoresetMode.DISABLED)
    print(
        f"{spec.task} on {ctx.device}: {spec.train.num_envs} envs, {spec.env_overrides or 'default env config'}"
    )
    rows, reached, trained, hits = [], None, 0.0, 0
    next_eval = args.eval_every
    budget = args.max_env_steps or float("inf")

    def evaluate_now():
        with cpu_threads(spec.train.rollout_threads, ctx.device):
            result = evaluate(runner.policy, eval_env, args.episodes, seed=20_000 + len(rows) * 1000)
        rows.append({"seconds": trained, "env_steps": runner.env_steps, **result})
        print(
            f"\n  eval at {trained:6.1f} s, {runner.env_steps:10,d} env-steps: "
            f"success {result['success_rate']:.3f}, return {result['mean_return']:.2f}",
            flush=True,
        )
        return result["success_rate"]

    stopped = False
    while trained < args.max_time * 60 and runner.env_steps < budget:
        t0 = time.perf_counter()
        runner.iterate(trained, None, args.max_time * 60)
        trained += time.perf_counter() - t0
        bare.run(spec.train.ppo.num_steps)
        if trained < next_eval:
            continue
        next_eval += args.eval_every
        if evaluate_now() >= args.target:
            hits += 1
            reached = reached or rows[-1]
            if args.stop_at_target and hits >= 2:
                stopped = True
                break
    if not stopped and (not rows or rows[-1]["env_steps"] != runner.env_steps):
        evaluate_now()  # where the run ended
        if rows[-1]["success_rate"] >= args.target:
            reached = reached or rows[-1]
    runner.finish()
    rollout_rate = runner.env_steps / runner.rollout_seconds
    bare_rate = bare.env_steps / bare.seconds
    print(
        f"\nrollout env-steps/s during training {rollout_rate:,.0f}; the bare env with random actions "
        f"{bare_rate:,.0f} at {spec.train.num_envs} envs: {rollout_rate / bare_rate:.2f}x"
    )
    if env_seconds is not None:
        stepping = sum(env_seconds) / len(env_seconds)  # the groups step at once
        print(
            f"env.step took {stepping / runner.rollout_seconds:.0%} of the rollouts' time "
            f"(the policy's states, contacts included, at {runner.env_steps / stepping:,.0f} env-steps/s)"
        )
    print(f"\n{'train s':>8} {'env-steps':>12} {'success':>8} {'return':>8}")
    for r in rows:
        print(f"{r['seconds']:8.1f} {r['env_steps']:12,d} {r['success_rate']:8.3f} {r['mean_return']:8.2f}")
    if reached:
        print(
            f"{args.target:.0%} deterministic success over {args.episodes} fresh episodes after "
            f"{reached['seconds']:.1f} s of training ({reached['env_steps']:,} env-steps)"
        )
    else:
        print(f"{args.target:.0%} not reached in {args.max_time} min")
    _plot(rows, args, spec.task)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "reached": reached}, indent=2))


def _time_env_steps(runner) -> list[float]:
    """Wrap the training envs' ``step`` (one env per group, ``train.env_groups``) to add its
    wall-clock seconds to the group's cell of the returned list (on the CPU, where a step has
    finished when it returns, so no synchronization is added)."""
    seconds = [0.0] * len(runner.envs)

    def timed(k, step):
        def wrapped(actions):
            t0 = time.perf_counter()
            out = step(actions)
            seconds[k] += time.perf_counter() - t0
            return out

        return wrapped

    for k, env in enumerate(runner.envs):
        env.step = timed(k, env.step)
    return seconds


class _BareEnv:
    """The training env stepped with random actions and nothing else, in this process, in rounds
    between the training iterations (its own envs, seed and random generator: training is not
    touched). ``env_steps`` and ``seconds`` add up the rounds."""

    def __init__(self, spec, device):
        import torch

        self.env = make_env(spec, spec.train.num_envs, device, seed=5)
        self.env.reset(seed=5)
        self.shape = (self.env.num_envs, self.env.single_action_space.shape[0])
        generator = torch.Generator(device).manual_seed(5)
        self.draw = lambda steps: torch.rand((steps, *self.shape), generator=generator, device=device) * 2 - 1
        self.env_steps, self.seconds = 0, 0.0

    def run(self, steps: int) -> None:
        """``steps`` timed steps of every env with fresh uniform random actions in [-1, 1], drawn
        before the clock starts (the reference pays nothing for its actions), after one untimed
        step: the training iteration before has pushed the env's data out of the caches, and the
        reference is its speed once warm."""
        import sim_core as sc

        actions = self.draw(steps + 1)
        self.env.step(actions[0])
        sc.synchronize()
        t0 = time.perf_counter()
        for a in actions[1:]:
            self.env.step(a)
        sc.synchronize()
        self.seconds += time.perf_counter() - t0
        self.env_steps += steps * self.shape[0]


def _plot(rows, args, task) -> None:
    if not args.png:
        return
    from _plots import pyplot

    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["seconds"] for r in rows], [r["success_rate"] for r in rows], marker="o")
    ax.axhline(args.target, color="gray", linestyle="--", linewidth=1)
    ax.set_xlabel("training wall-clock (s)")
    ax.set_ylabel(f"deterministic success ({args.episodes} episodes)")
    ax.set_title(f"{task}{' (ee_delta, 5 cm)' if args.matching else ''}")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)
    print(f"curve saved to {args.png}")


if __name__ == "__main__":
    main()
