"""Deterministic evaluation on fresh episodes, without the bias toward short episodes; evaluations
during training."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode

from .checkpoint import link_atomic

__all__ = ["evaluate", "Evaluations"]


@torch.inference_mode()
def evaluate(
    policy: Callable[[torch.Tensor], torch.Tensor], env: gym.vector.VectorEnv, episodes: int, seed: int
) -> dict[str, float | int]:
    """Success rate and mean return of ``policy`` (observations -> actions) over ``episodes`` episodes.

    ``env`` must be in ``DISABLED`` autoreset mode. It runs rounds of ``env.num_envs`` fresh episodes
    (``reset(seed=seed + round)``) and each env contributes exactly its first episode of a round, so
    short (e.g. successful) episodes are not over-counted.
    """
    if env.metadata["autoreset_mode"] != AutoresetMode.DISABLED:
        raise ValueError("evaluate: the env must run with autoreset_mode=DISABLED")
    n = env.num_envs
    returns, successes = [], []
    for r in range(math.ceil(episodes / n)):
        obs, _ = env.reset(seed=seed + r)
        finished = torch.zeros(n, dtype=torch.bool, device=obs.device)
        ep_return = torch.zeros(n, device=obs.device)
        ep_success = torch.zeros(n, dtype=torch.bool, device=obs.device)
        for _ in range(env.unwrapped.max_episode_steps):
            obs, _, _, _, info = env.step(policy(obs))
            new = info["_episode"] & ~finished
            ep_return = torch.where(new, info["episode"]["r"], ep_return)
            ep_success = torch.where(new, info["episode"]["success"], ep_success)
            finished |= new
            if bool(finished.all()):
                break
        take = min(n, episodes - r * n)
        returns.append(ep_return[:take].cpu())
        successes.append(ep_success[:take].cpu())
    ret, succ = torch.cat(returns), torch.cat(successes)
    return {
        "success_rate": succ.float().mean().item(),
        "mean_return": ret.mean().item(),
        "episodes": int(ret.numel()),
    }


class Evaluations:
    """Deterministic evaluations during training (``train.eval_every``), on envs of their own built
    at the first one: the same ``episodes`` fresh episodes every time (seeds no training env
    uses), so the evaluations compare checkpoints on equal terms. With a run directory each result
    is appended to ``eval.jsonl`` there, and the checkpoint of the best so far (success rate, then
    mean return) is linked as ``checkpoints/best.pt``; a run resumed into the same directory
    continues from the best that file records."""

    SEED = 1_000_003  # the evaluation episodes' seed: far from the training envs' (train.seed + rank)

    def __init__(self, make_env: Callable[[], gym.vector.VectorEnv], episodes: int, logdir: Path | None):
        self._make_env, self.episodes, self.logdir = make_env, episodes, logdir
        self._env: gym.vector.VectorEnv | None = None
        self.best: tuple[float, float] | None = None  # (success rate, mean return)
        if logdir is not None and (logdir / "eval.jsonl").is_file():
            for line in (logdir / "eval.jsonl").read_text().splitlines():
                record = json.loads(line)
                if Path(record.get("checkpoint") or "").is_file():
                    self._consider(record)

    def _consider(self, record: dict) -> bool:
        """Whether ``record`` beats the best so far (then it is the best)."""
        score = (record["success_rate"], record["mean_return"])
        if self.best is not None and score <= self.best:
            return False
        self.best = score
        return True

    def __call__(
        self,
        policy: Callable[[torch.Tensor], torch.Tensor],
        iteration: int,
        env_steps: int,
        checkpoint: Path | None,
    ) -> dict[str, Any]:
        """Evaluate ``policy``, the one of ``checkpoint`` (saved at ``iteration``; None: not saved).
        Returns ``evaluate``'s result with ``iteration``, ``env_steps``, ``seconds`` (its wall-clock,
        the first build included) and ``best`` (whether it is the best so far)."""
        start = time.perf_counter()
        if self._env is None:
            self._env = self._make_env()
        result: dict[str, Any] = {"iteration": iteration, "env_steps": env_steps}
        result |= evaluate(policy, self._env, self.episodes, self.SEED)
        result["seconds"] = round(time.perf_counter() - start, 3)
        result["checkpoint"] = None if checkpoint is None else str(checkpoint)
        result["best"] = self._consider(result)
        if self.logdir is not None:
            with (self.logdir / "eval.jsonl").open("a") as f:
                f.write(json.dumps(result) + "\n")
            if result["best"] and checkpoint is not None:
                link_atomic(checkpoint, checkpoint.parent / "best.pt")
        return result
