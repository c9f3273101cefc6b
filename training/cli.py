"""``warpgym`` (or ``python -m warpgym.training``): ``train`` a policy with PPO, ``play`` a checkpoint,
``export`` its policy for deployment.

    warpgym train [--task ID] [--num-envs N] [--device cpu|cuda|cuda:N] [--seed S] [--config FILE]
                  [--max-iterations K | --max-time MIN] [--logdir DIR] [--resume CKPT]
                  [--video-every K] [--eval-every K] [--verbose] [key=value ...]
    warpgym play --checkpoint CKPT [--num-envs N] [--episodes E] [--device D] [--seed S]
                 [--video FILE] [--video-envs N] [--verbose]
    warpgym export --checkpoint CKPT --output FILE.pt2|FILE.onnx

Overrides are dotted keys of the task's config file: ``train.ppo.learning_rate=3e-4``,
``env.success_threshold=0.05``. Under ``torchrun`` every rank runs ``train``; rank 0 logs and saves.
Warp's banner, module-load lines and compiler warnings are shown only with ``--verbose``. A user
error is one line on stderr naming the argument, with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import sys
import threading
import time
from pathlib import Path

import torch
from gymnasium.vector import AutoresetMode

import sim_core as sc
from warpgym.config import ConfigError, config_dir, config_path, from_dict, merge
from warpgym.render import RenderUnavailableError

from . import distributed
from .checkpoint import CheckpointError, load_checkpoint, load_policy
from .config import RunSpec, TrainConfig, load_run_spec, parse_overrides
from .cpu_threads import cpu_threads
from .evaluate import evaluate
from .export import FORMATS, export_policy, onnx_unavailable
from .runner import Runner, make_env, make_video_env
from .video import rollout_frames, write_video

__all__ = ["main", "play"]

DEFAULT_TASK = "WarpGym/FrankaReach-v0"


class _UsageError(Exception):
    """A user error found after parsing; the message names the argument."""


class _Parser(argparse.ArgumentParser):
    """argparse with errors on one line (``prog: error: message``), without the usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def _device(text: str) -> str:
    """``cpu``, ``cuda`` or ``cuda:N``, present on this machine."""
    if not re.fullmatch(r"cpu|cuda(:\d+)?", text):
        raise argparse.ArgumentTypeError(f"expected cpu, cuda or cuda:N, got {text!r}")
    if text.startswith("cuda"):
        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(f"{text!r}: torch sees no CUDA device on this machine")
        index, count = torch.device(text).index, torch.cuda.device_count()
        if index is not None and index >= count:
            raise argparse.ArgumentTypeError(
                f"{text!r}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}"
            )
    return text


def _config_file(text: str) -> str:
    """A TOML file that exists and can be read (a path, or a name in the config directory)."""
    try:
        path = config_path(text)
    except ConfigError:
        raise argparse.ArgumentTypeError(
            f"no file {text!r} (nor a config of that name in {config_dir()})"
        ) from None
    try:
        path.open("rb").close()
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot read {text!r}: {e.strerror or e}") from None
    return text


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="warpgym", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=False)
    t = sub.add_parser("train", help="train a policy with PPO (the default command)")
    t.add_argument("--task", default=None, help=f"task id (default: {DEFAULT_TASK})")
    t.add_argument(
        "--num-envs", type=_positive_int, default=None, help="envs per process (default: from the config)"
    )
    t.add_argument("--device", type=_device, default=None, help="cpu, cuda or cuda:N (default: best available)")
    t.add_argument("--seed", type=int, default=None)
    t.add_argument(
        "--config", type=_config_file, default=None, help="TOML config (default: the task's file in configs/)"
    )
    stop = t.add_mutually_exclusive_group()
    stop.add_argument("--max-iterations", type=_positive_int, default=None)
    stop.add_argument("--max-time", type=_positive_float, default=None, help="minutes of wall-clock")
    t.add_argument("--logdir", default=None, help="run directory (default: runs/<task>_<time>)")
    t.add_argument("--resume", default=None, help="checkpoint to continue from")
    t.add_argument(
        "--video-every", type=_positive_int, default=None, help="iterations between TensorBoard videos"
    )
    t.add_argument(
        "--eval-every",
        type=_positive_int,
        default=None,
        help="iterations between deterministic evaluations (train.eval_episodes; best.pt, eval.jsonl)",
    )
    t.add_argument("--verbose", action="store_true", help="show Warp's messages and the compiler's warnings")
    t.add_argument("overrides", nargs="*", help="key=value config overrides")
    q = sub.add_parser("play", help="run a checkpoint's deterministic policy on fresh episodes")
    q.add_argument("--checkpoint", required=True)
    q.add_argument("--num-envs", type=_positive_int, default=None, help="envs per round (default: --episodes)")
    q.add_argument("--episodes", type=_positive_int, default=100)
    q.add_argument("--device", type=_device, default=None)
    q.add_argument("--seed", type=int, default=12345, help="seed of the evaluation episodes")
    q.add_argument("--video", default=None, help="also write a video of the policy here (e.g. out.mp4)")
    q.add_argument("--video-envs", type=_positive_int, default=4, help="envs shown side by side in the video")
    q.add_argument("--verbose", action="store_true", help="show Warp's messages and the compiler's warnings")
    x = sub.add_parser("export", help="write a checkpoint's deterministic policy as one .pt2 or .onnx file")
    x.add_argument("--checkpoint", required=True)
    x.add_argument("--output", required=True, help="policy.pt2 (torch.export) or policy.onnx")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run ``warpgym`` with ``argv`` (default: the command line); returns the exit status. A user
    error (a bad argument, file, device, config key or value, or a checkpoint that does not fit)
    is one line on stderr naming the argument, and status 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("train", "play", "export", "-h", "--help"):
        argv.insert(0, "train")
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or a bad argument (2, its line already printed)
        return e.code
    prog = f"warpgym {args.command}"
    try:
        if args.command == "export":
            print(json.dumps(_export(args.checkpoint, args.output)))
            return 0
        if args.command == "play":
            if args.video is not None:
                _make_dir(Path(args.video).parent, "--video")
            try:
                result = play(
                    args.checkpoint,
                    num_envs=args.num_envs,
                    episodes=args.episodes,
                    device=args.device,
                    seed=args.seed,
                    video=args.video,
                    video_envs=args.video_envs,
                    verbose=args.verbose,
                    progress=sys.stderr.isatty(),  # a person waiting; a pipe gets one error line at most
                )
            except CheckpointError as e:
                raise _UsageError(f"argument --checkpoint: {args.checkpoint}: {e}") from e
            print(json.dumps(result))
            return 0
        try:
            return train(args)
        except CheckpointError as e:
            raise _UsageError(f"argument --resume: {args.resume}: {e}") from e
    except (_UsageError, ConfigError, RenderUnavailableError) as e:
        print(f"{prog}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2


def _export(checkpoint: str, output: str) -> dict:
    """``export_policy`` with its errors as usage errors naming the argument."""
    if Path(output).suffix not in FORMATS:
        raise _UsageError(f"argument --output: expected a name ending in .pt2 or .onnx, got {output!r}")
    if output.endswith(".onnx") and (why := onnx_unavailable()):
        raise _UsageError(f"argument --output: {why}")
    _make_dir(Path(output).parent, "--output")
    try:
        return export_policy(checkpoint, output)
    except CheckpointError as e:
        raise _UsageError(f"argument --checkpoint: {checkpoint}: {e}") from e


_BUILDING = "building the envs (a task's first build on a machine compiles its kernels: tens of seconds)"


def _init_sim(device: torch.device, verbose: bool) -> None:
    """Start ``sim_core`` on ``device``, Warp quiet unless ``verbose`` (an env made later finds it
    started; in a process that started it already, it stays as it is)."""
    if not sc.is_initialized():
        sc.init(backend=sc.gpu if device.type == "cuda" else sc.cpu, device=device, debug=verbose)


def _make_dir(path: Path, argument: str) -> None:
    """Create ``path`` (and its parents) now, so a bad ``argument`` fails before any work."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _UsageError(
            f"argument {argument}: cannot create the directory {str(path)!r}: {e.strerror or e}"
        ) from e


def _spec_for(args) -> tuple[RunSpec, dict | None]:
    overrides = parse_overrides(args.overrides)
    flags = (("num_envs", args.num_envs), ("seed", args.seed), ("eval_every", args.eval_every))
    top = {k: v for k, v in flags if v is not None}
    overrides = merge(overrides, {"train": top}) if top else overrides
    if args.resume is None:
        return load_run_spec(args.task or DEFAULT_TASK, args.config, overrides), None
    ckpt = load_checkpoint(args.resume)
    saved = ckpt["spec"]
    if args.task not in (None, saved["task"]):
        raise _UsageError(
            f"argument --task: {args.task!r} is not the task of the --resume checkpoint, {saved['task']!r}"
        )
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
        if ctx.is_main:
            _make_dir(logdir, "--logdir")
        _init_sim(ctx.device, args.verbose)
        if ctx.is_main:
            print(
                f"training {spec.task} on {ctx.device} x {ctx.world_size} process(es), "
                f"{spec.train.num_envs} envs each; logs in {logdir}\n{_BUILDING}",
                flush=True,
            )
        start = time.perf_counter()
        runner = Runner(spec, ctx, logdir if ctx.is_main else None, video_every=args.video_every)
        if ckpt is not None:
            for note in runner.load_state_dict(ckpt):
                print(f"warpgym train: --resume {args.resume}: {note}", file=sys.stderr, flush=True)
        if ctx.is_main:
            print(f"built in {time.perf_counter() - start:.1f} s", flush=True)
        max_time = None if args.max_time is None else args.max_time * 60.0
        main_thread = threading.current_thread() is threading.main_thread()  # where handlers may be set
        previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
        try:
            runner.train(args.max_iterations, max_time)
        finally:
            if main_thread:
                signal.signal(signal.SIGTERM, previous)
        if ctx.is_main:
            print(
                f"done: {runner.iteration} iterations, {runner.env_steps:,} env-steps; "
                f"checkpoint {logdir}/checkpoints/last.pt"
            )
        return 0
    except _Terminated:
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        return 130
    finally:
        distributed.teardown()


class _Terminated(KeyboardInterrupt):
    """SIGTERM while training (a scheduler preempting the job, ``kill``): handled as Ctrl-C, the
    runner saves a checkpoint and stops; the process exits with status 143."""


def _terminate(signum, frame) -> None:
    raise _Terminated


def play(
    checkpoint: str,
    *,
    num_envs: int | None = None,
    episodes: int = 100,
    device: str | None = None,
    seed: int = 12345,
    video: str | None = None,
    video_envs: int = 4,
    verbose: bool = False,
    progress: bool = False,
) -> dict:
    """Success rate and mean return of the checkpoint's deterministic policy (the Gaussian's mean) over
    ``episodes`` fresh episodes (see ``evaluate``); with ``video``, also a video of ``video_envs`` envs
    side by side for one episode. Raises ``CheckpointError`` for a file that is not a checkpoint
    (see ``load_checkpoint``) or whose model does not fit its task's env; ``verbose`` shows Warp's
    messages when this call starts ``sim_core``; ``progress`` says on stderr when the envs are being built
    (stdout stays free for the result)."""
    ckpt = load_checkpoint(checkpoint)
    saved = ckpt["spec"]
    train_cfg = from_dict(TrainConfig, saved["train"], "train")
    spec = RunSpec(saved["task"], saved["config_file"], saved["env_overrides"], train_cfg)
    ctx = distributed.setup(device)
    _init_sim(ctx.device, verbose)
    if progress:
        print(_BUILDING, file=sys.stderr, flush=True)
    env = make_env(spec, num_envs or episodes, ctx.device, seed, autoreset_mode=AutoresetMode.DISABLED)
    obs_dim, act_dim = env.single_observation_space.shape[0], env.single_action_space.shape[0]
    model, normalizer = load_policy(ckpt, obs_dim, act_dim, ctx.device)

    def policy(o: torch.Tensor) -> torch.Tensor:
        return model.actor(normalizer(o))

    with cpu_threads(train_cfg.rollout_threads, ctx.device):
        result = evaluate(policy, env, episodes, seed)
    if video is not None:
        venv = make_video_env(spec, ctx.device, video_envs, seed)
        frames = rollout_frames(policy, venv, venv.unwrapped.max_episode_steps, seed)
        write_video(video, frames, venv.metadata["render_fps"])
        result["video"] = str(video)
    return result
