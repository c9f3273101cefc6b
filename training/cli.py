"""``warpgym`` (or ``python -m warpgym.training``): ``train`` a policy with PPO, ``play`` a checkpoint.

    warpgym train [--task ID] [--num-envs N] [--device cpu|cuda] [--seed S] [--config FILE]
                  [--max-iterations K | --max-time MIN] [--logdir DIR] [--resume CKPT] [key=value ...]
    warpgym play --checkpoint CKPT [--num-envs N] [--episodes E] [--device D] [--seed S]

Overrides are dotted keys of the task's config file: ``train.ppo.learning_rate=3e-4``,
``env.success_threshold=0.05``. Under ``torchrun`` every rank runs ``train``; rank 0 logs and saves.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from gymnasium.vector import AutoresetMode

from warpgym.config import ConfigError, from_dict, merge

from . import distributed
from .config import RunSpec, TrainConfig, load_run_spec, parse_overrides
from .evaluate import evaluate
from .models import ActorCritic
from .normalizer import ObsNormalizer
from .runner import Runner, make_env, make_video_env
from .video import rollout_frames, write_video

__all__ = ["main", "play"]

DEFAULT_TASK = "WarpGym/FrankaReach-v0"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="warpgym", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=False)
    t = sub.add_parser("train", help="train a policy with PPO (the default command)")
    t.add_argument("--task", default=None, help=f"task id (default: {DEFAULT_TASK})")
    t.add_argument("--num-envs", type=int, default=None, help="envs per process (default: from the config)")
    t.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: best available)")
    t.add_argument("--seed", type=int, default=None)
    t.add_argument("--config", default=None, help="TOML config (default: the task's file in configs/)")
    stop = t.add_mutually_exclusive_group()
    stop.add_argument("--max-iterations", type=int, default=None)
    stop.add_argument("--max-time", type=float, default=None, help="minutes of wall-clock")
    t.add_argument("--logdir", default=None, help="run directory (default: runs/<task>_<time>)")
    t.add_argument("--resume", default=None, help="checkpoint to continue from")
    t.add_argument("--video-every", type=int, default=None, help="iterations between TensorBoard videos")
    t.add_argument("overrides", nargs="*", help="key=value config overrides")
    q = sub.add_parser("play", help="run a checkpoint's deterministic policy on fresh episodes")
    q.add_argument("--checkpoint", required=True)
    q.add_argument("--num-envs", type=int, default=None, help="envs per round (default: --episodes)")
    q.add_argument("--episodes", type=int, default=100)
    q.add_argument("--device", default=None)
    q.add_argument("--seed", type=int, default=12345, help="seed of the evaluation episodes")
    q.add_argument("--video", default=None, help="also write a video of the policy here (e.g. out.mp4)")
    q.add_argument("--video-envs", type=int, default=4, help="envs shown side by side in the video")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("train", "play", "-h", "--help"):
        argv.insert(0, "train")
    args = _parser().parse_args(argv)
    try:
        if args.command == "play":
            result = play(
                args.checkpoint,
                num_envs=args.num_envs,
                episodes=args.episodes,
                device=args.device,
                seed=args.seed,
                video=args.video,
                video_envs=args.video_envs,
            )
            print(json.dumps(result))
            return 0
        return train(args)
    except ConfigError as e:
        print(f"warpgym: config error: {e}", file=sys.stderr)
        return 2


def _spec_for(args) -> tuple[RunSpec, dict | None]:
    overrides = parse_overrides(args.overrides)
    top = {k: v for k, v in (("num_envs", args.num_envs), ("seed", args.seed)) if v is not None}
    overrides = merge(overrides, {"train": top}) if top else overrides
    if args.resume is None:
        return load_run_spec(args.task or DEFAULT_TASK, args.config, overrides), None
    ckpt = torch.load(args.resume, map_location="cpu", weights_only=False)
    saved = ckpt["spec"]
    if args.task not in (None, saved["task"]):
        raise ConfigError(f"--task {args.task!r} differs from the checkpoint's {saved['task']!r}")
    train = from_dict(TrainConfig, merge(saved["train"], overrides.get("train")), "train")
    env = merge(saved["env_overrides"], overrides.get("env"))
    return RunSpec(saved["task"], args.config or saved["config_file"], env, train), ckpt


def train(args) -> int:
    spec, ckpt = _spec_for(args)
    ctx = distributed.setup(args.device)
    try:
        logdir = (
            Path(args.logdir)
            if args.logdir
            else Path("runs") / f"{spec.task.split('/')[-1]}_{time.strftime('%Y%m%d-%H%M%S')}"
        )
        runner = Runner(spec, ctx, logdir if ctx.is_main else None, video_every=args.video_every)
        if ckpt is not None:
            runner.load_state_dict(ckpt)
        if ctx.is_main:
            print(
                f"training {spec.task} on {ctx.device} x {ctx.world_size} process(es), "
                f"{spec.train.num_envs} envs each; logs in {logdir}",
                flush=True,
            )
        max_time = None if args.max_time is None else args.max_time * 60.0
        runner.train(args.max_iterations, max_time)
        if ctx.is_main:
            print(
                f"done: {runner.iteration} iterations, {runner.env_steps:,} env-steps; "
                f"checkpoint {logdir}/checkpoints/last.pt"
            )
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        distributed.teardown()


def play(
    checkpoint: str,
    *,
    num_envs: int | None = None,
    episodes: int = 100,
    device: str | None = None,
    seed: int = 12345,
    video: str | None = None,
    video_envs: int = 4,
) -> dict:
    """Success rate and mean return of the checkpoint's deterministic policy (the Gaussian's mean) over
    ``episodes`` fresh episodes (see ``evaluate``); with ``video``, also a video of ``video_envs`` envs
    side by side for one episode."""
    ckpt = torch.load(checkpoint, map_location="cpu", weights_only=False)
    saved = ckpt["spec"]
    train_cfg = from_dict(TrainConfig, saved["train"], "train")
    spec = RunSpec(saved["task"], saved["config_file"], saved["env_overrides"], train_cfg)
    ctx = distributed.setup(device)
    env = make_env(spec, num_envs or episodes, ctx.device, seed, autoreset_mode=AutoresetMode.DISABLED)
    obs_dim, act_dim = env.single_observation_space.shape[0], env.single_action_space.shape[0]
    model = ActorCritic(obs_dim, act_dim, train_cfg.policy).to(ctx.device)
    model.load_state_dict(ckpt["model"])
    normalizer = ObsNormalizer(obs_dim, enabled=train_cfg.ppo.normalize_obs).to(ctx.device)
    normalizer.load_state_dict(ckpt["normalizer"])

    def policy(o: torch.Tensor) -> torch.Tensor:
        return model.actor(normalizer(o))

    result = evaluate(policy, env, episodes, seed)
    if video is not None:
        venv = make_video_env(spec, ctx.device, video_envs, seed)
        frames = rollout_frames(policy, venv, venv.unwrapped.max_episode_steps, seed)
        write_video(video, frames, venv.metadata["render_fps"])
        result["video"] = str(video)
    return result
